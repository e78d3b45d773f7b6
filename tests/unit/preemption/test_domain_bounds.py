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
from gangsched.core.model import PodGroup
from gangsched.core.preemption.cost import NO_VICTIMS, victim_cost
from gangsched.core.preemption.domain_bounds import Bound
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimTable, collect_victim_table
from gangsched.core.scheduler import Scheduler
from gangsched.core.topology.domains import partition
from tests.unit.preemption.racks import (
    PREEMPTOR,
    RACK,
    Racks,
    Victim,
    draw_racks,
    rack_bounds,
    rack_cluster,
)


@dataclass(frozen=True)
class Spec(Racks):
    members: int
    member_cpu: int


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    racks, groups, victims = draw_racks(draw, victim_cpu=2)
    return Spec(racks, groups, victims, draw(st.integers(1, 4)), draw(st.integers(1, 2)))


def build(spec: Spec) -> tuple[ClusterState, PodGroup]:
    return rack_cluster(spec, members=(spec.member_cpu,) * spec.members)


def bounds_of(state: ClusterState, gang: PodGroup) -> tuple[dict[str, Bound], VictimTable]:
    g = Scheduler(state).gang(gang.ref)
    table = collect_victim_table(g, state, PREEMPTOR)
    return rack_bounds(state.snapshot, pending=g.pending, table=table), table


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
