"""Dry-run machinery shared by the preemption strategies.

Everything happens on the live snapshot under a checkpoint: victims are taken away with
journaled removals, the gang is placed with the ordinary `GangPlacer`, and a rollback puts
the snapshot back exactly. Copying a 5,000-node snapshot per trial would cost more than the
whole search.

Two ways to check that a placement still holds when a victim is given back ("reprieved"):

* exact arithmetic, when only capacity can be affected: the preemptor pods ask for no host
  ports, pod (anti-)affinity or topology spread, and no victim carries anti-affinity terms.
  Then a victim matters only on the nodes where preemptor pods were placed, and only through
  the resource columns those pods request, so a reprieve is a vector comparison against the
  slack left on those nodes and victims elsewhere are spared without touching the snapshot;
* re-running the filters of every placed preemptor pod in placement order otherwise (what the
  KEP calls in-place reprieval), at the cost of a full filter pass per pod.

Whatever a search finds is then verified by `GangPlacer.place` on the snapshot without the
chosen victims: only a set for which the real cycle succeeds is ever returned, and the
nominations come from that verifying run, which is the placement the next cycle will find.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang, GangPlacer
from gangsched.core.framework import Framework
from gangsched.core.model import Pod
from gangsched.core.preemption.cost import Cost, victim_cost
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimUnit, importance_key
from gangsched.core.snapshot import IntMatrix, IntVector, Snapshot
from gangsched.core.status import Code

#: Name of the capacity filter; the other filters do not depend on victims in the fast path.
RESOURCES_FIT = "NodeResourcesFit"

UnitKey = Callable[[VictimUnit], tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    #: Nodes examined one by one for a lone pod when filters beyond capacity are involved
    #: (upstream examines at least 100 or 10% of the nodes).
    max_slow_nodes: int = 100
    #: Filter re-runs the in-place reprieve may spend when capacity arithmetic is not exact;
    #: victims not examined within the budget stay victims (always safe).
    slow_reprieve_budget: int = 4000
    #: Full placement runs the fallback reprieve may spend when a verified set must be built
    #: one victim at a time.
    verify_budget: int = 64


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


def _needs_filters(pod: Pod) -> bool:
    """True when the pod has constraints that other pods (victims) can affect."""
    return bool(pod.host_ports or pod.affinity or pod.anti_affinity or pod.spread)


@dataclass(slots=True)
class Problem:
    """One preemption attempt: the gang, its potential victims and the dry-run helpers."""

    gang: Gang
    failed: CycleResult
    cluster: ClusterState
    framework: Framework
    placer: GangPlacer
    priority: int
    units: list[VictimUnit]
    budgets: BudgetIndex
    config: PreemptionConfig
    snap: Snapshot = field(init=False)
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
    _verified: dict[frozenset[int], Candidate | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.snap = self.cluster.snapshot
        pending = self.gang.pending
        for pod in pending:
            # A request for a resource no node has adds a column: do it before any matrix
            # is sliced, so every vector and matrix of the search has the same width.
            self.snap.vector(pod)
        self.fast = not any(_needs_filters(pod) for pod in pending) and not any(
            pod.anti_affinity for unit in self.units for pod, _ in unit.placed
        )
        lowest = min((pod.priority for pod in pending), default=self.priority)
        self.reserved = self.snap.reserved(min(lowest, self.priority), None)
        self.static_framework = Framework(
            filters=[f for f in self.framework.filters if f.name != RESOURCES_FIT], scores=[]
        )
        ordered = sorted(self.units, key=lambda u: importance_key(u, frozenset()))
        self.violating = self.budgets.violating_units(ordered)

    @property
    def potential_pods(self) -> int:
        return sum(unit.size for unit in self.units)

    # ------------------------------------------------------------------ snapshot changes
    def remove(self, units: Iterable[VictimUnit]) -> None:
        """Take the units' pods off their nodes (journaled; roll back to undo)."""
        snap = self.snap
        for unit in units:
            for pod, node in unit.placed:
                snap.remove_at(pod, node)

    def restore(self, units: Iterable[VictimUnit]) -> None:
        """Put removed units back (journaled as assumptions, so a rollback removes them)."""
        snap = self.snap
        for unit in units:
            for pod, node in unit.placed:
                snap.assume(pod, node)

    def place(self) -> CycleResult:
        return self.placer.place(self.gang, self.snap)

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
        total_free = np.clip(free, 0, None).sum(axis=0)
        wants = np.sort(np.stack([snap.vector(pod) for pod in pending]), axis=0)
        need = wants[: self.target].sum(axis=0)
        return bool(np.all(need <= total_free))

    # ---------------------------------------------------------------------- verification
    def verify(self, units: Sequence[VictimUnit], name: str, potential: int) -> Candidate | None:
        """Run the real cycle without `units`; a Candidate if it succeeds (cached per set)."""
        key = frozenset(unit.index for unit in units)
        if key in self._verified:
            cached = self._verified[key]
            if cached is None:
                return None
            return Candidate(name, cached.units, cached.placements, cached.cost, potential)
        snap = self.snap
        mark = snap.checkpoint()
        try:
            self.remove(units)
            result = self.place()
            placements = list(result.placements) if result.code is Code.SUCCESS else None
        finally:
            snap.rollback(mark)
        if placements is None:
            self._verified[key] = None
            return None
        ordered = sorted(units, key=lambda u: u.index)
        unplaced = len(self.gang.pending) - len(placements)
        cost = victim_cost(ordered, unplaced, self.budgets)
        candidate = Candidate(name, ordered, placements, cost, potential)
        self._verified[key] = candidate
        return candidate

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
        mark = self.snap.checkpoint()
        try:
            return self._reprieve_slow(victims, placement, key)
        finally:
            self.snap.rollback(mark)

    def _reprieve_fast(
        self, victims: Sequence[VictimUnit], placement: Sequence[tuple[Pod, int]], key: UnitKey
    ) -> list[VictimUnit]:
        snap = self.snap
        cols: dict[int, IntVector] = {}
        for pod, node in placement:
            want = np.flatnonzero(snap.vector(pod))
            have = cols.get(node)
            cols[node] = want if have is None else np.union1d(have, want)
        slack: dict[int, IntVector] = {}
        for node, c in cols.items():
            free = snap.allocatable[node, c] - snap.requested[node, c]
            if self.reserved is not None:
                free = free - self.reserved[node, c]
            slack[node] = free
        kept: list[VictimUnit] = []
        for unit in sorted(victims, key=key):
            need: dict[int, IntVector] = {}
            for pod, node in unit.placed:
                if node in slack:
                    vec = snap.vector(pod)[cols[node]]
                    prev = need.get(node)
                    need[node] = vec if prev is None else prev + vec
            if all(bool(np.all(slack[node] >= vec)) for node, vec in need.items()):
                for node, vec in need.items():
                    slack[node] = slack[node] - vec
            else:
                kept.append(unit)
        return kept

    def _reprieve_slow(
        self, victims: Sequence[VictimUnit], placement: Sequence[tuple[Pod, int]], key: UnitKey
    ) -> list[VictimUnit]:
        snap = self.snap
        budget = self.config.slow_reprieve_budget
        kept: list[VictimUnit] = []
        for unit in sorted(victims, key=key):
            if budget <= 0:
                kept.append(unit)
                continue
            budget -= max(1, len(placement))
            mark = snap.checkpoint()
            self.restore([unit])
            if not self.holds(placement):
                snap.rollback(mark)
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
