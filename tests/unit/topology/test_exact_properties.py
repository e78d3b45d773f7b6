"""The exact search makes constrained preemption optimal where a domain has few victims.

Random clusters of one to three racks, with lone pods of mixed priorities and start times,
three victim PodGroups (All or Single mode, quorum 1-3) and an optional PodDisruptionBudget.
Whenever at most ten victim units exist, `mincost` must choose a set exactly as cheap, by
the whole cost order, as the cheapest set brute force finds over every subset (each checked
by the same topology-aware cycle, per rack; between racks tied up to the nodes disrupted,
upstream's choice by placement score comes before the victims' age: `brute.cheapest_set`),
up to the final tie-break on the sum of the victims' start times (see `_exact_part`).
Without the exact search, `mincost`'s heuristics miss that minimum in about 4% of such
clusters (23 of 604 in a seeded sample: a pod or a workload too many, or victims spread
over a node too many); see `NEEDS_EXACT`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.model import DisruptionMode, PodGroup
from gangsched.core.preemption import TopologyPreemptionConfig, build_preemptor
from gangsched.core.preemption.cost import Cost, victim_cost
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import collect_victim_table, gang_priority
from gangsched.core.scheduler import Scheduler
from gangsched.core.status import Code
from gangsched.core.topology.request import TopologyRequest
from tests.builders import SCHEDULER, budget, cluster, group, node, pod
from tests.unit.topology.brute import cheapest_set

RACK = "example.com/rack"
PREEMPTOR = 100
#: Brute force looks at every subset: 2**10 at most.
MAX_UNITS = 10

#: (rack, node, cpu, priority, victim group or None, start time, PDB-protected)
Running = tuple[int, int, int, int, int | None, float, bool]


@dataclass(frozen=True)
class Spec:
    racks: tuple[tuple[int, ...], ...]
    #: (minMember, DisruptionMode) of the victim groups v0, v1, v2.
    groups: tuple[tuple[int, DisruptionMode], ...]
    running: tuple[Running, ...]
    members: int
    member_cpu: int
    #: disruptionsAllowed of the PDB over the protected pods, or None: no PDB.
    allowed: int | None


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    racks = tuple(
        tuple(draw(st.lists(st.sampled_from([2, 3, 4]), min_size=1, max_size=3)))
        for _ in range(draw(st.integers(1, 3)))
    )
    groups = tuple(
        (draw(st.integers(1, 3)), draw(st.sampled_from(list(DisruptionMode)))) for _ in range(3)
    )
    running: list[Running] = []
    for _ in range(draw(st.integers(2, 12))):
        r = draw(st.integers(0, len(racks) - 1))
        victim_group = draw(st.sampled_from([None, None, 0, 1, 2]))
        running.append(
            (
                r,
                draw(st.integers(0, len(racks[r]) - 1)),
                draw(st.integers(1, 2)),
                10 if victim_group is not None else draw(st.sampled_from([10, 20, 30, 200])),
                victim_group,
                float(draw(st.integers(0, 50))),
                draw(st.booleans()),
            )
        )
    return Spec(
        racks=racks,
        groups=groups,
        running=tuple(running),
        members=draw(st.integers(1, 4)),
        member_cpu=draw(st.integers(1, 2)),
        allowed=draw(st.sampled_from([None, 0, 1])),
    )


#: Found by sampling: mincost's heuristics evict three pods on two nodes (a two-member
#: Single-mode gang broken by one pod, plus one more); the minimum is two lone pods on one
#: node of rack r0.
NEEDS_EXACT = Spec(
    racks=((4, 4), (4, 4)),
    groups=((2, DisruptionMode.ALL), (2, DisruptionMode.SINGLE), (1, DisruptionMode.SINGLE)),
    running=(
        (1, 1, 2, 20, None, 0.0, True),
        (1, 1, 1, 10, None, 48.0, True),
        (0, 0, 1, 10, 0, 39.0, False),
        (1, 0, 2, 20, None, 28.0, False),
        (0, 1, 2, 10, None, 30.0, True),
        (0, 0, 2, 200, None, 5.0, True),
        (0, 1, 2, 10, 1, 47.0, False),
        (0, 0, 1, 10, None, 28.0, False),
        (1, 0, 2, 10, 2, 7.0, False),
    ),
    members=4,
    member_cpu=1,
    allowed=1,
)


#: Found by sampling the same way: equal on every count up to the workloads disrupted,
#: where the heuristics touch two groups and the minimum takes the last two members of one
#: already broken gang. The exact search used to run only when the heuristics' answer lost
#: on priority or pods disrupted, so it missed this.
NEEDS_EXACT_ON_WORKLOADS = Spec(
    racks=((4, 2, 3),),
    groups=((1, DisruptionMode.SINGLE), (3, DisruptionMode.SINGLE), (1, DisruptionMode.SINGLE)),
    running=(
        (0, 0, 1, 10, 1, 43.0, False),
        (0, 1, 2, 10, 1, 49.0, False),
        (0, 2, 2, 30, None, 18.0, False),
        (0, 0, 1, 30, None, 11.0, False),
        (0, 2, 1, 30, None, 48.0, False),
        (0, 0, 1, 30, None, 35.0, False),
        (0, 0, 1, 10, 2, 48.0, False),
    ),
    members=3,
    member_cpu=1,
    allowed=None,
)


def build(spec: Spec) -> tuple[ClusterState, PodGroup]:
    nodes = [
        node(f"r{r}-{n}", cpu, labels={RACK: f"r{r}"})
        for r, cpus in enumerate(spec.racks)
        for n, cpu in enumerate(cpus)
    ]
    groups = [
        group(f"v{i}", quorum, priority=10, mode=mode)
        for i, (quorum, mode) in enumerate(spec.groups)
    ]
    used: dict[str, int] = {}
    running = []
    for i, (r, n, cpu, prio, victim_group, created, protected) in enumerate(spec.running):
        name = f"r{r}-{n}"
        if used.get(name, 0) + cpu > spec.racks[r][n]:
            continue  # never overcommit a node
        used[name] = used.get(name, 0) + cpu
        running.append(
            pod(
                f"run{i}",
                cpu,
                memory=None,
                node_name=name,
                priority=prio,
                group=None if victim_group is None else f"v{victim_group}",
                created=created,
                labels={"app": "x"} if protected else None,
            )
        )
    gang = group("g", spec.members, priority=PREEMPTOR)
    gang.topology = TopologyRequest(required=RACK)
    members = [
        pod(f"g-{i}", spec.member_cpu, memory=None, group="g", priority=PREEMPTOR, created=100.0)
        for i in range(spec.members)
    ]
    budgets = [] if spec.allowed is None else [budget("pdb", spec.allowed, app="x")]
    state = cluster(nodes, [*running, *members], [*groups, gang], budgets=budgets)
    return state, gang


def chosen_cost(spec: Spec, exact_units: int) -> tuple[Cost | None, Cost | None] | None:
    """(mincost's cost, brute force's minimum), or None when there is nothing to judge."""
    state, gang = build(spec)
    sched = Scheduler(state)
    g = sched.gang(gang.ref)
    mark = state.snapshot.checkpoint()
    failed = sched.placer.place(g, state.snapshot)
    state.snapshot.rollback(mark)
    if failed.code is not Code.UNSCHEDULABLE:
        return None
    units = collect_victim_table(g, state, gang_priority(g)).units
    if not units or len(units) > MAX_UNITS:
        return None
    expected = cheapest_set(state, sched.framework, g, units)
    preemptor = build_preemptor(
        strategy="mincost",
        scheduler_name=SCHEDULER,
        topology=TopologyPreemptionConfig(exact_units=exact_units),
    )
    outcome = preemptor.preempt(g, failed, state, sched.framework)
    if not outcome.victims:
        return None, expected
    evicted = {p.key for p in outcome.victims}
    chosen = [u for u in units if {p.key for p in u.pods} <= evicted]
    assert sum(u.size for u in chosen) == len(evicted)
    return victim_cost(chosen, 0, BudgetIndex(state.budgets.values())), expected


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs())
@example(NEEDS_EXACT)
@example(NEEDS_EXACT_ON_WORKLOADS)
def test_mincost_with_the_exact_search_finds_the_brute_force_minimum(spec: Spec) -> None:
    judged = chosen_cost(spec, exact_units=16)
    if judged is None:
        return
    got, expected = judged
    assert _exact_part(got) == _exact_part(expected), (got, expected)


def _exact_part(cost: Cost | None) -> Cost | None:
    """The cost without its last tie-break, the sum of the victims' start times: adding a
    victim can make that smaller, so no bound over a set's supersets holds on it, and the
    search is exact up to the age of the oldest victim, the order's own last rule."""
    return None if cost is None else dataclasses.replace(cost, total_start=0.0)


def test_the_pinned_case_is_one_the_heuristics_alone_miss() -> None:
    """NEEDS_EXACT keeps the exact path under test: without it mincost pays a pod more.
    (Should the heuristics ever find this minimum themselves, pin another sampled miss.)"""
    without = chosen_cost(NEEDS_EXACT, exact_units=0)
    exact = chosen_cost(NEEDS_EXACT, exact_units=16)
    assert without is not None and exact is not None
    assert exact[0] == exact[1]
    assert without[0] is not None and exact[0] is not None
    assert (without[0].disrupted, without[0].pods) == (3, 3)
    assert (exact[0].disrupted, exact[0].pods) == (2, 2)
