"""The oracle of the preemption properties: the cheapest victim set by brute force."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import Gang
from gangsched.core.framework import Framework
from gangsched.core.preemption.cost import Cost, ranking, victim_cost
from gangsched.core.preemption.domains import required_class
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimUnit
from gangsched.core.status import Code
from gangsched.core.topology.domain_filter import confined
from gangsched.core.topology.domains import partition
from gangsched.core.topology.placement import TopologyPlacer


def cheapest_set(
    state: ClusterState, framework: Framework, gang: Gang, units: Sequence[VictimUnit]
) -> Cost | None:
    """The cost of the victim set preemption must choose for a gang with one required
    topology key (None: no subset lets every pending member be placed).

    Per domain of the key, the cheapest subset of the units holding capacity there whose
    removal lets the cycle, confined to the domain, place every pending member; across
    domains, the cost order up to the nodes disrupted, then upstream's choice among the
    domains tied there (the highest placement score with every lower-priority pod of the
    domain removed and the gang placed, the topology placer's own score), then the victims'
    age (`cost.ranking`, as `core/preemption/domains.py` ranks its domains)."""
    cls = required_class(gang)
    assert cls is not None and cls.request.required is not None
    snap = state.snapshot
    best: tuple[tuple[object, ...], Cost] | None = None
    for domain in partition(snap, cls.request.required).domains:
        refs = cls.refs
        placer = TopologyPlacer(
            confined(framework, dict.fromkeys(refs, domain.mask), dict.fromkeys(refs, domain.name))
        )
        inside = [u for u in units if any(domain.mask[n] for n in u.nodes)]
        cost = _cheapest(state, placer, gang, inside)
        if cost is None:
            continue
        mark = snap.checkpoint()
        for unit in inside:
            for victim, where in unit.placed:
                if domain.mask[where]:
                    snap.remove_at(victim, where)
        placed = placer.place(gang, snap)
        assert placed.code is Code.SUCCESS
        score = placer.placement_score([cls], [domain], snap)
        snap.rollback(mark)
        rank = ranking(cost, 0, score)
        if best is None or rank < best[0]:
            best = (rank, cost)
    return None if best is None else best[1]


def _cheapest(
    state: ClusterState, placer: TopologyPlacer, gang: Gang, units: Sequence[VictimUnit]
) -> Cost | None:
    """The cost of the cheapest subset of `units` whose removal lets `placer` place every
    pending member (None: no subset does). Every subset is tried, cheapest first within a
    size, skipping those no cheaper than the best found."""
    budgets = BudgetIndex(state.budgets.values())
    snap = state.snapshot
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
