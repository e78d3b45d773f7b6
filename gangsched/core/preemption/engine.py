"""Dry-run machinery shared by the preemption strategies.

Everything happens on the live snapshot and is undone exactly: copying a 5,000-node
snapshot per trial would cost more than the whole search. Victims are held as "rows", one per
(victim unit, node) with the unit's summed request there, in NumPy arrays.

Two regimes, decided once per attempt:

* node-local ("fast"): the preemptor pods ask for no pod (anti-)affinity or topology
  spread, and no victim carries anti-affinity terms. Then a victim can only matter on its
  own node, through capacity and host ports: removing victims subtracts their rows from the
  snapshot's `requested` matrix in one array operation and takes port holders out of their
  node's pod map (both undone on rollback), and a reprieve is a vector comparison (plus a
  port check) against what is left on the nodes holding placed preemptor pods, so victims
  elsewhere are spared without any work;
* filter-based otherwise: victims leave and return through the snapshot's journal, and a
  reprieve re-runs the filters of every placed preemptor pod in placement order (what the
  KEP calls in-place reprieval).

Whatever a search finds is then verified by the placer (`Problem.place`) on the snapshot without the
chosen victims: only a set for which the real cycle succeeds is ever returned, and the
nominations come from that verifying run, which is the placement the next cycle will find
(it tries nominated nodes first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang, Placer
from gangsched.core.framework import Framework, IndexVector
from gangsched.core.model import HostPort, Pod
from gangsched.core.preemption.cost import Cost, victim_cost
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimTable, VictimUnit, importance_key
from gangsched.core.resources import PODS
from gangsched.core.snapshot import BoolVector, IntMatrix, IntVector, Snapshot
from gangsched.core.status import Code

#: Name of the capacity filter; the other filters do not depend on victims in the fast path.
RESOURCES_FIT = "NodeResourcesFit"

UnitKey = Callable[[VictimUnit], tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    #: Nodes examined one by one for a lone pod when filters beyond capacity are involved
    #: (upstream examines at least 100 or 10% of the nodes).
    max_slow_nodes: int = 100
    #: Capacity-only lone-pod search: nodes examined exactly, max(absolute, percentage of
    #: all nodes), as upstream's minCandidateNodesAbsolute / minCandidateNodesPercentage.
    lone_pod_nodes_absolute: int = 100
    lone_pod_nodes_percentage: int = 10
    #: Preemptor-pod filter re-runs the in-place reprieve may spend when capacity arithmetic
    #: is not exact; victims not examined within the budget stay victims (always safe).
    slow_reprieve_budget: int = 2000
    #: Full placement runs the fallback reprieve may spend when a verified set must be built
    #: one victim at a time.
    verify_budget: int = 64
    #: Backtracking budget of exploratory placement runs (mincost's probes), which are
    #: expected to fail often; verification always uses the scheduler's own cycle config.
    probe_search_budget: int = 64

    def lone_pod_nodes(self, nodes: int) -> int:
        return max(self.lone_pod_nodes_absolute, nodes * self.lone_pod_nodes_percentage // 100)


@dataclass(slots=True)
class Candidate:
    """A verified victim set: removing `units` lets the cycle place `placements`."""

    name: str
    units: list[VictimUnit]
    placements: list[tuple[Pod, int]]
    cost: Cost
    #: Potential victim pods the search looked at (for the reprieved count).
    potential: int

    @property
    def pods(self) -> list[Pod]:
        return [pod for unit in self.units for pod in unit.pods]


@dataclass(slots=True)
class CannotHelp:
    reason: str


def failure_reason(result: CycleResult) -> str:
    """The most specific explanation of a failed dry run: the failing pod's node histogram."""
    if result.diagnosis is not None:
        return result.diagnosis.fit.message()
    return result.message or "the group does not fit even without every lower-priority pod"


def _reaches_other_pods(pod: Pod) -> bool:
    """True when the pod has constraints on pods beyond its own node's ports (affinity,
    anti-affinity, topology spread, volumes shared or counted per node): then any victim
    anywhere may matter to it."""
    return bool(pod.affinity or pod.anti_affinity or pod.spread or pod.volume_claims)


Mark = tuple[int, int]


@dataclass(slots=True, eq=False)
class Problem:
    """One preemption attempt: the gang, its potential victims and the dry-run helpers.

    Victims are also kept as "rows", one per (unit, node) with the unit's summed request on
    that node, in NumPy arrays: removing any set of units, the per-node searches and the
    capacity checks are then array operations instead of per-pod Python work.
    """

    gang: Gang
    failed: CycleResult
    cluster: ClusterState
    framework: Framework
    placer: Placer
    probe_placer: Placer
    priority: int
    table: VictimTable
    budgets: BudgetIndex
    config: PreemptionConfig
    #: The nodes the members may use (a topology domain), None for all: the capacity
    #: pre-check sums free room over these only.
    scope: BoolVector | None = None
    snap: Snapshot = field(init=False)
    units: list[VictimUnit] = field(init=False)
    #: Capacity arithmetic is exact (see module docstring).
    fast: bool = field(init=False)
    #: Capacity held for nominated pods that outrank the preemptor.
    reserved: IntMatrix | None = field(init=False)
    #: Filters other than capacity: unaffected by victims in the fast path.
    static_framework: Framework = field(init=False)
    #: Potential victims that would violate a PodDisruptionBudget if all were evicted.
    violating: frozenset[int] = field(init=False)
    #: Members the cycle placed with every potential victim gone (the most any set can do).
    target: int = 0
    #: The placement of that run (every potential victim gone), once known.
    all_removed: list[tuple[Pod, int]] | None = None
    row_node: IndexVector = field(init=False)
    row_unit: IndexVector = field(init=False)
    row_vec: IntMatrix = field(init=False)
    #: Rows of unit u are row_start[u]:row_start[u + 1].
    row_start: IndexVector = field(init=False)
    #: Placements of real-cycle runs per victim set (None: the cycle failed).
    _runs: dict[frozenset[int], list[tuple[Pod, int]] | None] = field(default_factory=dict)
    _costs: dict[frozenset[int], Cost] = field(default_factory=dict)
    potential_pods: int = field(init=False)
    #: While set, `verify` skips (None) a set costlier than this even with every member placed.
    outranked_by: Cost | None = None
    #: Derived structures computed once per attempt by the searches that need them.
    memo: dict[str, object] = field(default_factory=dict)
    #: Capacity-only removals (rows) and port holders taken off their nodes, to undo.
    _undo: list[tuple[IndexVector, list[tuple[Pod, int]]]] = field(default_factory=list)
    #: Per unit index, its placed pods that hold host ports (only in the fast path).
    port_pods: dict[int, list[tuple[Pod, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.snap = self.cluster.snapshot
        self.units = self.table.units
        pending = self.gang.pending
        for pod in pending:
            # A request for a resource no node has adds a column: do it before any matrix
            # is sliced, so every vector and matrix of the search has the same width.
            self.snap.vector(pod)
        victims_repel = any(pod.anti_affinity for unit in self.units for pod, _ in unit.placed)
        # Devices (DRA) are freed only when a victim leaves through the snapshot journal
        # (the DRA extension's `release` frees claims only it used): claims take the exact path.
        self.fast = (
            not victims_repel
            and not any(_reaches_other_pods(p) for p in pending)
            and not any(p.claims for p in pending)
        )
        if self.fast and any(pod.host_ports for pod in pending):
            for unit in self.units:
                holders = [(pod, node) for pod, node in unit.placed if pod.host_ports]
                if holders:
                    self.port_pods[unit.index] = holders
        lowest = min((pod.priority for pod in pending), default=self.priority)
        self.reserved = self.snap.reserved(min(lowest, self.priority), None)
        self.static_framework = Framework(
            filters=[f for f in self.framework.filters if f.name != RESOURCES_FIT],
            scores=[],
            pre_filters=self.framework.pre_filters,
        )
        if self.budgets:
            ordered = sorted(self.units, key=lambda u: importance_key(u, frozenset()))
            self.violating = self.budgets.violating_units(ordered)
        else:
            self.violating = frozenset()
        self.potential_pods = sum(unit.size for unit in self.units)
        self._build_rows()

    def _build_rows(self) -> None:
        """Rows in unit order, then node order. Request vectors are built one resource
        column at a time over every victim pod (no per-pod vector lookups), and pods of one
        unit on one node are summed with a single reduceat."""
        snap = self.snap
        width = len(snap.columns)
        table = self.table
        requests = table.requests
        count = len(requests)
        pod_unit = np.fromiter((unit.index for unit in table.owners), dtype=np.int64, count=count)
        pod_node = np.array(table.nodes, dtype=np.int64)
        vec = np.zeros((count, width), dtype=np.int64)
        for name, col in snap.columns.items():
            if name == PODS:
                vec[:, col] = 1
            elif snap.allocatable[:, col].any():  # a resource no node has: nobody holds it
                vec[:, col] = np.fromiter(
                    (r.get(name, 0) for r in requests), dtype=np.int64, count=count
                )
        nodes = max(len(snap), 1)
        key = pod_unit * nodes + pod_node
        # Sorting by (unit, node) makes every pair contiguous, in unit order.
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if count else np.zeros(0, int)
        self.row_vec = (
            np.add.reduceat(vec[order], starts, axis=0)
            if count
            else np.zeros((0, width), dtype=np.int64)
        )
        self.row_unit = (key[starts] // nodes).astype(np.intp)
        self.row_node = (key[starts] % nodes).astype(np.intp)
        self.row_start = np.searchsorted(self.row_unit, np.arange(len(self.units) + 1))

    def unit_rows(self, unit: VictimUnit) -> range:
        return range(int(self.row_start[unit.index]), int(self.row_start[unit.index + 1]))

    def rows_of(self, units: Sequence[VictimUnit]) -> IndexVector:
        if len(units) == len(self.units):
            return np.arange(len(self.row_node), dtype=np.intp)
        chosen = np.zeros(len(self.units), dtype=np.bool_)
        chosen[[unit.index for unit in units]] = True
        rows: IndexVector = np.flatnonzero(chosen[self.row_unit])
        return rows

    # ------------------------------------------------------------------ snapshot changes
    def mark(self) -> Mark:
        return (self.snap.checkpoint(), len(self._undo))

    def rollback(self, mark: Mark) -> None:
        """Undo everything since `mark`: journaled changes and capacity-only removals."""
        snap = self.snap
        snap.rollback(mark[0])
        while len(self._undo) > mark[1]:
            rows, hidden = self._undo.pop()
            if rows.size:
                np.add.at(snap.requested, self.row_node[rows], self.row_vec[rows])
            for pod, node in hidden:
                snap.show(pod, node)

    def remove(self, units: Sequence[VictimUnit], rows: IndexVector | None = None) -> None:
        """Take the units' pods away (undo with `rollback`); `rows` may give their rows.

        In the fast path their capacity is released in one array operation, and pods holding
        host ports leave their node's pod map (NodePorts reads it): that is all any filter
        or score the preemptor's pods run can observe. Otherwise each pod leaves its node
        through the snapshot journal, so affinity and spread see it gone.
        """
        if not units:
            return
        snap = self.snap
        if self.fast:
            if rows is None:
                rows = self.rows_of(units)
            np.subtract.at(snap.requested, self.row_node[rows], self.row_vec[rows])
            self._undo.append((rows, self._hide_ports(units)))
            return
        for unit in units:
            for pod, node in unit.placed:
                snap.remove_at(pod, node)

    def hide_ports(self, units: Sequence[VictimUnit]) -> None:
        """Only take the units' port holders off their nodes (undo with `rollback`)."""
        self._undo.append((np.zeros(0, dtype=np.intp), self._hide_ports(units)))

    def _hide_ports(self, units: Sequence[VictimUnit]) -> list[tuple[Pod, int]]:
        if not self.port_pods:
            return []
        if len(units) == len(self.units):
            holders = [h for hs in self.port_pods.values() for h in hs]
        else:
            holders = [h for u in units for h in self.port_pods.get(u.index, ())]
        for pod, node in holders:
            self.snap.hide(pod, node)
        return holders

    def port_conflict(self, unit: VictimUnit, node: int, ports: Sequence[HostPort]) -> bool:
        """Whether the unit holds, on `node`, a host port that conflicts with `ports`."""
        for pod, where in self.port_pods.get(unit.index, ()):
            if where == node and any(p.conflicts(q) for p in pod.host_ports for q in ports):
                return True
        return False

    def restore(self, units: Iterable[VictimUnit]) -> None:
        """Put removed units back (slow path only: journaled as assumptions)."""
        snap = self.snap
        for unit in units:
            for pod, node in unit.placed:
                snap.assume(pod, node)

    def place(self, *, probe: bool = False) -> CycleResult:
        placer = self.probe_placer if probe else self.placer
        return placer.place(self.gang, self.snap)

    def may_fit(self) -> bool:
        """Cheap necessary condition before a placement run: the free capacity summed over
        all nodes covers the `target` smallest pending requests, column by column."""
        pending = self.gang.pending
        if not pending or self.target <= 0:
            return True
        snap = self.snap
        free = snap.allocatable - snap.requested
        if self.reserved is not None:
            free = free - self.reserved
        if self.scope is not None:
            free = free[self.scope]
        total_free = np.clip(free, 0, None).sum(axis=0)
        wants = np.sort(np.stack([snap.vector(pod) for pod in pending]), axis=0)
        need = wants[: self.target].sum(axis=0)
        return bool(np.all(need <= total_free))

    # ---------------------------------------------------------------------- verification
    def remember(self, units: Sequence[VictimUnit], placements: list[tuple[Pod, int]]) -> None:
        """Record a successful run of the real cycle without `units` as their verification
        (the run is deterministic, so repeating it would find the same placement). Costed
        only if a search ends up proposing exactly this set."""
        key = frozenset(unit.index for unit in units)
        self._runs.setdefault(key, list(placements))

    def verify(self, units: Sequence[VictimUnit], name: str, potential: int) -> Candidate | None:
        """Run the real cycle without `units`; a Candidate if it succeeds (cached per set)."""
        key = frozenset(unit.index for unit in units)
        if key not in self._runs:
            if self.outranked_by and victim_cost(units, 0, self.budgets) > self.outranked_by:
                return None
            mark = self.mark()
            try:
                self.remove(units)
                result = self.place()
                placements = list(result.placements) if result.code is Code.SUCCESS else None
            finally:
                self.rollback(mark)
            self._runs[key] = placements
        placements = self._runs[key]
        if placements is None:
            return None
        cost = self._costs.get(key)
        if cost is None:
            unplaced = len(self.gang.pending) - len(placements)
            cost = self._costs[key] = victim_cost(units, unplaced, self.budgets)
        ordered = sorted(units, key=lambda u: u.index)
        return Candidate(name, ordered, placements, cost, potential)

    # -------------------------------------------------------------------------- reprieve
    def reprieve(
        self, victims: Sequence[VictimUnit], placement: Sequence[tuple[Pod, int]], key: UnitKey
    ) -> list[VictimUnit]:
        """Offer victims back in `key` order while `placement` still holds; the rest stay.

        Precondition: the snapshot has `victims` removed and `placement` assumed. The
        snapshot is left as found (the fast path never touches it; the slow path rolls
        back what it tried), so the caller's rollback restores everything.
        """
        if self.fast:
            return self._reprieve_fast(victims, placement, key)
        mark = self.mark()
        try:
            return self._reprieve_slow(victims, placement, key)
        finally:
            self.rollback(mark)

    def _reprieve_fast(
        self, victims: Sequence[VictimUnit], placement: Sequence[tuple[Pod, int]], key: UnitKey
    ) -> list[VictimUnit]:
        """Only victims on nodes holding placed preemptor pods can break the placement, and
        only through the columns those pods request: everything else is spared at once."""
        snap = self.snap
        cols: dict[int, IntVector] = {}
        for pod, node in placement:
            want = np.flatnonzero(snap.vector(pod))
            have = cols.get(node)
            cols[node] = want if have is None else np.union1d(have, want)
        slack: dict[int, list[int]] = {}
        for node, c in cols.items():
            free = snap.allocatable[node, c] - snap.requested[node, c]
            if self.reserved is not None:
                free = free - self.reserved[node, c]
            slack[node] = free.tolist()
        if not slack:
            return []
        on_member = np.zeros(len(snap), dtype=np.bool_)
        on_member[list(slack)] = True
        rows = self.rows_of(victims)
        rows = rows[on_member[self.row_node[rows]]]
        # A victim too big for the slack it meets first is never spared (slack only
        # shrinks as others are): settle all of those in one array pass.
        free_at = np.zeros_like(snap.requested)
        asked = np.zeros(snap.requested.shape, dtype=np.bool_)
        for node, c in cols.items():
            free_at[node, c] = slack[node]
            asked[node, c] = True
        nodes = self.row_node[rows]
        too_big = np.any((self.row_vec[rows] > free_at[nodes]) & asked[nodes], axis=1)
        hopeless = np.unique(self.row_unit[rows[too_big]])
        touching = np.setdiff1d(np.unique(self.row_unit[rows]), hopeless, assume_unique=True)
        ports_at: dict[int, list[HostPort]] = {}
        for pod, node in placement:
            if pod.host_ports:
                ports_at.setdefault(node, []).extend(pod.host_ports)
        kept: list[VictimUnit] = [self.units[int(u)] for u in hopeless]
        for unit in sorted((self.units[int(u)] for u in touching), key=key):
            need: list[tuple[list[int], list[int]]] = []
            fits = True
            for row in self.unit_rows(unit):
                node = int(self.row_node[row])
                room = slack.get(node)
                if room is None:
                    continue
                ask: list[int] = self.row_vec[row, cols[node]].tolist()
                if any(w > r for w, r in zip(ask, room, strict=True)) or (
                    node in ports_at and self.port_conflict(unit, node, ports_at[node])
                ):
                    fits = False
                    break
                need.append((room, ask))
            if not fits:
                kept.append(unit)
                continue
            for room, ask in need:
                for i, w in enumerate(ask):
                    room[i] -= w
        return kept

    def _reprieve_slow(
        self, victims: Sequence[VictimUnit], placement: Sequence[tuple[Pod, int]], key: UnitKey
    ) -> list[VictimUnit]:
        budget = self.config.slow_reprieve_budget
        kept: list[VictimUnit] = []
        for unit in sorted(victims, key=key):
            if budget <= 0:
                kept.append(unit)
                continue
            budget -= max(1, len(placement))
            mark = self.mark()
            self.restore([unit])
            if not self.holds(placement):
                self.rollback(mark)
                kept.append(unit)
        return kept

    def holds(self, placement: Sequence[tuple[Pod, int]]) -> bool:
        """Every placed preemptor pod still passes the filters on its node, re-placed in
        order so that each sees only the ones before it (as in the cycle)."""
        snap = self.snap
        framework = self.framework
        mark = snap.checkpoint()
        try:
            for pod, node in placement:
                snap.remove_at(pod, node)
            for pod, node in placement:
                ctx = framework.context(pod, snap)
                if not framework.feasible(ctx, snap)[node]:
                    return False
                snap.assume(pod, node)
            return True
        finally:
            snap.rollback(mark)

    def reprieve_verified(
        self, victims: Sequence[VictimUnit], key: UnitKey, name: str
    ) -> Candidate | None:
        """Fallback when an in-place reprieve did not survive verification: reprieve one
        victim at a time, keeping a reprieve only if the real cycle still succeeds. Every
        accepted state is verified, so the result always is; the budget bounds the runs."""
        current = list(victims)
        best = self.verify(current, name, self.potential_pods)
        if best is None:
            return None
        budget = self.config.verify_budget
        for unit in sorted(victims, key=key):
            if budget <= 0:
                break
            budget -= 1
            trial = [u for u in current if u is not unit]
            candidate = self.verify(trial, name, self.potential_pods)
            if candidate is not None and candidate.cost.unplaced <= best.cost.unplaced:
                current, best = trial, candidate
        return best
