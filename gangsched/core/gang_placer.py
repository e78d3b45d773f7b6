"""The gang placer: one PodGroup (or GangGroup) placed whole, at least minMember, or not at all.

Upstream semantics first (REFERENCE.md section 2): all pending members together, ordered by
priority then first-seen time, evaluated on one snapshot; each pod that fits is assumed so the
next one sees it; the group gives up as soon as minMember is out of reach; on failure every
assume is rolled back. Members already bound count toward minMember, and members beyond
minMember that do not fit stay pending; a cycle that places none of its pending members is
unschedulable even when bound members meet minMember, as upstream's (so that they preempt).

Where that fixed order fails, upstream stops. We then search, under a budget: largest pods
first, largest first with bin packing, and finally a depth-first search over nodes with
backtracking through the snapshot journal. Heterogeneous gangs and gangs whose members depend
on each other (affinity, spread) are exactly where the first order misses placements.

This is the bottom placer: it uses the framework alone. A topology constraint is the topology
placer's (core/topology/placement.py, which runs this one per candidate domain), a
CompositePodGroup tree the tree placer's (core/composite/placer.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gangsched.core.cycle import (
    CycleConfig,
    CycleResult,
    Gang,
    GangMember,
    member_order,
    validate,
)
from gangsched.core.framework import Framework
from gangsched.core.gang_waiting import short_task, waiting_message
from gangsched.core.model import GroupRef, Pod
from gangsched.core.node_equivalence import nodes_interchangeable, nodes_to_try
from gangsched.core.plugins.most_allocated import MostAllocated
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code


def _satisfied(
    gang: Gang, placed: dict[GroupRef, int], placements: Sequence[tuple[Pod, int]] = ()
) -> bool:
    if not all(
        part.quorum_bound + placed.get(part.group.ref, 0) >= part.group.min_member
        for part in gang.parts
    ):
        return False
    return all(_tasks_satisfied(part, placements) for part in gang.parts)


def _tasks_satisfied(part: GangMember, placements: Sequence[tuple[Pod, int]]) -> bool:
    if not part.group.min_task_members:
        return True
    mine = {id(pod) for pod in part.pending}
    return short_task(part, [pod for pod, _ in placements if id(pod) in mine]) is None


class GangPlacer:
    """Runs the cycle for one gang over a snapshot. Leaves successful placements assumed."""

    def __init__(self, framework: Framework, config: CycleConfig | None = None) -> None:
        self.framework = framework
        self.config = config or CycleConfig()
        self._packing = Framework(
            filters=framework.filters,
            scores=[(MostAllocated({"cpu": 1.0, "memory": 1.0}), 1.0)],
            pre_filters=framework.pre_filters,
        )

    def place(self, gang: Gang, snap: Snapshot) -> CycleResult:
        """One gang (or GangGroup): at least minMember of every part, or nothing."""
        assert gang.tree is None, "a CompositePodGroup tree is the tree placer's"
        if gang.broken is not None:
            return CycleResult(Code.ERROR, message=gang.broken.message)
        error = validate(gang)
        if error is not None:
            return CycleResult(Code.ERROR, message=error)
        waiting = waiting_message(gang)
        if waiting is not None:
            return CycleResult(Code.WAIT, message=waiting)
        if _satisfied(gang, {}) and not gang.pending:
            return CycleResult(Code.SUCCESS, strategy="already-bound")

        mark = snap.checkpoint()
        first = self._greedy(gang, snap, member_order(gang.pending), self.framework, diagnose=True)
        if first.code is Code.SUCCESS and not first.placements:
            return _nothing_placed(gang, first)
        if first.code is Code.SUCCESS:
            first.strategy = "greedy"
            return first
        snap.rollback(mark)
        if not _search_can_help(gang, snap):
            return first

        largest = sorted(gang.pending, key=lambda p: _size_key(p, snap))
        attempts: list[tuple[str, Callable[[], CycleResult]]] = [
            ("largest-first", lambda: self._greedy(gang, snap, largest, self.framework)),
            ("bin-packing", lambda: self._greedy(gang, snap, largest, self._packing)),
            ("backtracking", lambda: self._backtrack(gang, snap, largest)),
        ]
        for name, attempt in attempts:
            result = attempt()
            if result.code is Code.SUCCESS:
                result.strategy = name
                extend_placement(gang, snap, self.framework, result)
                return result
            snap.rollback(mark)
        return first

    # ------------------------------------------------------------------------------ greedy
    def _greedy(
        self,
        gang: Gang,
        snap: Snapshot,
        order: list[Pod],
        framework: Framework,
        *,
        diagnose: bool = False,
    ) -> CycleResult:
        placements: list[tuple[Pod, int]] = []
        placed: dict[GroupRef, int] = {}
        remaining = {part.group.ref: len(part.pending) for part in gang.parts}
        result = CycleResult(Code.UNSCHEDULABLE)
        for pod in order:
            ref = gang.ref_of(pod)
            remaining[ref] -= 1
            ctx = framework.context(pod, snap)
            mask = framework.feasible(ctx, snap)
            if mask.any():
                node = _nominated_if_feasible(pod, snap, mask)
                if node is None:
                    node = framework.select(ctx, snap, mask)
                snap.assume(pod, node)
                placements.append((pod, node))
                placed[ref] = placed.get(ref, 0) + 1
                continue
            if diagnose:
                diagnosis = framework.diagnose(ctx, snap)
                result.pod_messages[pod.key] = diagnosis.fit.message()
                if result.failed_pod is None:
                    result.failed_pod, result.diagnosis = pod, diagnosis
            part = _part_of(gang, ref)
            scheduled = part.quorum_bound + placed.get(ref, 0)
            if scheduled + remaining[ref] < part.group.min_member:
                result.message = _give_up_message(part, scheduled, remaining[ref], result)
                return result
        if _satisfied(gang, placed, placements):
            return CycleResult(
                Code.SUCCESS,
                placements=placements,
                pod_messages=result.pod_messages,
                failed_pod=result.failed_pod,
                diagnosis=result.diagnosis,
            )
        short = next(
            (
                p
                for p in gang.parts
                if p.quorum_bound + placed.get(p.group.ref, 0) < p.group.min_member
            ),
            None,
        )
        if short is not None:
            result.message = _give_up_message(
                short, short.quorum_bound + placed.get(short.group.ref, 0), 0, result
            )
        else:
            result.message = _task_give_up_message(gang, placements, result)
        return result

    # -------------------------------------------------------------------------- backtracking
    def _backtrack(self, gang: Gang, snap: Snapshot, order: list[Pod]) -> CycleResult:
        """Depth-first over (pod, node), trying each pod on its best few distinct nodes and,
        where the group has spare members, leaving it out. Bounded by `search_budget`."""
        budget = [self.config.search_budget]
        placements: list[tuple[Pod, int]] = []
        placed: dict[GroupRef, int] = {}
        spare = {
            part.group.ref: part.quorum_bound + len(part.pending) - part.group.min_member
            for part in gang.parts
        }
        skipped: dict[GroupRef, int] = {}
        dedupe = nodes_interchangeable(order, snap)

        def search(i: int) -> bool:
            if _satisfied(gang, placed, placements):
                return True
            if i == len(order) or budget[0] <= 0:
                return False
            pod = order[i]
            ref = gang.ref_of(pod)
            ctx = self.framework.context(pod, snap)
            mask = self.framework.feasible(ctx, snap)
            ranked = self.framework.ranked(ctx, snap, mask)
            width = self.config.search_width
            for node in nodes_to_try(snap, ranked, width=width, budget=budget, dedupe=dedupe):
                mark = snap.checkpoint()
                snap.assume(pod, node)
                placements.append((pod, node))
                placed[ref] = placed.get(ref, 0) + 1
                if search(i + 1):
                    return True
                placed[ref] -= 1
                placements.pop()
                snap.rollback(mark)
            if skipped.get(ref, 0) < spare[ref]:
                skipped[ref] = skipped.get(ref, 0) + 1
                if search(i + 1):
                    return True
                skipped[ref] -= 1
            return False

        if search(0):
            return CycleResult(Code.SUCCESS, placements=list(placements))
        return CycleResult(Code.UNSCHEDULABLE)


def extend_placement(gang: Gang, snap: Snapshot, framework: Framework, result: CycleResult) -> None:
    """After a search satisfied minMember, place leftover members greedily where they fit."""
    placed = {id(pod) for pod, _ in result.placements}
    for pod in member_order(gang.pending):
        if id(pod) in placed:
            continue
        ctx = framework.context(pod, snap)
        mask = framework.feasible(ctx, snap)
        if mask.any():
            node = framework.select(ctx, snap, mask)
            snap.assume(pod, node)
            result.placements.append((pod, node))
            result.pod_messages.pop(pod.key, None)
        elif pod.key not in result.pod_messages:
            result.pod_messages[pod.key] = framework.diagnose(ctx, snap).fit.message()


def _nothing_placed(gang: Gang, result: CycleResult) -> CycleResult:
    """minMember is already met by bound members, but no pending member fits now.

    Upstream turns such a success into Unschedulable ("at least one pod must be scheduled"),
    which is what sends the members beyond the quorum to workload-aware preemption; the
    gang keeps what it has either way."""
    parts = ", ".join(
        f"{part.group.key} minCount ({part.group.min_member}) is met: {len(part.bound)} scheduled"
        # Koordinator's once-satisfied gangs stay met with fewer members bound.
        + (" (once satisfied)" if part.quorum_bound > len(part.bound) else "")
        for part in gang.parts
        if part.pending
    )
    text = f"{parts}; none of the {len(gang.pending)} pending pod(s) fits"
    if result.failed_pod is not None and result.diagnosis is not None:
        text += f"; {result.failed_pod.key}: {result.diagnosis.fit.message()}"
    return CycleResult(
        Code.UNSCHEDULABLE,
        message=text,
        pod_messages=result.pod_messages,
        failed_pod=result.failed_pod,
        diagnosis=result.diagnosis,
    )


def _nominated_if_feasible(pod: Pod, snap: Snapshot, mask: BoolVector) -> int | None:
    """A pod nominated after preemption goes to the node freed for it when it still fits
    there (as kube-scheduler tries the nominated node first)."""
    if pod.nominated_node_name is None:
        return None
    node = snap.index.get(pod.nominated_node_name)
    return node if node is not None and bool(mask[node]) else None


def _search_can_help(gang: Gang, snap: Snapshot) -> bool:
    """Whether another order could succeed where upstream's failed; skipping hopeless
    searches keeps unschedulable gangs cheap to retry.

    - one pending pod: the greedy pass already tried every node;
    - identical members with no inter-pod constraints: each node's room for them does not
      depend on the others, so greedy places as many as any order can;
    - the smallest members needed to reach minMember ask for more than the whole cluster
      has free: no placement exists.
    """
    pending = gang.pending
    if len(pending) <= 1:
        return False
    if len({_spec_key(p) for p in pending}) == 1 and not (
        pending[0].affinity or pending[0].anti_affinity or pending[0].spread
    ):
        return False
    free = (snap.allocatable - snap.requested).clip(min=0).sum(axis=0)
    needed = np.zeros_like(free)
    for part in gang.parts:
        short = part.group.min_member - part.quorum_bound
        if short <= 0 or not part.pending:
            continue
        # Per resource, the `short` smallest requests: a lower bound on any placement.
        requests = np.sort(np.stack([snap.vector(p) for p in part.pending]), axis=0)
        needed += requests[:short].sum(axis=0)
    return bool((needed <= free).all())


def _spec_key(pod: Pod) -> tuple[object, ...]:
    return (
        tuple(sorted(pod.requests.items())),
        pod.constraints,
        pod.host_ports,
        pod.affinity,
        pod.anti_affinity,
        pod.spread,
        pod.volume_claims,
        pod.os_name,
        pod.task,
    )


def _part_of(gang: Gang, ref: GroupRef) -> GangMember:
    return next(part for part in gang.parts if part.group.ref == ref)


def _give_up_message(part: GangMember, scheduled: int, remaining: int, result: CycleResult) -> str:
    return (
        f"minCount ({part.group.min_member}) cannot be satisfied: "
        f"{scheduled} scheduled, {remaining} remaining{_why(result)}"
    )


def _why(result: CycleResult) -> str:
    """Why the pod the cycle stopped at fits nowhere, as a suffix of a give-up message."""
    if result.failed_pod is not None and result.diagnosis is not None:
        return f"; {result.failed_pod.key}: {result.diagnosis.fit.message()}"
    return ""


def _task_give_up_message(
    gang: Gang, placements: Sequence[tuple[Pod, int]], result: CycleResult
) -> str:
    """minMember fits but a Volcano task's minTaskMember does not."""
    for part in gang.parts:
        mine = {id(pod) for pod in part.pending}
        short = short_task(part, [pod for pod, _ in placements if id(pod) in mine])
        if short is None:
            continue
        task, have, need = short
        return (
            f"minTaskMember[{task}] ({need}) of {part.group.key} cannot be satisfied: "
            f"{have} scheduled{_why(result)}"
        )
    return "the gang cannot be satisfied"


def _size_key(pod: Pod, snap: Snapshot) -> tuple[float, float, str]:
    """Largest first by dominant share of the biggest node, then total share, then name."""
    vec = snap.vector(pod).astype(np.float64)
    capacity = snap.allocatable.max(axis=0).astype(np.float64) if len(snap) else vec
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(capacity > 0, vec / capacity, 0.0)
    return (-float(shares.max(initial=0.0)), -float(shares.sum()), pod.key)
