"""The oracle of the preemption properties: the cheapest victim set by brute force."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import Gang
from gangsched.core.framework import Framework
from gangsched.core.preemption.cost import Cost, victim_cost
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimUnit
from gangsched.core.status import Code
from gangsched.core.topology.placement import TopologyPlacer


def cheapest_set(
    state: ClusterState, framework: Framework, gang: Gang, units: Sequence[VictimUnit]
) -> Cost | None:
    """The cost of the cheapest subset of `units` whose removal lets the topology-aware
    cycle place every pending member (None: no subset does). Every subset is tried, cheapest
    first within a size, skipping those no cheaper than the best found."""
    budgets = BudgetIndex(state.budgets.values())
    snap = state.snapshot
    placer = TopologyPlacer(framework)
    best: Cost | None = None
    for size in range(1, len(units) + 1):
        for chosen in itertools.combinations(units, size):
            cost = victim_cost(chosen, 0, budgets)
            if best is not None and cost >= best:
                continue
            mark = snap.checkpoint()
            for unit in chosen:
                for victim, where in unit.placed:
                    snap.remove_at(victim, where)
            result = placer.place(gang, snap)
            snap.rollback(mark)
            if result.code is Code.SUCCESS and len(result.placements) == len(gang.pending):
                best = cost
    return best
