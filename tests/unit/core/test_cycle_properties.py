"""Invariants of the cycle over random small clusters (hypothesis).

- no node is ever overcommitted (checked from the pods, not from the snapshot's counters);
- a gang is bound whole (at least minMember) or not at all;
- the same input gives the same output;
- where brute force finds a placement for a gang, the cycle finds one too.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED
from gangsched.core.scheduler import Scheduler
from tests.builders import cluster, group, node, pod

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    node_count = draw(st.integers(1, 4))
    nodes = [
        node(
            f"n{i}",
            cpu=draw(st.integers(1, 8)),
            pods=draw(st.integers(1, 6)),
            labels={"zone": draw(st.sampled_from(["a", "b"]))},
        )
        for i in range(node_count)
    ]
    pods = []
    for i in range(draw(st.integers(0, 4))):
        target = draw(st.sampled_from(nodes))
        pods.append(pod(f"run-{i}", cpu=draw(st.sampled_from([0.5, 1, 2])), node_name=target.name))
    groups = []
    created = 0.0
    for g in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 4))
        groups.append(group(f"g{g}", draw(st.integers(1, size))))
        for m in range(size):
            created += 1
            zone = draw(st.sampled_from([None, "a", "b"]))
            pods.append(
                pod(
                    f"g{g}-{m}",
                    group=f"g{g}",
                    cpu=draw(st.sampled_from([0.5, 1, 2, 3])),
                    created=created,
                    node_selector={"zone": zone} if zone else None,
                )
            )
    # Running pods may overcommit a node in the input; keep inputs valid.
    state = cluster(nodes, pods, groups)
    if (state.snapshot.requested > state.snapshot.allocatable).any():
        from hypothesis import assume

        assume(False)
    return state


def run(state: ClusterState) -> dict[str, str | None]:
    sched = Scheduler(state)
    sched.enqueue_pending()
    now = 0.0
    while True:
        report = sched.step(now)
        if report is None:
            break
        if report.result == SCHEDULED:
            now += 100.0
            sched.queue.cluster_changed(now)
            sched.enqueue_pending(now)
    return {key: p.node_name for key, p in sorted(state.pods.items())}


def usage_from_pods(state: ClusterState) -> dict[str, tuple[int, int]]:
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for p in state.pods.values():
        if p.node_name:
            used[p.node_name][0] += p.requests.get("cpu", 0)
            used[p.node_name][1] += 1
    return {name: (cpu, count) for name, (cpu, count) in used.items()}


@SETTINGS
@given(clusters())
def test_no_node_is_overcommitted(state: ClusterState) -> None:
    run(state)
    for name, (cpu, count) in usage_from_pods(state).items():
        alloc = state.nodes[name].allocatable
        assert cpu <= alloc["cpu"], name
        assert count <= alloc["pods"], name


@SETTINGS
@given(clusters())
def test_gangs_are_all_or_nothing(state: ClusterState) -> None:
    run(state)
    for ref, grp in state.groups.items():
        members = state.group_members(ref)
        bound = sum(1 for p in members if p.node_name)
        assert bound == 0 or bound >= grp.min_member, (ref, bound, grp.min_member)


@SETTINGS
@given(st.data())
def test_same_input_same_output(data: st.DataObject) -> None:
    seed = data.draw(st.integers(0, 2**32 - 1))
    first = data.draw(clusters().map(lambda s: s), label="cluster")
    import copy

    second = copy.deepcopy(first)
    assert run(first) == run(second), seed


def brute_force_feasible(state: ClusterState, gang: str) -> bool:
    grp = state.groups[next(r for r in state.groups if r.name == gang)]
    members = [p for p in state.group_members(grp.ref) if p.node_name is None]
    nodes = list(state.nodes.values())
    free = {
        n.name: [
            n.allocatable["cpu"]
            - sum(p.requests.get("cpu", 0) for p in state.pods.values() if p.node_name == n.name),
            n.allocatable["pods"] - sum(1 for p in state.pods.values() if p.node_name == n.name),
        ]
        for n in nodes
    }
    choices = [None, *nodes]
    for assignment in itertools.product(choices, repeat=len(members)):
        if sum(1 for a in assignment if a is not None) < grp.min_member:
            continue
        left = {k: list(v) for k, v in free.items()}
        ok = True
        for member, target in zip(members, assignment, strict=True):
            if target is None:
                continue
            selector = dict(member.constraints.node_selector)
            if any(target.labels.get(k) != v for k, v in selector.items()):
                ok = False
                break
            left[target.name][0] -= member.requests.get("cpu", 0)
            left[target.name][1] -= 1
            if left[target.name][0] < 0 or left[target.name][1] < 0:
                ok = False
                break
        if ok:
            return True
    return False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_cycle_finds_a_placement_whenever_brute_force_does(state: ClusterState) -> None:
    # Only the first gang, alone: competition between gangs is a queue-order question.
    first = sorted(state.groups, key=lambda r: r.name)[0]
    for ref in list(state.groups):
        if ref != first:
            for p in state.group_members(ref):
                state.delete_pod(p.key)
            state.delete_group(ref)
    feasible = brute_force_feasible(state, first.name)
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None
    assert (report.result == SCHEDULED) == feasible, report.message
