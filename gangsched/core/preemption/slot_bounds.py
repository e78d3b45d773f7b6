"""A tighter lower bound on what preemption costs in a topology domain, node by node.

`domain_bounds.py` sums a domain's free room and victims over all its nodes, so a rack whose
cheap victims are spread one per node looks as good as one where they sit in pairs, though a
member that needs two of them fits nowhere: in the trace of issue 14 at scale (bench shape
(d)), 84 racks tie on that bound and the 16 searched cost 30-180 ms each to tell apart.

Here the members' room is counted in slots: a slot is the members' smallest request (column
by column) in one node's free room once victims are gone, and every pending member takes one
slot of a node the domain holds. No victim set places every member unless its nodes give
that many slots, so:

* the lowest priority level whose victims, all gone, give enough slots is a bound on the
  highest victim priority;
* at that level, the least "pods disrupted" that gives enough slots is a bound on pods
  disrupted. Whole workloads (an All-mode group, a Single-mode gang at its quorum: touching
  one pod costs every member it has bound) are taken or not, every subset in turn, and the
  other pods at 1 each are chosen node by node (a small knapsack over the nodes' slots).

Every relaxation lowers the bound and so keeps it one: the other filters, nominated
capacity, and a gang's spare members (counted at 1 each however many go) are ignored, and a
node needs, per column, as many pods as that column's largest ones take.

The domain search uses it only to skip domains and to order the ones it searches (never to
choose which domains it may search): a domain skipped could not have won, so the answer is
the one searching it gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from gangsched.core.model import Pod
from gangsched.core.preemption.cost import NO_VICTIMS
from gangsched.core.preemption.domain_bounds import Bound
from gangsched.core.preemption.engine import Problem
from gangsched.core.preemption.victims import VictimUnit
from gangsched.core.topology.domains import Domain

#: Integer arrays of any shape (rooms, rows, counts): int64 or intp, as numpy gives them.
Ints = npt.NDArray[np.integer[Any]]

#: Whole workloads at the bound's level past which their subsets are not enumerated (the
#: level alone is then the bound's improvement).
MAX_WHOLES = 8
#: Cells (nodes x member slots x a node's pods x columns) past which the knapsack is not run
#: (a zone of thousands of nodes).
MAX_CELLS = 2_000_000
#: Above any count of pods a node can give: marks a slot count no pod set reaches.
_NEVER = np.iinfo(np.int64).max // 4


class SlotBounds:
    """The slot bounds of an attempt's domains: the priority level for every domain the
    search may take (to order them), the pods disrupted only for one whose level ties the
    cheapest set found so far, and only as far as telling whether it loses."""

    def __init__(self, *, base: Problem, members: Sequence[Pod], coarse: dict[str, Bound]):
        self.base = base
        self.members = members
        self.coarse = coarse
        snap = base.snap
        self.request = (
            np.min(np.stack([snap.vector(pod) for pod in members]), axis=0)
            if members
            else np.zeros(len(snap.columns), dtype=np.int64)
        )
        self.levels: dict[str, Bound] = {}

    def level(self, domain: Domain) -> Bound:
        """`coarse` raised to the slots' priority level (None: no victim set makes room)."""
        if domain.name not in self.levels:
            self.levels[domain.name] = self._level(domain)
        return self.levels[domain.name]

    def order(self, domains: Sequence[Domain]) -> list[Domain]:
        """The domains by their level bound, cheapest first; a tie keeps the given order."""
        return sorted(domains, key=lambda d: self.level(d) or _LOST)

    def loses(self, domain: Domain, cheapest: tuple[int, int]) -> bool:
        """Whether every victim set placing all the members in `domain` is dearer than
        `cheapest` (highest priority, pods disrupted): the domain cannot win."""
        bound = self.level(domain)
        if bound is None or bound > cheapest:
            return True
        if bound[0] < cheapest[0] or bound[0] == NO_VICTIMS:
            return False
        view = self._view(domain)
        least = view.least_disrupted(bound[0], enough=cheapest[1]) if view else None
        return least is not None and least > cheapest[1]

    def _view(self, domain: Domain) -> _View | None:
        return _View.of(domain=domain, base=self.base, request=self.request, need=len(self.members))

    def _level(self, domain: Domain) -> Bound:
        coarse = self.coarse.get(domain.name)
        view = self._view(domain) if coarse is not None and self.members else None
        if view is None:
            return coarse
        level = view.lowest_level()
        if level is None:
            return None
        if level == NO_VICTIMS or coarse is None or level <= coarse[0]:
            return coarse
        return (level, 0)


#: Above every bound.
_LOST = (2**62, 0)


@dataclass(slots=True, eq=False)
class _View:
    """A domain's nodes (local positions) and the victims' rows there, on the members'
    request columns."""

    room: Ints  # (nodes, columns): allocatable minus requested, victims in place
    row_node: Ints
    row_vec: Ints
    row_unit: Ints
    priority: Ints
    units: list[VictimUnit]
    wants: Ints
    need: int

    @classmethod
    def of(cls, *, domain: Domain, base: Problem, request: Ints, need: int) -> _View | None:
        cols = np.flatnonzero(request)
        if not cols.size:
            return None  # the members ask for nothing a victim holds
        snap = base.snap
        nodes = domain.nodes
        local = np.full(len(snap), -1, dtype=np.intp)
        local[nodes] = np.arange(len(nodes))
        rows = np.flatnonzero(domain.mask[base.row_node])
        row_unit = base.row_unit[rows]
        units = base.units
        return cls(
            room=snap.allocatable[nodes][:, cols] - snap.requested[nodes][:, cols],
            row_node=local[base.row_node[rows]],
            row_vec=base.row_vec[rows][:, cols],
            row_unit=row_unit,
            priority=np.fromiter(
                (units[u].priority for u in row_unit.tolist()), np.int64, len(rows)
            ),
            units=units,
            wants=request[cols],
            need=need,
        )

    def slots(self, freed: Ints) -> int:
        """Members' slots in the domain: per node the fewest a column allows, none below 0."""
        return int(np.clip(((self.room + freed) // self.wants).min(axis=1), 0, None).sum())

    def lowest_level(self) -> int | None:
        """The lowest priority whose victims (and every lower one's) all gone leave a slot
        per member; NO_VICTIMS when the room suffices as it is, None when no level does."""
        if self.slots(np.zeros_like(self.room)) >= self.need:
            return NO_VICTIMS
        for level in np.unique(self.priority).tolist():
            taken = self.priority <= level
            freed = np.zeros_like(self.room)
            np.add.at(freed, self.row_node[taken], self.row_vec[taken])
            if self.slots(freed) >= self.need:
                return int(level)
        return None

    def least_disrupted(self, level: int, *, enough: int = -1) -> int | None:
        """The least pods disrupted with victims up to `level` that leave a slot per member
        (None: too many whole workloads or cells to enumerate); the first value found at
        or below `enough`, when one is, for a caller that only compares with it."""
        taken = self.priority <= level
        row_unit = self.row_unit[taken].tolist()
        wholes = _Wholes()
        for u in dict.fromkeys(row_unit):
            wholes.add(self.units[u])
        if len(wholes) > MAX_WHOLES:
            return None
        single = np.array([u not in wholes.members for u in row_unit], dtype=np.bool_)
        row_node, row_vec = self.row_node[taken], self.row_vec[taken]
        pods = _Pods.of(row_node=row_node[single], row_vec=row_vec[single], nodes=len(self.room))
        if pods.prefix.size * (self.need + 1) > MAX_CELLS:
            return None
        whole_of = wholes.of_rows(row_unit)
        best = _NEVER
        for size in range(len(wholes) + 1):
            for chosen in combinations(range(len(wholes)), size):
                spent = sum(wholes.costs[i] for i in chosen)
                if spent >= best:
                    continue
                freed = np.zeros_like(self.room)
                if chosen:
                    rows = np.isin(whole_of, chosen)
                    np.add.at(freed, row_node[rows], row_vec[rows])
                fewest = pods.needed(room=self.room + freed, wants=self.wants, need=self.need)
                best = min(best, spent + _knapsack(fewest, self.need))
                if best <= enough:
                    return int(best)
        return int(best)


class _Wholes:
    """Workloads that cost the same whichever of their pods go: an All-mode group (all its
    pods) and a Single-mode gang at exactly its quorum (every member it has bound)."""

    def __init__(self) -> None:
        self.index: dict[object, int] = {}
        self.costs: list[int] = []
        #: Unit index -> position of its workload.
        self.members: dict[int, int] = {}

    def add(self, unit: VictimUnit) -> None:
        quorum = unit.quorum
        key: object
        if quorum is not None:
            if quorum.bound != quorum.min_member:
                return  # spare members or a broken gang: 1 per pod, at least
            key, cost = quorum.ref, quorum.bound
        elif unit.size > 1 or unit.group is not None:
            key, cost = unit.index, unit.size
        else:
            return
        if key not in self.index:
            self.index[key] = len(self.costs)
            self.costs.append(cost)
        self.members[unit.index] = self.index[key]

    def of_rows(self, row_units: list[int]) -> Ints:
        return np.array([self.members.get(u, -1) for u in row_units], dtype=np.intp)

    def __len__(self) -> int:
        return len(self.costs)


class _Pods:
    """The pods at 1 each, per node: per column, the prefix sums of the largest first,
    padded to one length with `_NEVER` (never reached)."""

    def __init__(self, prefix: Ints, counts: Ints) -> None:
        self.prefix = prefix  # (nodes, longest + 1, columns)
        self.counts = counts  # pods per node

    @classmethod
    def of(cls, *, row_node: Ints, row_vec: Ints, nodes: int) -> _Pods:
        counts = np.bincount(row_node, minlength=nodes)
        longest = int(counts.max(initial=0))
        width = row_vec.shape[1]
        prefix = np.full((nodes, longest + 1, width), _NEVER, dtype=np.int64)
        prefix[:, 0, :] = 0
        order = np.argsort(row_node, kind="stable")
        starts = np.r_[0, np.cumsum(counts)]
        for node in np.flatnonzero(counts).tolist():
            vecs = row_vec[order[starts[node] : starts[node + 1]]]
            prefix[node, 1 : len(vecs) + 1, :] = np.cumsum(-np.sort(-vecs, axis=0), axis=0)
        return cls(prefix, counts)

    def needed(self, *, room: Ints, wants: Ints, need: int) -> Ints:
        """(nodes, need + 1): the fewest pods a node must lose for s slots (s = 0..need),
        `_NEVER` where its pods cannot make that many."""
        short = np.arange(need + 1)[None, :, None] * wants[None, None, :] - room[:, None, :]
        # Per column, the prefixes below the shortfall: pods that do not yet cover it.
        below = (self.prefix[:, None, :, :] < short[:, :, None, :]).sum(axis=2)
        fewest: Ints = below.max(axis=2)
        fewest[fewest > self.counts[:, None]] = _NEVER
        # No member there: nothing to free, on an overcommitted node too (its row then
        # starts at 0 and never falls, as `_knapsack` needs).
        fewest[:, 0] = 0
        return fewest


def _knapsack(fewest: Ints, need: int) -> int:
    """The least total over nodes of fewest[node, s] with the slots s summing to `need` (a
    min-plus convolution node by node; a row never falls as s grows, so more slots than
    needed never cost less); `_NEVER` or more when no choice does."""
    reach = np.full(need + 1, _NEVER, dtype=np.int64)
    reach[0] = 0
    for costs in fewest:
        useful = np.flatnonzero(costs < _NEVER).tolist()
        if len(useful) == 1:
            continue  # only s = 0 at no cost: the node adds nothing
        merged = reach.copy()
        for s in useful[1:]:
            cost = int(costs[s])
            shifted = reach[: need + 1 - s] + cost
            np.minimum(merged[s:], shifted, out=merged[s:])
        reach = merged
        if reach[need] == 0:
            return 0
    return int(reach[need])
