"""Strategy `mincost` (the default): consider several placements, keep the cheapest.

The KEP tries one placement of the preemptor (whatever the cycle picks with every victim
gone) and then only reprieves around it; when that placement sits on an expensive victim, e.g.
a whole All-mode group, while another node needed one cheap pod, it evicts the group. mincost
generates candidates that steer the placement away from costly victims and picks the cheapest
by the order documented in `cost.py` (most members placed, fewest PDB violations, lowest
highest-victim priority, fewest pods, fewest groups, youngest victims).

Candidates, each verified by the real cycle before it is costed:

* `kep`: the KEP answer itself, so mincost is never costlier than kep on the same input;
* `staged`: remove victims in stages from cheapest to dearest (no PDB violation before any,
  lower priority first, single pods before All-mode groups) until the gang fits, then
  reprieve the dearest first; the placement found is the cycle's own with only cheap
  victims gone;
* `greedy`: place members one by one (largest first), each on the node whose cheapest
  sufficient victim prefix is cheapest, computed for all nodes at once with NumPy segment
  scans (capacity-only case);
* for a lone pod, the per-node search with the dearest victims reprieved first, every node
  compared by the cost order instead of upstream's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gangsched.core.cycle import member_order
from gangsched.core.model import Pod
from gangsched.core.preemption.cost import victim_cost
from gangsched.core.preemption.engine import Candidate, CannotHelp, Problem
from gangsched.core.preemption.kep import is_lone_pod, kep_search
from gangsched.core.preemption.lone_pod import node_options
from gangsched.core.preemption.victims import VictimUnit, costliest_key
from gangsched.core.snapshot import IntVector, Snapshot
from gangsched.core.status import Code

_SEGMENT = np.int64(2**34)
_PRIO_SHIFT = np.int64(2**32)


def mincost_search(problem: Problem) -> Candidate | CannotHelp:
    baseline = kep_search(problem)
    if isinstance(baseline, CannotHelp):
        return baseline  # every other candidate removes a subset of the same victims
    candidates: list[Candidate] = [baseline]
    generators: list[Callable[[Problem], Candidate | None]] = (
        [lone_pod_cheapest, staged] if is_lone_pod(problem) else [staged, greedy]
    )
    for generate in generators:
        found = generate(problem)
        if found is not None:
            candidates.append(found)
    best = min(range(len(candidates)), key=lambda i: (candidates[i].cost, i))
    return candidates[best]


def _costliest(problem: Problem) -> Callable[[VictimUnit], tuple[object, ...]]:
    violating = problem.violating
    return lambda unit: costliest_key(unit, violating)


# --------------------------------------------------------------------------------- lone pod
def lone_pod_cheapest(problem: Problem) -> Candidate | None:
    """Per-node search reprieving the dearest victims first; nodes ranked by cost order."""
    problem.target = 1
    options = node_options(problem, lambda violating: lambda u: costliest_key(u, violating))
    ranked = sorted(
        options,
        key=lambda o: (victim_cost(o.units, 0, problem.budgets), problem.snap.nodes[o.node].name),
    )
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
    found: dict[int, list[VictimUnit]] = {}

    def attempt(k: int) -> bool:
        last = k == len(prefixes) - 1
        if last and problem.all_removed is None:
            return False
        mark = problem.mark()
        try:
            problem.remove(prefixes[k])
            if last:
                assert problem.all_removed is not None
                placement = problem.all_removed  # the same run kep already made
                for pod, node in placement:
                    problem.snap.assume(pod, node)
            else:
                if not problem.may_fit():
                    return False
                result = problem.place(probe=True)
                if result.code is not Code.SUCCESS or len(result.placements) < problem.target:
                    return False
                placement = list(result.placements)
            found[k] = problem.reprieve(prefixes[k], placement, _costliest(problem))
            return True
        finally:
            problem.rollback(mark)

    lo, hi = 0, len(prefixes) - 1
    if not attempt(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if attempt(mid):
            hi = mid
        else:
            lo = mid + 1
    return problem.verify(found[hi], "mincost/staged", problem.potential_pods)


# ----------------------------------------------------------------------------------- greedy
def greedy(problem: Problem) -> Candidate | None:
    """Member by member, the node whose cheapest sufficient victim prefix costs least.

    Rows are (victim unit, node) pairs sorted by node, then cheapest first; for each member
    a cumulative sum inside each node's segment gives, per node, the first prefix that frees
    enough, and the prefix costs (PDB violators, highest priority, pods, groups, youngest)
    come from segment-wise cumulative sums and maxima. One NumPy pass per member, no loop
    over nodes. Only used when capacity is all victims can change (`Problem.fast`).
    """
    if not problem.fast or not problem.units or not len(problem.row_node):
        return None
    snap = problem.snap
    units = problem.units
    violating = problem.violating
    count = len(units)
    u_viol = np.zeros(count, dtype=np.int64)
    if violating:
        u_viol[list(violating)] = 1
    u_prio = np.fromiter((u.priority for u in units), dtype=np.int64, count=count)
    u_size = np.fromiter((u.size for u in units), dtype=np.int64, count=count)
    u_groups = np.fromiter((len(u.groups) for u in units), dtype=np.int64, count=count)
    u_created = np.fromiter((u.created for u in units), dtype=np.float64, count=count)
    index = np.arange(count)
    # Cheapest first; the unit index (key order) breaks ties deterministically.
    rank = np.empty(count, dtype=np.int64)
    rank[np.lexsort((index, -u_created, u_groups, u_size, u_prio, u_viol))] = index
    created_rank = np.empty(count, dtype=np.int64)
    created_rank[np.lexsort((index, u_created))] = index

    order = np.lexsort((rank[problem.row_unit], problem.row_node))
    nodes_arr = problem.row_node[order]
    units_arr = problem.row_unit[order]
    vecs = problem.row_vec[order]
    alive = np.ones(len(order), dtype=np.bool_)
    position_of_unit = np.argsort(units_arr, kind="stable")
    unit_bounds = np.searchsorted(units_arr[position_of_unit], np.arange(count + 1))

    framework = problem.framework
    chosen: dict[int, VictimUnit] = {}
    placement: list[tuple[Pod, int]] = []
    attrs = (u_viol, u_prio, u_size, u_groups, created_rank)
    mark = problem.mark()
    try:
        for pod in _largest_first(problem.gang.pending, snap):
            ctx = framework.context(pod, snap)
            static = problem.static_framework.feasible(ctx, snap)
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
                continue
            live = np.flatnonzero(alive)
            live = live[static[nodes_arr[live]]]
            if not live.size:
                continue
            best = _cheapest_prefix(
                nodes_arr[live], units_arr[live], vecs[live][:, cols], deficit, attrs
            )
            if best is None:
                continue
            start, end = best
            node = int(nodes_arr[live[start]])
            taken: list[VictimUnit] = []
            for unit_index in units_arr[live[start : end + 1]].tolist():
                if unit_index not in chosen:
                    chosen[unit_index] = units[unit_index]
                    taken.append(units[unit_index])
                    lo, hi = unit_bounds[unit_index], unit_bounds[unit_index + 1]
                    alive[position_of_unit[lo:hi]] = False
            problem.remove(taken)
            snap.assume(pod, node)
            placement.append((pod, node))
        if not placement:
            return None
        kept = problem.reprieve(list(chosen.values()), placement, _costliest(problem))
    finally:
        problem.rollback(mark)
    return problem.verify(kept, "mincost/greedy", problem.potential_pods)


def _cheapest_prefix(
    nodes: IntVector,
    unit_ids: IntVector,
    freed: IntVector,
    deficit: IntVector,
    attrs: tuple[IntVector, IntVector, IntVector, IntVector, IntVector],
) -> tuple[int, int] | None:
    """(start, end) row positions of the cheapest sufficient prefix over all nodes."""
    u_viol, u_prio, u_size, u_groups, created_rank = attrs
    starts_mask = np.empty(len(nodes), dtype=np.bool_)
    starts_mask[0] = True
    np.not_equal(nodes[1:], nodes[:-1], out=starts_mask[1:])
    segment = np.cumsum(starts_mask) - 1
    starts = np.flatnonzero(starts_mask)

    def seg_cumsum(values: IntVector) -> IntVector:
        total = np.cumsum(values, axis=0)
        before = total[starts] - values[starts]
        result: IntVector = total - before[segment]
        return result

    enough = np.all(seg_cumsum(freed) >= deficit[nodes], axis=1)
    if not enough.any():
        return None
    ok = np.flatnonzero(enough)
    first = np.ones(len(ok), dtype=np.bool_)
    first[1:] = segment[ok[1:]] != segment[ok[:-1]]
    ends = ok[first]
    base = segment * _SEGMENT
    viol = seg_cumsum(u_viol[unit_ids])[ends]
    top = (np.maximum.accumulate(base + u_prio[unit_ids] + _PRIO_SHIFT) - base)[ends]
    pods = seg_cumsum(u_size[unit_ids])[ends]
    groups = seg_cumsum(u_groups[unit_ids])[ends]
    oldest = (base - np.maximum.accumulate(base - created_rank[unit_ids]))[ends]
    # Youngest first: the larger the oldest victim's creation rank, the better.
    pick = int(np.lexsort((nodes[ends], -oldest, groups, pods, top, viol))[0])
    end = int(ends[pick])
    return int(starts[segment[end]]), end


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
