"""The slot bound per domain (core/preemption/slot_bounds.py).

The domain search skips a domain that `SlotBounds.loses` to the cheapest set found so far,
so that must never be said of a domain where some victim set placing every member costs as
little: brute force over every subset of the potential victims (each checked by packing the
members, of unlike sizes, into the domain's nodes) checks that on random racks of lone pods,
Single-mode gangs (at their quorum, with spare members, already broken) and All-mode groups
spread over both racks. The examples show that it does say so where the summed bound of
`domain_bounds.py` cannot (or the property would check nothing).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.preemption.cost import victim_cost
from gangsched.core.preemption.domain_bounds import Bound, VictimRows, disruption_bounds
from gangsched.core.preemption.engine import Problem
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.slot_bounds import SlotBounds
from gangsched.core.scheduler import Scheduler
from gangsched.core.topology.domains import Domain, partition
from tests.unit.preemption.racks import (
    GANG,
    RACK,
    Racks,
    Victim,
    draw_racks,
    failed_cycle_problem,
    rack_bounds,
    rack_cluster,
)


@dataclass(frozen=True)
class Spec(Racks):
    #: CPUs of each pending member.
    members: tuple[int, ...]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    racks, groups, victims = draw_racks(draw, victim_cpu=3)
    members = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=4)))
    return Spec(racks, groups, victims, members)


def build(spec: Spec) -> ClusterState:
    state, _ = rack_cluster(spec, members=spec.members)
    return state


def base_problem(state: ClusterState) -> Problem:
    return failed_cycle_problem(
        state, Scheduler(state).gang(next(ref for ref in state.groups if ref.name == GANG))
    )


def slot_bounds(state: ClusterState, base: Problem) -> tuple[SlotBounds, list[Domain]]:
    pending = base.gang.pending
    coarse = rack_bounds(state.snapshot, pending=pending, table=base.table)
    slots = SlotBounds(base=base, members=pending, coarse=coarse)
    return slots, list(partition(state.snapshot, RACK).domains)


def packs(room: Sequence[int], members: Sequence[int]) -> bool:
    """Whether the members' CPUs fit into the nodes' free CPUs, by trying every node."""

    @cache
    def fits(rest: tuple[int, ...], left: tuple[int, ...]) -> bool:
        if not left:
            return True
        first, others = left[0], left[1:]
        return any(
            free >= first and fits((*rest[:i], free - first, *rest[i + 1 :]), others)
            for i, free in enumerate(rest)
        )

    return fits(tuple(room), tuple(sorted(members, reverse=True)))


def cheapest_placing_all(
    state: ClusterState, base: Problem, domain: Domain
) -> tuple[int, int] | None:
    """The least (highest victim priority, pods disrupted) of a victim set after which every
    member fits on the domain's nodes; None when no set makes them fit."""
    snap = state.snapshot
    cpu = snap.columns["cpu"]
    units = base.units
    members = [int(snap.vector(member)[cpu]) for member in base.gang.pending]
    nodes = [int(n) for n in domain.nodes]
    free = {n: int(snap.allocatable[n, cpu] - snap.requested[n, cpu]) for n in nodes}
    budgets = BudgetIndex([])
    best: tuple[int, int] | None = None
    for size in range(len(units) + 1):
        for chosen in itertools.combinations(units, size):
            room = dict(free)
            for unit in chosen:
                for victim, at in unit.placed:
                    if at in room:
                        room[at] += int(snap.vector(victim)[cpu])
            if not packs([room[n] for n in nodes], members):
                continue
            cost = victim_cost(chosen, 0, budgets)
            mine = (cost.max_priority, cost.disrupted)
            best = mine if best is None else min(best, mine)
    return best


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs())
def test_no_domain_is_said_to_lose_to_what_its_own_cheapest_set_costs(spec: Spec) -> None:
    state = build(spec)
    base = base_problem(state)
    slots, domains = slot_bounds(state, base)
    for domain in domains:
        cheapest = cheapest_placing_all(state, base, domain)
        level: Bound = slots.level(domain)
        if cheapest is None:
            continue  # no set places every member: whatever the bound, the domain loses
        assert level is not None and level <= cheapest, (domain.name, level, cheapest)
        assert not slots.loses(domain, cheapest), (domain.name, level, cheapest)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs())
def test_domain_bounds_from_the_rows_are_those_from_the_pods(spec: Spec) -> None:
    # The domain search gives `disruption_bounds` the victims' rows (`Problem`), which spare
    # a pass over every pod: the same bounds, whatever the racks hold.
    state = build(spec)
    base = base_problem(state)
    snap = state.snapshot
    split = partition(snap, RACK)
    for members in range(1, len(base.gang.pending) + 1):
        need = np.sum([snap.vector(p) for p in base.gang.pending[:members]], axis=0)
        rows = VictimRows(base.row_node, base.row_unit, base.row_vec)
        found = [
            disruption_bounds(
                domains=split.domains,
                of_node=split.of_node,
                need=need,
                table=base.table,
                snap=snap,
                rows=given,
            )
            for given in (None, rows)
        ]
        assert found[0] == found[1]


def example(
    victims: tuple[Victim, ...], groups: tuple[tuple[int, bool], ...] = ()
) -> tuple[SlotBounds, Domain, Bound]:
    """Rack r0 (two nodes) holds `victims`; rack r1 (one node) is full of a 20 pod; one
    member of 4 CPUs."""
    filler = Victim(rack=1, node=0, cpu=4, priority=20, group=None)
    state = build(Spec((2, 1), groups, (*victims, filler), (4,)))
    base = base_problem(state)
    slots, domains = slot_bounds(state, base)
    rack = next(d for d in domains if d.name == f"{RACK}=r0")
    return slots, rack, slots.coarse[rack.name]


def test_cheap_pods_split_over_nodes_raise_the_priority_level() -> None:
    # Two 10 pods of 2 CPUs free 4 CPUs in the rack, but on two nodes: the member's 4 CPUs
    # need a node's two pods, one of them a 20 pod.
    slots, rack, coarse = example(
        (
            Victim(0, 0, 2, 10, None),
            Victim(0, 0, 2, 20, None),
            Victim(0, 1, 2, 10, None),
            Victim(0, 1, 2, 20, None),
        )
    )
    assert coarse == (10, 2)
    assert slots.level(rack) == (20, 0)
    assert slots.loses(rack, (10, 9))
    assert not slots.loses(rack, (20, 2))


def test_a_gang_broken_for_a_node_costs_its_members() -> None:
    # On each node a 10 lone pod beside a member of a 2-pod gang at its quorum (priority
    # 10 too): the two lone pods sit on different nodes, so a node must lose its gang pod,
    # which costs the gang's 2 members: 3 disrupted, where the summed bound says 2.
    slots, rack, coarse = example(
        (
            Victim(0, 0, 2, 10, None),
            Victim(0, 0, 2, 10, 0),
            Victim(0, 1, 2, 10, None),
            Victim(0, 1, 2, 10, 0),
        ),
        groups=((2, False),),
    )
    assert coarse == (10, 2)
    assert slots.level(rack) == (10, 2)
    assert slots.loses(rack, (10, 2))
    assert not slots.loses(rack, (10, 3))


def test_spare_members_of_a_gang_cost_one_each() -> None:
    # A 4-pod gang with minMember 2 fills both nodes: the member takes node 0's two spare
    # members, 2 disrupted (breaking the gang would cost 4).
    slots, rack, _ = example(
        tuple(Victim(0, n, 2, 10, 0) for n in (0, 0, 1, 1)), groups=((2, False),)
    )
    assert not slots.loses(rack, (10, 2))
    assert slots.loses(rack, (10, 1))
