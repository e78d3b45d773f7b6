"""Domain placement: candidates, tightest feasible domain, pinning, preferred levels, messages."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED
from gangsched.core.dra.state import DraState
from gangsched.core.model import HostPort, Node, PodGroup, Taint
from gangsched.core.scheduler import Scheduler
from gangsched.core.topology.placement import TopologyConfig
from gangsched.core.topology.request import TopologyRequest
from tests.builders import (
    SCHEDULER,
    claim,
    cluster,
    gang_pods,
    gpu_claim_spec,
    gpu_class,
    gpu_slice,
    group,
    local_volume,
    node,
    pod,
    resource_claim,
    volume_book,
    volume_cluster,
    with_claims,
    with_resource_claims,
)

RACK = "example.com/rack"
ZONE = "example.com/zone"


def racks(
    layout: dict[str, int],
    cpu: int = 2,
    *,
    labels: dict[str, str] | None = None,
    extra: dict[str, int] | None = None,
) -> list[Node]:
    """Nodes <rack>-<i> with `cpu` CPUs each, labelled with their rack (and `labels`)."""
    return [
        node(f"{rack}-{i}", cpu, labels={RACK: rack, **(labels or {})}, extra=extra)
        for rack, count in layout.items()
        for i in range(count)
    ]


def constrained(name: str, min_member: int, **request: object) -> PodGroup:
    g = group(name, min_member)
    g.topology = TopologyRequest(**request)  # type: ignore[arg-type]
    return g


def rack_of(state: ClusterState, pod_key: str) -> str:
    placed = state.pods[pod_key]
    assert placed.node_name is not None, pod_key
    return next(n for n in state.snapshot.nodes if n.name == placed.node_name).labels[RACK]


def run(state: ClusterState) -> Scheduler:
    sched = Scheduler(state)
    sched.enqueue_pending()
    while sched.step(now=0.0) is not None:
        pass
    return sched


def test_upstream_tas_case_picks_the_most_allocated_rack() -> None:
    """k/k tas_test.go: racks of 2, 3, 3 and 1 nodes of 2 CPU with 0, 2 and 1 CPU in use;
    a 3 x 1 CPU gang goes to rack2 (5/6 allocated after placing, the highest)."""
    nodes = racks({"rack1": 2, "rack2": 3, "rack3": 3, "rack4": 1})
    load = [
        pod("busy-2", 2, memory=None, node_name="rack2-0"),
        pod("busy-3", 1, memory=None, node_name="rack3-0"),
    ]
    members = gang_pods("g", 3, memory=None)
    state = cluster(nodes, [*load, *members], [constrained("g", 3, required=RACK)])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result == SCHEDULED
    assert {rack_of(state, p.key) for p in members} == {"rack2"}


def test_every_member_in_one_domain_even_when_spreading_would_fit() -> None:
    nodes = racks({"a": 2, "b": 2})  # 4 CPU per rack, 8 in all
    members = gang_pods("g", 5, memory=None)
    state = cluster(nodes, members, [constrained("g", 5, required=RACK)])
    run(state)
    assert all(state.pods[p.key].node_name is None for p in members)


def test_unschedulable_message_names_domain_classes() -> None:
    # Three racks with one GPU each (too small for two members of one GPU), two without any.
    nodes = [
        *racks({"a": 1, "b": 1, "c": 1}, extra={"nvidia.com/gpu": 1}),
        *racks({"d": 1, "e": 1}),
    ]
    members = gang_pods("g", 2, memory=None, extra={"nvidia.com/gpu": 1})
    state = cluster(nodes, members, [constrained("g", 2, required=RACK)])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result != SCHEDULED
    assert "topology: no domain of example.com/rack fits the group" in report.message
    assert (
        "3 racks too small (at most 1 of the 2 pod(s) needed fit by free capacity: "
        "example.com/rack=a, example.com/rack=b, example.com/rack=c)"
    ) in report.message
    assert "2 racks lack nvidia.com/gpu (example.com/rack=d, example.com/rack=e)" in (
        report.message
    )


def test_too_small_domains_are_reported_with_their_capacity() -> None:
    nodes = racks({"a": 1, "b": 2})
    members = gang_pods("g", 5, memory=None)
    state = cluster(nodes, members, [constrained("g", 5, required=RACK)])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    # One class for both racks, with the larger rack's figure; each rack's own in the trials.
    assert "2 racks too small (at most 4 of the 5 pod(s) needed" in report.message
    assert report.topology is not None
    assert {t.domain: t.reason for t in report.topology.trials} == {
        "example.com/rack=a": "too small: at most 2 pod(s) fit by free capacity",
        "example.com/rack=b": "too small: at most 4 pod(s) fit by free capacity",
    }


def test_domains_the_members_may_not_use_never_spend_the_budget() -> None:
    # Forty CPU racks and one GPU-pool rack the members select: the forty are dropped by the
    # node filters before any cycle runs, however small the evaluation budget.
    nodes = [
        *racks({f"r{i:02}": 1 for i in range(40)}, labels={"pool": "cpu"}),
        *racks({"zz": 2}, labels={"pool": "gpu"}),
    ]
    members = gang_pods("g", 2, memory=None, node_selector={"pool": "gpu"})
    state = cluster(nodes, members, [constrained("g", 2, required=RACK)])
    sched = Scheduler(state)
    sched.placer.group.topology = TopologyConfig(max_evaluations=1)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result == SCHEDULED, report.message
    assert {rack_of(state, p.key) for p in members} == {"zz"}
    assert report.topology is not None
    assert len(report.topology.evaluations) == 1
    filtered = [t for t in report.topology.trials if t.outcome == "filtered"]
    assert len(filtered) == 40
    assert filtered[0].reason == (
        "no node the members may use: node(s) didn't match Pod's node affinity/selector"
    )


def test_cordoned_and_tainted_racks_are_named_in_the_message() -> None:
    taint = Taint("dedicated", "infra", "NoSchedule")
    nodes = [
        *[node(f"a-{i}", 2, labels={RACK: "a"}, unschedulable=True) for i in range(2)],
        *[node(f"b-{i}", 2, labels={RACK: "b"}, taints=[taint]) for i in range(2)],
        *[node(f"c-{i}", 2, labels={RACK: "c"}, taints=[taint]) for i in range(2)],
    ]
    members = gang_pods("g", 2, memory=None)
    state = cluster(nodes, members, [constrained("g", 2, required=RACK)])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result != SCHEDULED
    assert (
        "2 racks have no node the members may use: node(s) had untolerated taint "
        "{dedicated: infra} (example.com/rack=b, example.com/rack=c)"
    ) in report.message
    assert (
        "1 rack has no node the members may use: node(s) were unschedulable (example.com/rack=a)"
    ) in report.message


def test_a_rack_with_one_usable_node_is_still_a_candidate() -> None:
    # Half of rack a is cordoned: the bound counts the other half, which holds the gang.
    nodes = [
        node("a-0", 2, labels={RACK: "a"}, unschedulable=True),
        node("a-1", 4, labels={RACK: "a"}),
        node("b-0", 1, labels={RACK: "b"}),
    ]
    members = gang_pods("g", 3, memory=None)
    state = cluster(nodes, members, [constrained("g", 3, required=RACK)])
    run(state)
    assert {state.pods[p.key].node_name for p in members} == {"a-1"}


def test_nodes_without_the_label_are_never_used() -> None:
    nodes = [node("bare", 8), *racks({"a": 1})]
    members = gang_pods("g", 2, memory=None)
    state = cluster(nodes, members, [constrained("g", 2, required=RACK)])
    run(state)
    assert {state.pods[p.key].node_name for p in members} == {"a-0"}


def test_no_labelled_node_says_so() -> None:
    members = gang_pods("g", 1, memory=None)
    state = cluster([node("bare", 8)], members, [constrained("g", 1, required=RACK)])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert "no node has the label example.com/rack" in report.message


def test_bound_members_pin_the_domain() -> None:
    nodes = racks({"a": 2, "b": 3})
    bound = replace(pod("g-0", memory=None, group="g", node_name="b-0"))
    pending = gang_pods("g", 3, memory=None, start=1.0)[1:]
    state = cluster(nodes, [bound, *pending], [constrained("g", 2, required=RACK)])
    run(state)
    assert {rack_of(state, p.key) for p in pending} == {"b"}


def test_bound_members_in_two_domains_are_an_error() -> None:
    nodes = racks({"a": 2, "b": 2})
    bound = [
        pod("g-0", memory=None, group="g", node_name="a-0"),
        pod("g-1", memory=None, group="g", node_name="b-0"),
    ]
    pending = [pod("g-2", memory=None, group="g", created=2.0)]
    state = cluster(nodes, [*bound, *pending], [constrained("g", 3, required=RACK)])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(pending[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result == "error"
    assert "bound in 2 domains of example.com/rack (example.com/rack=a, example.com/rack=b)" in (
        report.message
    )


def test_preferred_level_first_then_required() -> None:
    nodes = [
        *racks({"r1": 1, "r2": 1}, cpu=2, labels={ZONE: "z1"}),
        *racks({"r3": 2}, cpu=2, labels={ZONE: "z2"}),
    ]
    # 3 pods: no rack of z1 holds them, rack r3 (z2) does: preferred rack wins over zone z1.
    members = gang_pods("g", 3, memory=None)
    state = cluster(nodes, members, [constrained("g", 3, required=ZONE, preferred=(RACK,))])
    run(state)
    assert {rack_of(state, p.key) for p in members} == {"r3"}
    # 4 pods fit no rack: climb to the zone level (z1 or z2 hold 4 CPU each).
    more = gang_pods("h", 4, memory=None)
    state = cluster(nodes, more, [constrained("h", 4, required=ZONE, preferred=(RACK,))])
    run(state)
    zones = {
        next(n for n in state.snapshot.nodes if n.name == state.pods[p.key].node_name).labels[ZONE]
        for p in more
    }
    assert len(zones) == 1


def test_preferred_alone_falls_back_to_the_whole_cluster() -> None:
    nodes = racks({"a": 1, "b": 1})
    members = gang_pods("g", 3, memory=None)
    state = cluster(nodes, members, [constrained("g", 3, preferred=(RACK,))])
    run(state)
    assert all(state.pods[p.key].node_name for p in members)


def test_nominated_domain_is_evaluated_first() -> None:
    nodes = racks({"a": 2, "b": 2})
    busy = pod("busy", 2, memory=None, node_name="a-0")  # rack a is tighter
    members = [replace(p, nominated_node_name="b-0") for p in gang_pods("g", 2, memory=None)]
    state = cluster(nodes, [busy, *members], [constrained("g", 2, required=RACK)])
    run(state)
    assert {rack_of(state, p.key) for p in members} == {"b"}


def test_budget_bounds_the_evaluations() -> None:
    # Every rack passes the capacity bound, and every cycle fails on a host port a running pod
    # holds: with a budget of 3, three racks are evaluated and the others are named as skipped.
    port = (HostPort("TCP", "", 9000),)
    nodes = racks({f"r{i:02}": 1 for i in range(40)}, cpu=4)
    holders = [
        pod(f"holder-{i:02}", 1, memory=None, node_name=f"r{i:02}-0", host_ports=port)
        for i in range(40)
    ]
    members = gang_pods("g", 2, memory=None, host_ports=port)
    state = cluster(nodes, [*holders, *members], [constrained("g", 1, required=RACK)])
    sched = Scheduler(state)
    sched.placer.group.topology = TopologyConfig(max_evaluations=3)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result != SCHEDULED
    assert report.topology is not None
    assert len(report.topology.evaluations) == 3
    assert "3 racks do not hold the members together: node(s) didn't have free ports" in (
        report.message
    )
    assert "37 racks not evaluated, the evaluation budget was spent" in report.message


def test_percentage_of_domains_stops_after_enough_feasible_ones() -> None:
    # Ten racks of two 4-CPU nodes; four members share a host port, so a rack places two
    # (minMember) although its capacity bound promises four. Each feasible rack's score then
    # stays below the next rack's bound, and only the percentage (20: two feasible racks)
    # ends the search.
    port = (HostPort("TCP", "", 9000),)
    nodes = racks({f"r{i}": 2 for i in range(10)}, cpu=4)
    members = gang_pods("g", 4, memory=None, host_ports=port)
    state = cluster(nodes, members, [constrained("g", 2, required=RACK)])
    sched = Scheduler(state)
    sched.placer.group.topology = TopologyConfig(percentage_of_domains=20)
    gang = sched.gang(members[0].group)  # type: ignore[arg-type]
    result = sched.placer.place(gang, state.snapshot)
    assert result.topology is not None
    outcomes = [t.outcome for t in result.topology.trials]
    assert outcomes == ["feasible"] * 2 + ["not-evaluated"] * 8
    assert {t.reason for t in result.topology.trials[2:]} == {"the evaluation budget was spent"}
    assert (result.topology.key, result.topology.value) == (RACK, "r0")
    assert len(result.placements) == 2


def test_tightest_feasible_domain_is_found_without_evaluating_all() -> None:
    # Ten racks; r3 is the fullest. Only one evaluation is needed: its bound beats all others.
    nodes = racks({f"r{i}": 2 for i in range(10)})
    load = [pod("busy", 2, memory=None, node_name="r3-0")]
    members = gang_pods("g", 2, memory=None)
    state = cluster(nodes, [*load, *members], [constrained("g", 2, required=RACK)])
    sched = Scheduler(state)
    gang = sched.gang(members[0].group)  # type: ignore[arg-type]
    result = sched.placer.place(gang, state.snapshot)
    assert result.topology is not None
    assert (result.topology.key, result.topology.value) == (RACK, "r3")
    assert len(result.topology.evaluations) == 1


def test_a_gang_short_of_members_waits_instead_of_failing_every_domain() -> None:
    nodes = racks({"a": 1, "b": 1})
    members = gang_pods("g", 1, memory=None)
    state = cluster(nodes, members, [constrained("g", 3, required=RACK)])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result == "waiting"
    assert "has 1 of minMember 3 pods" in report.message


def test_volumes_apply_inside_the_domain() -> None:
    """Rack a is the tighter one, but a member's local PV lives on a node of rack b: the
    volume filters run inside each domain, so only b is feasible."""
    nodes = racks({"a": 2, "b": 2})
    busy = pod("busy", 2, memory=None, node_name="a-0")
    members = gang_pods("g", 2, memory=None)
    with_claims(members[0], "data")
    book = volume_book(claims=[claim("data")], volumes=[local_volume("pv-b", "b-1")])
    state = volume_cluster(nodes, [busy, *members], [constrained("g", 2, required=RACK)], book=book)
    run(state)
    assert {rack_of(state, p.key) for p in members} == {"b"}
    assert state.pods[members[0].key].node_name == "b-1"


def test_gang_group_sharing_a_constraint_shares_one_domain() -> None:
    nodes = racks({"a": 1, "b": 2})
    first, second = constrained("x", 2, required=RACK), constrained("y", 2, required=RACK)
    first.gang_group = second.gang_group = (first.ref, second.ref)
    pods = [*gang_pods("x", 2, memory=None), *gang_pods("y", 2, memory=None)]
    state = cluster(nodes, pods, [first, second])
    run(state)
    assert len({rack_of(state, p.key) for p in pods}) == 1
    assert {rack_of(state, p.key) for p in pods} == {"b"}


def test_gang_group_with_different_constraints_gets_a_domain_each() -> None:
    nodes = [
        *racks({"a": 1}, labels={ZONE: "z1"}),
        *racks({"b": 1}, labels={ZONE: "z2"}),
    ]
    first, second = constrained("x", 2, required=RACK), constrained("y", 2, required=ZONE)
    first.gang_group = second.gang_group = (first.ref, second.ref)
    xs, ys = gang_pods("x", 2, memory=None), gang_pods("y", 2, memory=None)
    state = cluster(nodes, [*xs, *ys], [first, second])
    run(state)
    assert len({rack_of(state, p.key) for p in xs}) == 1
    assert len({rack_of(state, p.key) for p in ys}) == 1
    assert all(state.pods[p.key].node_name for p in [*xs, *ys])


def test_dra_claims_are_allocated_inside_the_domain() -> None:
    """Rack a is the tighter one by CPU but its node has no GPUs: the members' claims can be
    allocated only in rack b, and the DynamicResources filter runs inside each domain."""
    nodes = [*racks({"a": 1}, cpu=8), *racks({"b": 2}, cpu=8)]
    busy = pod("busy", 4, memory=None, node_name="a-0")
    members = gang_pods("g", 2, memory=None)
    for i, member in enumerate(members):
        with_resource_claims(member, f"gpu-{i}")
    claims = [resource_claim(f"gpu-{i}", gpu_claim_spec(2)) for i in range(2)]
    dra = DraState.build(
        classes=[gpu_class()], slices=[gpu_slice("b-0", 4), gpu_slice("b-1", 4)], claims=claims
    )
    state = ClusterState.build(
        scheduler_name=SCHEDULER,
        nodes=nodes,
        pods=[busy, *members],
        groups=[constrained("g", 2, required=RACK)],
        extensions=[dra],
    )
    run(state)
    assert {rack_of(state, p.key) for p in members} == {"b"}
