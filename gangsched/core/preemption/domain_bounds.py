"""A lower bound on what preemption must cost in each topology domain, before any search.

The domain search (`domains.py`) runs the full victim search in each candidate domain and
keeps the cheapest; a domain whose bound is already dearer than a verified set is skipped.
A bound that counted only pods evicted was too weak to skip anything: every Single-mode gang
of the trace has minMember = size, so touching one member costs the whole gang (`cost.py`,
"pods disrupted"), and rack after rack was searched only to lose by that margin.

The bound here prices workloads as the cost order does. Per resource the members lack
beyond the domain's free room, it is the least "pods disrupted" that frees that much, where

* a pod of a Single-mode gang above its quorum (one of its spare members), a remnant of a
  gang already below it, and a lone pod each cost 1;
* going below a gang's quorum costs every member it has bound (evicted plus stranded), and
  frees its pods in the domain;
* an All-mode group costs all its pods and frees those in the domain.

Spare pods may be counted both alone and inside their whole gang, and node boundaries are
ignored: both only make the bound lower, so it stays a bound. The smallest priority level
whose victims can cover every resource gives the bound's first element, as the cost order
compares the highest victim priority before pods disrupted.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from gangsched.core.model import GroupRef
from gangsched.core.preemption.cost import NO_VICTIMS
from gangsched.core.preemption.victims import Quorum, VictimTable, VictimUnit
from gangsched.core.snapshot import Snapshot
from gangsched.core.topology.domains import Domain

#: (highest victim priority, pods disrupted) no victim set in the domain can go below;
#: None when even every victim there does not free enough.
Bound = tuple[int, int] | None

#: One resource column's offer of a priority level: pods at cost 1 each (their amounts),
#: and whole workloads as (cost, amount freed).
_Offer = tuple[list[int], list[tuple[int, int]]]


@dataclass(frozen=True, slots=True, eq=False)
class VictimRows:
    """The victims' capacity per (unit, node) pair, as `engine.Problem` lays it out: node
    index, unit position in the table, and the pods' summed request vector."""

    node: np.ndarray
    unit: np.ndarray
    vec: np.ndarray


def disruption_bounds(
    *,
    domains: Sequence[Domain],
    of_node: np.ndarray,
    need: np.ndarray,
    table: VictimTable,
    snap: Snapshot,
    rows: VictimRows | None = None,
) -> dict[str, Bound]:
    """Per domain name, the bound for placing members that together request `need`.

    `of_node` maps a node index to its position in `domains` (negative: none). `rows`, the
    table's rows when the caller has them, spare a pass over every victim pod."""
    width = len(need)
    free = np.clip(snap.allocatable[:, :width] - snap.requested[:, :width], 0, None)
    deficits = [np.clip(need - free[d.nodes].sum(axis=0), 0, None) for d in domains]
    # Rows leave out requests of a resource no node has (`Problem`): their amounts there
    # count only where the members need some of it (a deficit), else the rows will do.
    nowhere = ~snap.allocatable[:, :width].any(axis=0)
    held = (
        _held_by_rows(of_node, rows, table, width)
        if rows is not None and not need[nowhere].any()
        else _held_by_pods(of_node, table, snap, width)
    )
    empty: tuple[list[VictimUnit], np.ndarray] = ([], np.zeros((0, width), dtype=np.int64))
    bounds: dict[str, Bound] = {}
    for position, (domain, deficit) in enumerate(zip(domains, deficits, strict=True)):
        if not deficit.any():
            bounds[domain.name] = (NO_VICTIMS, 0)
            continue
        bounds[domain.name] = _domain_bound(deficit, *held.get(position, empty))
    return bounds


#: Per domain position, the units holding capacity there (table order) and, row by row,
#: what each frees there.
_Held = dict[int, tuple[list[VictimUnit], np.ndarray]]


def _held_by_pods(of_node: np.ndarray, table: VictimTable, snap: Snapshot, width: int) -> _Held:
    """One pass over the victims' pods, whatever the number of domains."""
    freed: dict[int, dict[int, tuple[VictimUnit, np.ndarray]]] = {}
    for index, unit in enumerate(table.units):
        for pod, node in unit.placed:
            position = int(of_node[node])
            if position < 0:
                continue
            vector = snap.vector(pod)[:width]
            here = freed.setdefault(position, {})
            held = here.get(index)
            here[index] = (unit, vector.copy() if held is None else held[1] + vector)
    return {
        position: ([unit for unit, _ in here.values()], np.stack([v for _, v in here.values()]))
        for position, here in freed.items()
    }


def _held_by_rows(of_node: np.ndarray, rows: VictimRows, table: VictimTable, width: int) -> _Held:
    """The same from the (unit, node) rows: their sums per (domain, unit), by array
    operations (the pass over 30,000 pods took a fifth of a 250-rack decision)."""
    position = of_node[rows.node]
    inside = np.flatnonzero(position >= 0)
    count = max(len(table.units), 1)
    key = position[inside].astype(np.int64) * count + rows.unit[inside]
    order = np.argsort(key, kind="stable")
    key = key[order]
    if not key.size:
        return {}
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    sums = np.add.reduceat(rows.vec[inside[order], :width], starts, axis=0)
    owners = (key[starts] % count).tolist()
    positions = key[starts] // count
    cuts = np.flatnonzero(np.r_[True, positions[1:] != positions[:-1], True])
    units = table.units
    return {
        int(positions[lo]): ([units[u] for u in owners[lo:hi]], sums[lo:hi])
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)
    }


def _domain_bound(deficit: np.ndarray, units: list[VictimUnit], freed: np.ndarray) -> Bound:
    columns = [int(c) for c in np.flatnonzero(deficit)]
    priority = np.fromiter((unit.priority for unit in units), np.int64, len(units))
    for level in sorted(set(priority.tolist())):
        allowed = np.flatnonzero(priority <= level)
        # Whether the level frees enough is decided on the real sums: the offers below
        # count spare pods twice, which only a cost bound may do.
        if not np.all(freed[allowed].sum(axis=0) >= deficit):
            continue
        chosen = [units[i] for i in allowed.tolist()]
        # The offers free at least the real sums, so each column can be covered.
        return (
            level,
            max(
                _least_cover(int(deficit[c]), *_offer(chosen, freed[allowed, c].tolist()))
                for c in columns
            ),
        )
    return None


def _offer(allowed: list[VictimUnit], freed: list[int]) -> _Offer:
    """The offer of the units `allowed`, each freeing `freed` (its row) in one column."""
    pods: list[int] = []
    wholes: list[tuple[int, int]] = []
    gangs: dict[GroupRef, tuple[Quorum, list[int]]] = {}
    for unit, amount in zip(allowed, freed, strict=True):
        quorum = unit.quorum
        if quorum is not None:
            gangs.setdefault(quorum.ref, (quorum, []))[1].append(amount)
        elif unit.size == 1:
            pods.append(amount)
        else:  # an All-mode group: every pod of it goes
            wholes.append((unit.size, amount))
    for quorum, amounts in gangs.values():
        if quorum.bound < quorum.min_member:  # already broken: each remnant costs 1
            pods.extend(amounts)
            continue
        spare = quorum.bound - quorum.min_member
        pods.extend(sorted(amounts, reverse=True)[:spare])
        wholes.append((quorum.bound, sum(amounts)))
    return pods, wholes


def _least_cover(deficit: int, pods: list[int], wholes: list[tuple[int, int]]) -> int:
    """The least cost freeing at least `deficit`, which all the offers together do: any
    number of pods at 1 each plus any subset of the whole workloads (a small knapsack,
    solved over costs; past `_MAX_STATES` distinct costs, its fractional relaxation, still
    a bound)."""
    prefix = list(accumulate(sorted(pods, reverse=True), initial=0))
    best_freed: dict[int, int] = {0: 0}  # total cost of wholes -> most they free
    for cost, amount in wholes:
        for spent, got in list(best_freed.items()):
            total = spent + cost
            if best_freed.get(total, -1) < got + amount:
                best_freed[total] = got + amount
        if len(best_freed) > _MAX_STATES:
            return _fractional_cover(deficit, pods, wholes)
    best: int | None = None
    for spent, got in best_freed.items():
        rest = deficit - got
        count = 0 if rest <= 0 else bisect_left(prefix, rest)
        if count < len(prefix) and (best is None or spent + count < best):
            best = spent + count
    assert best is not None, "the offers do not cover the deficit"
    return best


#: Distinct whole-workload costs the knapsack keeps before it falls back to the relaxation
#: (a domain of a few racks stays far below; a zone of thousands of gangs does not).
_MAX_STATES = 2048


def _fractional_cover(deficit: int, pods: list[int], wholes: list[tuple[int, int]]) -> int:
    """The least cost when workloads may be taken in part (best amount per cost first): no
    integral choice is cheaper, so its ceiling is a bound."""
    offers = sorted(
        [(amount, 1) for amount in pods] + [(amount, cost) for cost, amount in wholes],
        key=lambda offer: offer[0] / offer[1],
        reverse=True,
    )
    spent, got = 0.0, 0
    for amount, cost in offers:
        if got + amount >= deficit:
            return int(np.ceil(spent + cost * (deficit - got) / amount - 1e-9))
        spent, got = spent + cost, got + amount
    return int(np.ceil(spent))
