"""The per-domain preemption bound (core/preemption/domain_bounds.py).

The domain search skips a domain whose bound loses to a verified set, so the bound must
never exceed what some victim set there really costs; brute force over every subset of the
potential victims checks that on random racks of lone pods, Single-mode gangs (with and
without spare members, some already broken) and All-mode groups. The examples check that
the bound prices a gang as the cost order does, which is what lets it skip anything.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.model import DisruptionMode, PodGroup
from gangsched.core.preemption.cost import NO_VICTIMS, victim_cost
from gangsched.core.preemption.domain_bounds import Bound, disruption_bounds
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimTable, collect_victim_table
from gangsched.core.scheduler import Scheduler
from gangsched.core.topology.domains import partition
from tests.builders import cluster, group, node, pod

RACK = "example.com/rack"
PREEMPTOR = 100


@dataclass(frozen=True)
class Victim:
    rack: int
    node: int
    cpu: int
    priority: int
    #: None: a lone pod; else the index of its group in `Spec.groups`.
    group: int | None


@dataclass(frozen=True)
class Spec:
    racks: tuple[int, ...]  # nodes per rack, 4 CPUs each
    #: Per group: (min_member, All mode?)
    groups: tuple[tuple[int, bool], ...]
    victims: tuple[Victim, ...]
    members: int
    member_cpu: int


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    racks = tuple(draw(st.lists(st.integers(1, 3), min_size=2, max_size=2)))
    groups = tuple(
        (draw(st.integers(1, 4)), draw(st.booleans())) for _ in range(draw(st.integers(0, 3)))
    )
    victims = []
    for _ in range(draw(st.integers(1, 8))):
        rack = draw(st.integers(0, len(racks) - 1))
        victims.append(
            Victim(
                rack=rack,
                node=draw(st.integers(0, racks[rack] - 1)),
                cpu=draw(st.integers(1, 2)),
                priority=draw(st.sampled_from([10, 20])),
                group=draw(st.one_of(st.none(), st.integers(0, len(groups) - 1)))
                if groups
                else None,
            )
        )
    return Spec(racks, groups, tuple(victims), draw(st.integers(1, 4)), draw(st.integers(1, 2)))


def build(spec: Spec) -> tuple[ClusterState, PodGroup]:
    nodes = [
        node(f"r{r}-{n}", 4, labels={RACK: f"r{r}"})
        for r, count in enumerate(spec.racks)
        for n in range(count)
    ]
    groups = [
        group(
            f"v{i}",
            min_member,
            priority=None,
            mode=DisruptionMode.ALL if all_mode else DisruptionMode.SINGLE,
        )
        for i, (min_member, all_mode) in enumerate(spec.groups)
    ]
    used: dict[str, int] = {}
    running = []
    group_priority: dict[int, int] = {}
    for i, victim in enumerate(spec.victims):
        name = f"r{victim.rack}-{victim.node}"
        if used.get(name, 0) + victim.cpu > 4:
            continue  # never overcommit a node
        used[name] = used.get(name, 0) + victim.cpu
        # A group's pods share one priority (upstream validates it).
        priority = (
            group_priority.setdefault(victim.group, victim.priority)
            if victim.group is not None
            else victim.priority
        )
        running.append(
            pod(
                f"run{i}",
                victim.cpu,
                memory=None,
                node_name=name,
                priority=priority,
                group=f"v{victim.group}" if victim.group is not None else None,
                created=float(i),
            )
        )
    gang = group("g", spec.members, priority=PREEMPTOR)
    members = [
        pod(f"g-{i}", spec.member_cpu, memory=None, group="g", priority=PREEMPTOR)
        for i in range(spec.members)
    ]
    return cluster(nodes, [*running, *members], [*groups, gang]), gang


def bounds_of(state: ClusterState, gang: PodGroup) -> tuple[dict[str, Bound], VictimTable]:
    g = Scheduler(state).gang(gang.ref)
    table = collect_victim_table(g, state, PREEMPTOR)
    snap = state.snapshot
    split = partition(snap, RACK)
    need = np.sum([snap.vector(p) for p in g.pending], axis=0)
    found = disruption_bounds(
        domains=split.domains, of_node=split.of_node, need=need, table=table, snap=snap
    )
    return found, table


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs())
def test_no_victim_set_that_frees_enough_costs_less_than_the_bound(spec: Spec) -> None:
    state, gang = build(spec)
    found, table = bounds_of(state, gang)
    snap = state.snapshot
    g = Scheduler(state).gang(gang.ref)
    need = np.sum([snap.vector(p) for p in g.pending], axis=0)
    budgets = BudgetIndex(())
    for domain in partition(snap, RACK).domains:
        free = np.clip(snap.allocatable - snap.requested, 0, None)[domain.nodes].sum(axis=0)
        cheapest: tuple[int, int] | None = None
        for size in range(len(table.units) + 1):
            for chosen in itertools.combinations(table.units, size):
                freed = sum(
                    (snap.vector(p) for u in chosen for p, n in u.placed if domain.mask[n]),
                    np.zeros_like(free),
                )
                if not np.all(free + freed >= need):
                    continue
                cost = victim_cost(chosen, 0, budgets)
                mine = (cost.max_priority, cost.disrupted)
                cheapest = mine if cheapest is None else min(cheapest, mine)
        bound = found[domain.name]
        if cheapest is None:
            assert bound is None, (domain.name, bound)
        else:
            assert bound is not None and bound <= cheapest, (domain.name, bound, cheapest)


def test_breaking_a_gang_costs_all_its_bound_members() -> None:
    """One CPU wanted in a rack full of a 16-pod gang with minMember 16: the bound is the
    16 pods it disrupts (the pods-evicted bound said 1, and skipped nothing)."""
    spec = Spec(
        racks=(4, 4),
        groups=((16, False), (16, False)),
        victims=tuple(
            Victim(rack=r, node=i // 4, cpu=1, priority=10, group=r)
            for r in range(2)
            for i in range(16)
        ),
        members=1,
        member_cpu=1,
    )
    state, gang = build(spec)
    found, _ = bounds_of(state, gang)
    assert found == {f"{RACK}=r0": (10, 16), f"{RACK}=r1": (10, 16)}


def test_spare_members_and_free_room_lower_the_bound() -> None:
    spec = Spec(
        racks=(1, 1),
        groups=((2, False),),
        # rack 0: a 3-pod gang with minMember 2 (one spare); rack 1: 2 free CPUs
        victims=(
            Victim(0, 0, 1, 10, 0),
            Victim(0, 0, 1, 10, 0),
            Victim(0, 0, 2, 10, 0),
            Victim(1, 0, 2, 10, None),
        ),
        members=2,
        member_cpu=1,
    )
    state, gang = build(spec)
    found, _ = bounds_of(state, gang)
    assert found[f"{RACK}=r0"] == (10, 1)  # its spare member: the 2-CPU pod
    assert found[f"{RACK}=r1"] == (NO_VICTIMS, 0)


def test_a_lower_priority_level_that_suffices_sets_the_bound() -> None:
    spec = Spec(
        racks=(1, 1),
        groups=(),
        victims=(Victim(0, 0, 2, 20, None), Victim(0, 0, 1, 10, None), Victim(0, 0, 1, 10, None)),
        members=2,
        member_cpu=1,
    )
    state, gang = build(spec)
    found, _ = bounds_of(state, gang)
    assert found[f"{RACK}=r0"] == (10, 2)
    assert found[f"{RACK}=r1"] == (NO_VICTIMS, 0)
