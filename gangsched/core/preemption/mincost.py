"""Strategy `mincost` (the default): consider several placements, keep the cheapest.

The KEP tries one placement of the preemptor (whatever the cycle picks with every victim
gone) and then only reprieves around it; when that placement sits on an expensive victim, e.g.
a whole All-mode group, while another node needed one cheap pod, it evicts the group. mincost
generates candidates that steer the placement away from costly victims and picks the cheapest
by the order documented in `cost.py` (most members placed, fewest PDB violations, lowest
highest-victim priority, fewest pods disrupted and evicted, fewest workloads, youngest victims).

Candidates, each verified by the real cycle before it is costed:

* `kep`: the KEP answer itself, so mincost is never costlier than kep on the same input;
* `staged`: remove victims in stages from cheapest to dearest (no PDB violation before any,
  lower priority first, single pods before All-mode groups) until the gang fits, then
  reprieve the dearest first; the placement found is the cycle's own with only cheap
  victims gone;
* `greedy`: place members one by one (largest first), each on the node whose cheapest
  sufficient victim prefix is cheapest, computed for all nodes at once with NumPy segment
  scans (capacity-only case);
* `workloads` (`whole_gangs.py`): victims taken as workloads, spare and stranded members
  first, then whole gangs, smallest first, so a preemption breaks as few gangs as it can;
* for a lone pod, the per-node search with the dearest victims reprieved first, every node
  compared by the cost order instead of upstream's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from math import inf

import numpy as np

from gangsched.core.cycle import member_order
from gangsched.core.model import Pod
from gangsched.core.preemption.cost import kept_nominations, ranking, victim_cost
from gangsched.core.preemption.engine import Candidate, CannotHelp, Problem
from gangsched.core.preemption.kep import is_lone_pod, kep_search
from gangsched.core.preemption.lone_pod import NodeOption, node_options
from gangsched.core.preemption.prefix import (
    NodeBest,
    cheapest_rows,
    kept_after_removing,
    prefix_per_node,
    smallest_sufficient_prefix,
    surely_placed,
    unit_rows,
)
from gangsched.core.preemption.victims import VictimUnit, costliest_key
from gangsched.core.preemption.whole_gangs import one_gang, whole_gangs
from gangsched.core.snapshot import BoolVector, Snapshot


def mincost_search(problem: Problem) -> Candidate | CannotHelp:
    baseline = kep_search(problem)
    if isinstance(baseline, CannotHelp):
        return baseline  # every other candidate removes a subset of the same victims
    candidates: list[Candidate] = [baseline]
    lone = is_lone_pod(problem)
    generators: list[Callable[[Problem], Candidate | None]] = (
        [lone_pod_cheapest, staged] if lone else [staged, greedy, whole_gangs, one_gang]
    )
    snap = problem.snap

    def rank(i: int) -> tuple[object, ...]:
        found = candidates[i]
        named = ((pod, snap.nodes[node].name) for pod, node in found.placements)
        return (*ranking(found.cost, kept_nominations(named)), i)

    try:
        for generate in generators:
            if not lone:
                # Each gang candidate verifies one set at its end: a set that loses to the
                # best so far on the criteria before nominations kept (1-7 of cost.py) even
                # with every member placed cannot be chosen, so its cycle is not run.
                best = candidates[min(range(len(candidates)), key=rank)].cost
                problem.outranked_by = replace(best, oldest_start=inf, total_start=inf)
            found = generate(problem)
            if found is not None:
                candidates.append(found)
    finally:
        problem.outranked_by = None
    return candidates[min(range(len(candidates)), key=rank)]


def _costliest(problem: Problem) -> Callable[[VictimUnit], tuple[object, ...]]:
    violating = problem.violating
    return lambda unit: costliest_key(unit, violating)


# --------------------------------------------------------------------------------- lone pod
def lone_pod_cheapest(problem: Problem) -> Candidate | None:
    """Per-node search reprieving the dearest victims first; nodes ranked by cost order."""
    problem.target = 1
    options = node_options(problem, lambda violating: lambda u: costliest_key(u, violating))
    pod = problem.gang.pending[0]

    def rank(option: NodeOption) -> tuple[object, ...]:
        name = problem.snap.nodes[option.node].name
        cost = victim_cost(option.units, 0, problem.budgets)
        return (*ranking(cost, kept_nominations([(pod, name)])), name)

    ranked = sorted(options, key=rank)
    for option in ranked:
        candidate = problem.verify(option.units, "mincost/per-node", option.potential)
        if candidate is not None and candidate.cost.unplaced == 0:
            return candidate
    return None


# ----------------------------------------------------------------------------------- staged
def staged(problem: Problem) -> Candidate | None:
    """Cumulative stages of victims, cheapest first; the smallest prefix of stages with
    which the cycle places as many members as with every victim gone is found by binary
    search (probes use a small backtracking budget since most are meant to fail)."""
    violating = problem.violating
    buckets: dict[tuple[bool, int, bool], list[VictimUnit]] = {}
    for unit in problem.units:
        buckets.setdefault((unit.index in violating, unit.priority, unit.is_group), []).append(unit)
    stages = [buckets[key] for key in sorted(buckets)]
    prefixes: list[list[VictimUnit]] = []
    removed: list[VictimUnit] = []
    for stage in stages:
        removed = [*removed, *stage]
        prefixes.append(removed)

    def kept(k: int) -> list[VictimUnit] | None:
        # With every victim gone the placement is the very run kep already made.
        last = k == len(prefixes) - 1
        known = problem.all_removed if last else None
        return kept_after_removing(problem, prefixes[k], _costliest(problem), known=known)

    chosen = smallest_sufficient_prefix(
        prefixes, kept, surely=lambda k: surely_placed(problem, prefixes[k])
    )
    if chosen is None:
        return None
    return problem.verify(chosen, "mincost/staged", problem.potential_pods)


# ----------------------------------------------------------------------------------- greedy
def greedy(problem: Problem) -> Candidate | None:
    """Member by member, the node whose cheapest sufficient victim prefix costs least.

    Rows are (victim unit, node) pairs sorted by node, then cheapest first; a cumulative sum
    inside each node's segment gives, per node, the first prefix that frees enough, and the
    prefix costs (PDB violators, highest priority, pods, groups, youngest) come from
    segment-wise cumulative sums and maxima: NumPy passes, no loop over nodes. Identical
    members reuse the per-node results and recompute only the nodes the previous member
    changed. Only used when capacity is all victims can change (`Problem.fast`, no ports).
    """
    if not problem.fast or not problem.units or not len(problem.row_node):
        return None
    if any(pod.host_ports for pod in problem.gang.pending):
        return None  # a port held by a victim is not a capacity prefix: kep and staged only
    snap = problem.snap
    units = problem.units
    count = len(units)
    rows = cheapest_rows(problem)
    alive = np.ones(len(rows.nodes), dtype=np.bool_)
    position_of_unit = np.argsort(rows.units, kind="stable")
    unit_bounds = np.searchsorted(rows.units[position_of_unit], np.arange(count + 1))
    every_node = np.arange(len(snap))
    node_lo = np.searchsorted(rows.nodes, every_node)
    node_hi = np.searchsorted(rows.nodes, every_node, side="right")

    framework = problem.framework
    chosen: dict[int, VictimUnit] = {}
    placement: list[tuple[Pod, int]] = []
    best = NodeBest.empty(len(snap))
    member_class: object = None
    statics: dict[object, BoolVector] = {}
    dirty: set[int] = set()
    mark = problem.mark()
    try:
        for pod in _largest_first(problem.gang.pending, snap):
            ctx = framework.context(pod, snap)
            # Victims and placed members do not change the other filters in the fast path:
            # one pass per distinct member spec.
            spec = (pod.namespace, tuple(sorted(pod.labels.items())), pod.constraints)
            static = statics.get(spec)
            if static is None:
                static = statics[spec] = problem.static_framework.feasible(ctx, snap)
            cols = np.flatnonzero(ctx.request)
            used = snap.requested[:, cols] + ctx.request[cols]
            if ctx.reserved is not None:
                used = used + ctx.reserved[:, cols]
            deficit = used - snap.allocatable[:, cols]
            fits_now = static & np.all(deficit <= 0, axis=1)
            if fits_now.any():
                node = framework.select(ctx, snap, fits_now)
                snap.assume(pod, node)
                placement.append((pod, node))
                dirty.add(node)
                continue
            key = (ctx.request.tobytes(), spec)
            if key != member_class:
                member_class = key
                best = NodeBest.empty(len(snap))
                live = np.flatnonzero(alive)
            elif dirty:
                touched = np.array(sorted(dirty), dtype=np.intp)
                best.valid[touched] = False
                spans = [np.arange(node_lo[n], node_hi[n]) for n in touched.tolist()]
                live = np.concatenate(spans) if spans else np.zeros(0, dtype=np.intp)
                live = live[alive[live]]
            else:
                live = np.zeros(0, dtype=np.intp)
            dirty = set()
            live = live[static[rows.nodes[live]]]
            if live.size:
                prefix_per_node(rows, live, cols, deficit, best)
            target = best.pick()
            if target is None:
                continue
            segment = np.arange(node_lo[target], int(best.end[target]) + 1)
            taken: list[VictimUnit] = []
            for unit_index in rows.units[segment[alive[segment]]].tolist():
                if unit_index not in chosen:
                    unit = units[unit_index]
                    chosen[unit_index] = unit
                    taken.append(unit)
                    lo, hi = unit_bounds[unit_index], unit_bounds[unit_index + 1]
                    alive[position_of_unit[lo:hi]] = False
                    dirty.update(unit.nodes)
            problem.remove(taken, unit_rows(problem, taken))
            snap.assume(pod, target)
            placement.append((pod, target))
            dirty.add(target)
        if not placement:
            return None
        kept = problem.reprieve(list(chosen.values()), placement, _costliest(problem))
    finally:
        problem.rollback(mark)
    return problem.verify(kept, "mincost/greedy", problem.potential_pods)


def _largest_first(pods: list[Pod], snap: Snapshot) -> list[Pod]:
    """Largest members first (dominant share of the largest node), as the cycle's own
    fallback orders do: big pods have the fewest places to go."""
    ordered = member_order(pods)
    if not ordered or not len(snap):
        return ordered
    capacity = snap.allocatable.max(axis=0).astype(np.float64)

    def share(pod: Pod) -> float:
        vec = snap.vector(pod).astype(np.float64)
        shares = np.divide(vec, capacity, out=np.zeros_like(vec), where=capacity > 0)
        return -float(shares.max(initial=0.0))

    return sorted(ordered, key=share)
