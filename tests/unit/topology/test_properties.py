"""Properties on small random clusters with racks.

* placement: every member of a constrained gang lands in one rack, and the gang is placed
  exactly when brute force (the real cycle confined to each rack in turn) finds a rack;
* preemption: the chosen victim set is exactly as cheap as the cheapest set brute force finds
  over every subset of the potential victims (each checked by the same topology-aware cycle,
  per rack; between racks tied up to the nodes disrupted, upstream's choice by placement
  score, then the victims' age: see `brute.cheapest_set`), and never costlier than the
  upstream-style choice (every victim removed, the best-scored rack, `kep` reprieve there).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.gang_placer import GangPlacer
from gangsched.core.model import DisruptionMode, PodGroup
from gangsched.core.preemption import build_preemptor
from gangsched.core.preemption.cost import Cost, victim_cost
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import collect_victim_table, gang_priority
from gangsched.core.scheduler import Scheduler
from gangsched.core.status import Code
from gangsched.core.topology.domain_filter import confined
from gangsched.core.topology.domains import partition
from gangsched.core.topology.request import TopologyRequest
from tests.builders import SCHEDULER, cluster, group, node, pod
from tests.unit.topology.brute import cheapest_set

RACK = "example.com/rack"
PREEMPTOR = 100


@dataclass(frozen=True)
class Spec:
    racks: tuple[tuple[int, ...], ...]  # per rack, the CPUs of its nodes
    #: rack, node, cpu, prio, group (0, 1: All mode; 2: Single mode, minMember 2)
    running: tuple[tuple[int, int, int, int, int | None], ...]
    members: int
    member_cpu: int
    #: Per node (racks flattened in order): its `pool` label ("" none) and whether it is
    #: cordoned; empty: plain nodes. The members select `selector` when set. These let the
    #: node-static filters drop racks, which brute force must agree with.
    pools: tuple[tuple[str, bool], ...] = ()
    selector: str | None = None


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    racks = tuple(
        tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=3)))
        for _ in range(draw(st.integers(2, 3)))
    )
    running = []
    for _ in range(draw(st.integers(0, 7))):
        r = draw(st.integers(0, len(racks) - 1))
        n = draw(st.integers(0, len(racks[r]) - 1))
        running.append(
            (
                r,
                n,
                draw(st.integers(1, 2)),
                draw(st.sampled_from([10, 20, 200])),
                draw(st.one_of(st.none(), st.integers(0, 2))),
            )
        )
    count = sum(len(r) for r in racks)
    pools = tuple(
        (draw(st.sampled_from(["", "a", "b"])), draw(st.booleans()))
        for _ in range(count if draw(st.booleans()) else 0)
    )
    return Spec(
        racks,
        tuple(running),
        draw(st.integers(1, 4)),
        draw(st.integers(1, 2)),
        pools,
        draw(st.sampled_from([None, "a", "b"])) if pools else None,
    )


def build(spec: Spec) -> tuple[ClusterState, PodGroup]:
    nodes = [
        node(f"r{r}-{n}", cpu, labels={RACK: f"r{r}"})
        for r, cpus in enumerate(spec.racks)
        for n, cpu in enumerate(cpus)
    ]
    for i, (pool, cordoned) in enumerate(spec.pools):
        if pool:
            nodes[i].labels["pool"] = pool
        nodes[i] = dataclasses.replace(nodes[i], unschedulable=cordoned)
    groups: list[PodGroup] = [
        group(f"v{i}", 1, priority=10, mode=DisruptionMode.ALL) for i in range(2)
    ]
    # A Single-mode gang with a quorum of 2: breaking it costs every member it has bound.
    groups.append(group("v2", 2, priority=10))
    running = []
    used: dict[str, int] = {}
    for i, (r, n, cpu, prio, g) in enumerate(spec.running):
        name = f"r{r}-{n}"
        if used.get(name, 0) + cpu > spec.racks[r][n]:
            continue  # keep the cluster valid: never overcommit a node
        used[name] = used.get(name, 0) + cpu
        running.append(
            pod(
                f"run{i}",
                cpu,
                memory=None,
                node_name=name,
                priority=10 if g is not None else prio,
                group=f"v{g}" if g is not None else None,
                created=float(i),
            )
        )
    gang = group("g", spec.members, priority=PREEMPTOR)
    gang.topology = TopologyRequest(required=RACK)
    members = [
        pod(
            f"g-{i}",
            spec.member_cpu,
            memory=None,
            group="g",
            priority=PREEMPTOR,
            created=100.0,
            node_selector={"pool": spec.selector} if spec.selector else None,
        )
        for i in range(spec.members)
    ]
    return cluster(nodes, [*running, *members], [*groups, gang]), gang


def _rack_fits(state: ClusterState, sched: Scheduler, gang: PodGroup) -> bool:
    """Brute force feasibility: the real cycle confined to each rack in turn."""
    snap = state.snapshot
    g = sched.gang(gang.ref)
    for domain in partition(snap, RACK).domains:
        framework = confined(sched.framework, {gang.ref: domain.mask}, {gang.ref: domain.name})
        mark = snap.checkpoint()
        result = GangPlacer(framework).place(g, snap)
        snap.rollback(mark)
        if result.code is Code.SUCCESS:
            return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs())
def test_placement_keeps_members_in_one_rack_and_agrees_with_brute_force(spec: Spec) -> None:
    state, gang = build(spec)
    sched = Scheduler(state)
    expected = _rack_fits(state, sched, gang)
    report = sched.schedule(sched.gang(gang.ref), 0.0)
    placed = [state.pods[f"default/g-{i}"].node_name for i in range(spec.members)]
    assert (report.result == "scheduled") is expected, report.message
    if expected:
        racks = {name.split("-")[0] for name in placed if name is not None}
        assert len(racks) == 1, placed
        assert all(placed)
    else:
        assert "topology" in report.message


def _brute_force_cost(state: ClusterState, sched: Scheduler, gang: PodGroup) -> Cost | None:
    g = sched.gang(gang.ref)
    units = collect_victim_table(g, state, gang_priority(g)).units
    return cheapest_set(state, sched.framework, g, units)


# Two equal victims, run0 older than run1: mincost evicts the younger; kep's dry run places by
# node score and name and may evict either (found by this property; see `_upstream_rank`).
_TIED = Spec(
    racks=((1, 1, 1), (1,)),
    running=((0, 0, 1, 10, None), (0, 1, 1, 10, None)),
    members=2,
    member_cpu=1,
)


# Two racks each freed by one equal victim: the younger (run2) is in r1, but with the
# lower-priority pods removed r0 is the fuller once the gang is placed (2/2 against 4/5 CPUs):
# upstream's choice, r0, wins the tie (issue 29 item 5), not the victims' age.
_TIED_RACKS = Spec(
    racks=((2,), (2, 2, 1)),
    running=((0, 0, 2, 10, None), (1, 0, 2, 200, None), (1, 1, 2, 10, None)),
    members=2,
    member_cpu=1,
)


def _upstream_rank(cost: Cost) -> Cost:
    """The cost without its start-time tie-breakers. `kep` reproduces upstream's KEP-5710 dry
    run, which settles equally costly gang placements by node score and then name, not by the
    victims' start times (pickOneNodeForPreemption's latest-start rule is its lone-pod path,
    which `kep` follows too). Making kep's member-by-member placement prefer younger victims
    was tried: it is myopic (upstream's TestPodGroupPreemption 'Partial Preemption' then
    evicts two pods where upstream evicts one), so kep is held to the minimum up to those
    tie-breakers and mincost, the default, to the exact minimum. The same holds for the
    groups-disrupted count, gangsched's criterion: upstream's reprieve keeps the older of two
    equal victims whether or not the younger is the last remnant of a broken gang."""
    return dataclasses.replace(cost, groups=0, oldest_start=0.0, total_start=0.0)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs(), st.sampled_from(["kep", "mincost"]))
@example(_TIED, "kep")
@example(_TIED, "mincost")
@example(_TIED_RACKS, "kep")
@example(_TIED_RACKS, "mincost")
def test_preemption_cost_is_the_brute_force_minimum(spec: Spec, strategy: str) -> None:
    state, gang = build(spec)
    sched = Scheduler(state)
    if _rack_fits(state, sched, gang):
        return  # no preemption to judge
    g = sched.gang(gang.ref)
    if len(collect_victim_table(g, state, gang_priority(g)).units) > 8:
        return
    expected = _brute_force_cost(state, sched, gang)
    mark = state.snapshot.checkpoint()
    failed = sched.placer.place(g, state.snapshot)
    state.snapshot.rollback(mark)
    outcome = build_preemptor(strategy=strategy, scheduler_name=SCHEDULER).preempt(
        g, failed, state, sched.framework
    )
    if expected is None:
        assert not outcome.victims, outcome.message
        return
    assert outcome.started and outcome.victims, outcome.message
    units = collect_victim_table(g, state, gang_priority(g)).units
    victims = {p.key for p in outcome.victims}
    chosen = [u for u in units if {p.key for p in u.pods} <= victims]
    assert sum(u.size for u in chosen) == len(victims)
    got = victim_cost(chosen, 0, BudgetIndex(state.budgets.values()))
    if strategy == "kep":
        got, expected = _upstream_rank(got), _upstream_rank(expected)
    assert got == expected, (got.describe(), expected.describe())
