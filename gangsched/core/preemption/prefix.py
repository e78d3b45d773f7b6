"""Per-node cheapest sufficient victim prefixes, for every node at once.

The victim rows (one per unit and node, see `Problem`) are sorted by node and, within a node,
cheapest first (no PDB violation before any, lower priority, fewer pods, fewer groups,
younger). For a pod with a given capacity deficit per node, a cumulative sum inside each
node's segment finds the first prefix that frees enough, and segment-wise cumulative sums and
maxima give that prefix's cost. A handful of NumPy passes over all rows, no loop over nodes:
this is what lets mincost's greedy and the lone-pod search look at 5,000 nodes cheaply.

The candidates that take victims in one fixed order (mincost's stages, whole gangs) share the
search at the end: the smallest prefix of that order with which the gang is placed, by binary
search, each probe a placement with the prefix removed and then a reprieve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gangsched.core.framework import IndexVector
from gangsched.core.model import Pod
from gangsched.core.preemption.engine import Problem
from gangsched.core.preemption.victims import VictimUnit
from gangsched.core.snapshot import BoolVector, IntMatrix, IntVector
from gangsched.core.status import Code

_SEGMENT = np.int64(2**34)
_PRIO_SHIFT = np.int64(2**32)


@dataclass(slots=True, eq=False)
class Rows:
    """Victim rows sorted by node, then cheapest first, with the units' cost attributes."""

    nodes: IndexVector
    units: IndexVector
    vecs: IntMatrix
    #: Per unit: PDB violator (0/1), priority, pods, groups, creation rank (oldest = 0).
    attrs: tuple[IntVector, IntVector, IntVector, IntVector, IntVector]


def cheapest_rows(problem: Problem) -> Rows:
    """The problem's rows in node order, cheapest victim first (computed once per problem)."""
    cached = problem.memo.get("cheapest_rows")
    if isinstance(cached, Rows):
        return cached
    units = problem.units
    count = len(units)
    u_viol = np.zeros(count, dtype=np.int64)
    if problem.violating:
        u_viol[list(problem.violating)] = 1
    u_prio = np.fromiter((u.priority for u in units), dtype=np.int64, count=count)
    u_size = np.fromiter((u.size for u in units), dtype=np.int64, count=count)
    u_groups = np.fromiter((u.workload_count for u in units), dtype=np.int64, count=count)
    u_created = np.fromiter((u.created for u in units), dtype=np.float64, count=count)
    index = np.arange(count)
    # Cheapest first; the unit index (key order) breaks ties deterministically.
    rank = np.empty(count, dtype=np.int64)
    rank[np.lexsort((index, -u_created, u_groups, u_size, u_prio, u_viol))] = index
    created_rank = np.empty(count, dtype=np.int64)
    created_rank[np.lexsort((index, u_created))] = index
    order = np.lexsort((rank[problem.row_unit], problem.row_node))
    rows = Rows(
        nodes=problem.row_node[order],
        units=problem.row_unit[order],
        vecs=problem.row_vec[order],
        attrs=(u_viol, u_prio, u_size, u_groups, created_rank),
    )
    problem.memo["cheapest_rows"] = rows
    return rows


@dataclass(slots=True, eq=False)
class NodeBest:
    """Per node: the cost of its cheapest sufficient victim prefix and where it ends."""

    valid: BoolVector
    viol: IntVector
    top: IntVector
    pods: IntVector
    groups: IntVector
    oldest: IntVector
    end: IntVector

    @classmethod
    def empty(cls, n: int) -> NodeBest:
        ints = [np.zeros(n, dtype=np.int64) for _ in range(6)]
        return cls(np.zeros(n, dtype=np.bool_), *ints)

    def ranked(self) -> IndexVector:
        """Valid nodes, cheapest prefix first (ties: node index, i.e. name order)."""
        nodes = np.flatnonzero(self.valid)
        order = np.lexsort(
            (
                nodes,
                # Youngest first: the larger the oldest victim's creation rank, the better.
                -self.oldest[nodes],
                self.groups[nodes],
                self.pods[nodes],
                self.top[nodes],
                self.viol[nodes],
            )
        )
        ranked: IndexVector = nodes[order]
        return ranked

    def pick(self) -> int | None:
        ranked = self.ranked()
        return int(ranked[0]) if ranked.size else None


def prefix_per_node(
    rows: Rows, live: IndexVector, cols: IntVector, deficit: IntMatrix, best: NodeBest
) -> None:
    """For the nodes of `live` rows (positions into `rows`, ascending), the first prefix of
    their live rows that covers the node's deficit, and its cost; written into `best`."""
    if not live.size:
        return
    u_viol, u_prio, u_size, u_groups, created_rank = rows.attrs
    nodes = rows.nodes[live]
    unit_ids = rows.units[live]
    starts_mask = np.empty(len(nodes), dtype=np.bool_)
    starts_mask[0] = True
    np.not_equal(nodes[1:], nodes[:-1], out=starts_mask[1:])
    segment = np.cumsum(starts_mask) - 1
    starts = np.flatnonzero(starts_mask)

    def seg_cumsum(values: IntMatrix) -> IntMatrix:
        total = np.cumsum(values, axis=0)
        before = total[starts] - values[starts]
        result: IntMatrix = total - before[segment]
        return result

    freed = rows.vecs[live][:, cols]
    enough = np.all(seg_cumsum(freed) >= deficit[nodes], axis=1)
    if not enough.any():
        return
    ok = np.flatnonzero(enough)
    first = np.ones(len(ok), dtype=np.bool_)
    first[1:] = segment[ok[1:]] != segment[ok[:-1]]
    ends = ok[first]
    base = segment * _SEGMENT
    at = nodes[ends]
    best.valid[at] = True
    best.viol[at] = seg_cumsum(u_viol[unit_ids])[ends]
    best.top[at] = (np.maximum.accumulate(base + u_prio[unit_ids] + _PRIO_SHIFT) - base)[ends]
    best.pods[at] = seg_cumsum(u_size[unit_ids])[ends]
    best.groups[at] = seg_cumsum(u_groups[unit_ids])[ends]
    best.oldest[at] = (base - np.maximum.accumulate(base - created_rank[unit_ids]))[ends]
    best.end[at] = live[ends]


def unit_rows(problem: Problem, units: list[VictimUnit]) -> IndexVector:
    """The problem's row positions (unit order, not `Rows` order) of `units`."""
    spans = [np.arange(problem.row_start[u.index], problem.row_start[u.index + 1]) for u in units]
    return np.concatenate(spans) if spans else np.zeros(0, dtype=np.intp)


ReprieveOrder = Callable[[VictimUnit], tuple[object, ...]]


def kept_after_removing(
    problem: Problem,
    units: list[VictimUnit],
    order: ReprieveOrder,
    *,
    known: list[tuple[Pod, int]] | None = None,
) -> list[VictimUnit] | None:
    """With `units` removed, place the gang as a probe (or assume `known`, a placement already
    found with them removed); if every member needed is placed, give back what it can spare in
    `order` and return the victims that stay. None if the gang is not placed. The snapshot is
    left as it was."""
    probes = problem.memo.setdefault("probes", {})
    assert isinstance(probes, dict)
    mark = problem.mark()
    try:
        problem.remove(units)
        if known is not None:
            placement = known
            for pod, node in placement:
                problem.snap.assume(pod, node)
        else:
            if not problem.may_fit() or not room_per_node(problem):
                return None
            # The candidates probe overlapping prefixes (every victim, one gang's members
            # and the cheap pods...): from the problem's own state, one set always gets the
            # same placement.
            key = frozenset(unit.index for unit in units)
            if key in probes:
                found = probes[key]
                if found is None or len(found) < problem.target:
                    return None
                for pod, node in found:
                    problem.snap.assume(pod, node)
            else:
                result = problem.place(probe=True)  # its placements stay assumed
                found = probes[key] = (
                    list(result.placements) if result.code is Code.SUCCESS else None
                )
                if found is None or len(found) < problem.target:
                    return None
            placement = found
        return problem.reprieve(units, placement, order)
    finally:
        problem.rollback(mark)


def room_per_node(problem: Problem) -> bool:
    """A necessary condition for placing `target` members, stronger than `may_fit` and as
    cheap: a node holds at most as many members as the element-wise smallest request fits
    in its free room (nominated pods' reservations ignored, which only adds room), summed
    over the nodes in scope. Only for a gang of one PodGroup, whose members all stay in the
    scope; a probe it rules out would have failed (binary searches spend half their probes
    on those)."""
    pending = problem.gang.pending
    if not pending or problem.target <= 0 or len({pod.group for pod in pending}) != 1:
        return True
    snap = problem.snap
    least = np.stack([snap.vector(pod) for pod in pending]).min(axis=0)
    cols = np.flatnonzero(least > 0)
    if not cols.size:
        return True
    requested = snap.requested if problem.scope is None else snap.requested[problem.scope]
    allocatable = snap.allocatable if problem.scope is None else snap.allocatable[problem.scope]
    free = np.clip(allocatable[:, cols] - requested[:, cols], 0, None)
    slots = (free // least[cols]).min(axis=1)
    return int(slots.sum()) >= problem.target


def surely_placed(problem: Problem, units: list[VictimUnit]) -> bool:
    """A sufficient condition for a probe without `units` to succeed, as exact as the
    probe itself, so a binary search can skip the placement (most of a rack's cost: its
    probes that pass `room_per_node` all succeed).

    It holds in the fast path for a gang of one PodGroup whose pending members are alike
    (the same spec but for their names) with no host ports and no nominated pod holding
    capacity, once the real cycle has placed the gang with every victim gone: then the
    cycle's first greedy pass places every member whenever the nodes its other filters allow
    (unchanged by victims and by the members placed) have as many slots, a slot being one
    member's request in a node's free room. Each member takes one slot wherever it goes, and
    a node with a slot left passes every filter."""
    alike = _alike_members(problem)
    if alike is None:
        return False
    request, allowed = alike
    snap = problem.snap
    cols = np.flatnonzero(request)
    mark = problem.mark()
    try:
        problem.remove(units)
        free = snap.allocatable[allowed][:, cols] - snap.requested[allowed][:, cols]
    finally:
        problem.rollback(mark)
    slots = (np.clip(free, 0, None) // request[cols]).min(axis=1)
    return int(slots.sum()) >= len(problem.gang.pending)


#: Pod fields that may differ between alike members: names, age, the nominated node (the
#: cycle tries it first, still one slot of a node the filters allow).
_NAMES = frozenset({"name", "uid", "created", "nominated_node_name"})


def _alike_members(problem: Problem) -> tuple[IntVector, IndexVector] | None:
    """(the members' request, the nodes their filters other than capacity allow) when
    `surely_placed` applies, else None; computed once per problem."""
    memo = problem.memo
    if "alike" not in memo:
        memo["alike"] = None
        pending = problem.gang.pending
        first = pending[0] if pending else None
        if (
            first is not None
            and problem.fast
            and problem.reserved is None
            and problem.all_removed is not None
            and not first.host_ports
            and len({pod.group for pod in pending}) == 1
            and all(_same_spec(pod, first) for pod in pending)
        ):
            framework = problem.static_framework
            allowed = framework.feasible(framework.context(first, problem.snap), problem.snap)
            memo["alike"] = (problem.snap.vector(first), np.flatnonzero(allowed))
    alike = memo["alike"]
    return alike  # type: ignore[return-value]


def _same_spec(pod: Pod, first: Pod) -> bool:
    return all(
        getattr(pod, name) == getattr(first, name)
        for name in Pod.__dataclass_fields__
        if name not in _NAMES
    )


def smallest_sufficient_prefix(
    prefixes: list[list[VictimUnit]],
    kept: Callable[[int], list[VictimUnit] | None],
    *,
    surely: Callable[[int], bool] | None = None,
) -> list[VictimUnit] | None:
    """The victims `kept(k)` gives for the smallest k with which the gang is placed (binary
    search: a longer prefix of one order never places less); None if the longest does not.
    `surely(k)`, a sufficient condition for `kept(k)` to place the gang, answers a probe
    without running it: the same probes, the same answer, `kept` run for the answer only."""
    found: dict[int, list[VictimUnit]] = {}

    def placed(k: int) -> bool:
        if surely is not None and surely(k):
            return True
        victims = kept(k)
        if victims is not None:
            found[k] = victims
        return victims is not None

    lo, hi = 0, len(prefixes) - 1
    if not prefixes or not placed(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if placed(mid):
            hi = mid
        else:
            lo = mid + 1
    return found[hi] if hi in found else kept(hi)
