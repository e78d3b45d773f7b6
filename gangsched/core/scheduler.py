"""One scheduling step: pop the most important gang, run its cycle, return the decisions.

`gangsched run` and `gangsched simulate` both drive this class; they differ only in how the
decisions are carried out (API server vs in-memory cluster) and in where time comes from.
Placements are assumed in the cluster state as soon as they are decided, like kube-scheduler's
cache, so the next cycle never double-books a node while a bind is in flight.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.tree import BrokenTree, build_tree
from gangsched.core.composite.verdicts import met_by_bound
from gangsched.core.cycle import (
    CycleConfig,
    CycleResult,
    Gang,
    GangMember,
)
from gangsched.core.decisions import (
    ERROR,
    NOT_READY_FOR_SCHEDULING,
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING,
    WAITING_ON_PREEMPTION,
    Bind,
    Decision,
    Event,
    GroupOutcome,
    Nominate,
    SetCondition,
)
from gangsched.core.framework import Framework
from gangsched.core.gang_waiting import waiting_note
from gangsched.core.model import Dialect, GroupRef, MatchPolicy, Pod, PodGroup
from gangsched.core.placers import UnitPlacer
from gangsched.core.plugins import ScoringConfig, build_framework
from gangsched.core.queue import SchedulingQueue
from gangsched.core.queue_order import queue_position
from gangsched.core.status import Code
from gangsched.core.topology.placement import TopologyConfig
from gangsched.core.topology.report import TopologyReport


@dataclass(slots=True)
class PreemptionOutcome:
    """What preemption decided for a gang that could not be placed."""

    #: True when victims were chosen (or earlier ones are still terminating).
    started: bool
    message: str
    decisions: list[Decision] = field(default_factory=list)
    victims: list[Pod] = field(default_factory=list)
    pdb_violations: int = 0
    reprieved: int = 0
    strategy: str = ""


class Preemptor(Protocol):
    def preempt(
        self, gang: Gang, failed: CycleResult, cluster: ClusterState, framework: Framework
    ) -> PreemptionOutcome: ...


@dataclass(slots=True)
class SchedulerConfig:
    scheduler_name: str = "gangsched"
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    cycle: CycleConfig = field(default_factory=CycleConfig)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    pop_from_backoff: bool = True


@dataclass(slots=True)
class CycleReport:
    """Everything one step decided, for the driver, the logs and the metrics."""

    gang: GroupRef
    result: str
    message: str
    decisions: list[Decision]
    pods: list[str]
    strategy: str = ""
    victims: int = 0
    preemption: PreemptionOutcome | None = None
    #: This attempt's number for the gang (1 = first try).
    attempts: int = 1
    #: Seconds spent placing the gang (the cycle alone, without preemption).
    algorithm_seconds: float = 0.0
    #: Domains tried and chosen, for a topology-constrained gang (issue 14).
    topology: TopologyReport | None = None

    @property
    def bound(self) -> list[Bind]:
        return [d for d in self.decisions if isinstance(d, Bind)]


class Scheduler:
    def __init__(
        self,
        cluster: ClusterState,
        config: SchedulerConfig | None = None,
        *,
        preemptor: Preemptor | None = None,
    ) -> None:
        self.config = config or SchedulerConfig(scheduler_name=cluster.scheduler_name)
        self.cluster = cluster
        self.framework = build_framework(self.config.scoring)
        #: The placer for each kind of unit popped (core/placers.py).
        self.placer = UnitPlacer(self.framework, self.config.cycle, self.config.topology)
        self.queue = SchedulingQueue(
            initial_backoff=self.config.initial_backoff,
            max_backoff=self.config.max_backoff,
            pop_from_backoff=self.config.pop_from_backoff,
        )
        self.preemptor = preemptor

    # ------------------------------------------------------------------------------ queueing
    def unit_key(self, ref: GroupRef) -> GroupRef:
        return self.cluster.unit_key(ref)

    def enqueue_pending(self, now: float = 0.0) -> None:
        """Make sure every gang with pending pods is in the queue; drop the others."""
        keys = {self.unit_key(ref) for ref in self.cluster.pending_refs()}
        for key in keys:
            self._enqueue(self.gang(key), now)

    def enqueue_pod(self, pod: Pod, now: float = 0.0) -> None:
        if self.cluster.is_pending(pod):
            self._enqueue(self.gang(self.unit_key(self.cluster.group_of(pod))), now)

    def _enqueue(self, gang: Gang, now: float) -> None:
        position = queue_position(gang)
        self.queue.add(
            gang.key,
            priority=position.priority,
            created=position.timestamp,
            name=position.name,
            now=now,
        )

    def gang(self, key: GroupRef) -> Gang:
        parts: list[GangMember] = []
        if key.dialect is Dialect.UPSTREAM and key in self.cluster.groups:
            root = self.cluster.tree_root(key)
            if isinstance(root, BrokenTree):
                return Gang(key=key, parts=[self._member(key)], broken=root)
        for ref in self.cluster.unit_of(key):
            parts.append(self._member(ref))
        gang = Gang(key=key, parts=parts)
        if key.dialect is Dialect.COMPOSITE:
            cluster = self.cluster
            gang.tree = build_tree(key, cluster.groups, cluster.composites, cluster.tree_children())
        return gang

    def _member(self, ref: GroupRef) -> GangMember:
        """One PodGroup of a unit with its members sorted by state."""
        group = self.cluster.pod_group(ref) or _missing_group(ref)
        bound: list[Pod] = []
        pending: list[Pod] = []
        foreign: list[Pod] = []
        gated: list[Pod] = []
        for pod in self.cluster.group_members(ref):
            if pod.is_finished or pod.terminating:
                # kube-scheduler never sees a Succeeded or Failed pod (its informer
                # filters them out): it counts for nothing toward minMember. The
                # PodGroup status still counts it as succeeded/failed (core/phase.py).
                continue
            if self.cluster.is_pending(pod):
                pending.append(pod)
            elif self.cluster.is_gated(pod):
                gated.append(pod)
            elif pod.node_name is not None:
                bound.append(pod)
            else:
                foreign.append(pod)
        return GangMember(
            group=group,
            bound=bound,
            pending=pending,
            foreign=foreign,
            gated=gated,
            counted_bound=Scheduler._counted_bound(ref, group, bound),
        )

    @staticmethod
    def _counted_bound(ref: GroupRef, group: PodGroup, bound: list[Pod]) -> int | None:
        """Koordinator's match policy: which bound members count toward minMember.

        Koordinator's gangs (scheduling.sigs.k8s.io PodGroups, annotation gangs) default to
        once-satisfied: once any member was bound the gang is satisfied for good and later
        members go one by one. only-waiting counts only members placed in this cycle;
        waiting-and-running counts bound ones too, which is kube-scheduler's and
        scheduler-plugins' rule for their dialects (None: every bound member counts).
        """
        policy = group.match_policy
        if policy is None and ref.dialect in (Dialect.SIGS, Dialect.KOORDINATOR):
            policy = MatchPolicy.ONCE_SATISFIED
        if policy is MatchPolicy.ONLY_WAITING:
            return 0
        if policy is MatchPolicy.ONCE_SATISFIED and bound:
            # Koordinator remembers "satisfied" in memory from the first bind on; here a gang
            # is satisfied while a member of it is bound and alive (finished members count
            # for nothing, as kube-scheduler never sees them).
            return max(len(bound), group.min_member)
        return None

    # ------------------------------------------------------------------------------ stepping
    def step(self, now: float) -> CycleReport | None:
        """Pop and try one gang; None when nothing is ready."""
        while True:
            key = self.queue.pop(now)
            if key is None:
                return None
            unit = self.unit_key(key)
            if unit != key:
                # The unit changed since it was queued (a parent CompositePodGroup appeared,
                # or went): the group is tried with its tree from now on.
                self.queue.done(key)
                self._enqueue(self.gang(unit), now)
                continue
            gang = self.gang(key)
            if not gang.pending:
                self.queue.done(key)
                continue
            return self.schedule(gang, now)

    def schedule(self, gang: Gang, now: float) -> CycleReport:
        snap = self.cluster.snapshot
        missing = [p for p in gang.parts if p.group.min_member < 0]
        if missing:
            return self._unresolved(gang, missing[0], now)
        mark = snap.checkpoint()
        attempts = self.queue.attempts_of(gang.key) + 1
        started = time.perf_counter()
        result = self.placer.place(gang, snap)
        algorithm_seconds = time.perf_counter() - started
        report = self._outcome(gang, result, mark, now)
        report.attempts = attempts
        report.algorithm_seconds = algorithm_seconds
        report.topology = result.topology
        return report

    def _outcome(self, gang: Gang, result: CycleResult, mark: int, now: float) -> CycleReport:
        snap = self.cluster.snapshot
        pods = [p.key for p in gang.pending]
        if result.code is Code.SUCCESS:
            snap.commit()
            return self._scheduled(gang, result, pods)
        snap.rollback(mark)
        if result.code is Code.WAIT:
            note = result.message if gang.tree is not None else waiting_note(gang)
            return self._waiting(gang, result.message, note=note, now=now)
        if result.code is Code.ERROR:
            self.queue.backoff(gang.key, now)
            return self._not_scheduled(
                gang,
                result=ERROR,
                reason="SchedulerError",
                message=result.message,
                pod_messages={},
                pods=pods,
            )
        preemption = None
        if self.preemptor is not None:
            preemption = self.preemptor.preempt(gang, result, self.cluster, self.framework)
            if preemption.started:
                # Retried once the victims are gone (their deletion is a cluster change).
                # Only choosing victims counts as an attempt; waiting for earlier ones to
                # terminate does not grow the backoff (it was 8 s after four tries).
                self.queue.unschedulable(gang.key, now, counted=bool(preemption.victims))
                report = self._not_scheduled(
                    gang,
                    result=WAITING_ON_PREEMPTION,
                    reason="Unschedulable",
                    message=f"{result.message}; {preemption.message}",
                    pod_messages=result.pod_messages,
                    pods=pods,
                    levels=result.levels,
                )
                report.decisions[:0] = preemption.decisions
                report.victims = len(preemption.victims)
                report.preemption = preemption
                return report
        self.queue.unschedulable(gang.key, now)
        message = result.message
        if preemption is not None and preemption.message:
            message = f"{message}; {preemption.message}"
        report = self._not_scheduled(
            gang,
            result=UNSCHEDULABLE,
            reason="Unschedulable",
            message=message,
            pod_messages=result.pod_messages,
            pods=pods,
            levels=result.levels,
        )
        report.preemption = preemption
        return report

    # -------------------------------------------------------------------------------- results
    def _scheduled(self, gang: Gang, result: CycleResult, pods: list[str]) -> CycleReport:
        snap = self.cluster.snapshot
        # What the cycle reserved beside the nodes (claims' devices, volumes) comes first:
        # the edge writes all of it before binding any pod of the gang.
        decisions: list[Decision] = snap.write_backs()
        placed: set[str] = set()
        assigned: list[tuple[Pod, str]] = []
        for pod, node in result.placements:
            node_name = snap.nodes[node].name
            decisions += snap.pod_write_backs(pod, node_name)
            if pod.nominated_node_name is not None:
                # The reservation is used: clear it so status shows no stale nomination.
                decisions.append(Nominate(pod=pod.key, uid=pod.uid, node=None))
            self.cluster.bind(pod, node_name)
            placed.add(pod.key)
            decisions.append(Bind(pod=pod.key, uid=pod.uid, node=node_name, group=gang.key))
            assigned.append((pod, node_name))
        if assigned:
            decisions.append(_scheduled_event(gang, assigned))
        leftover = False
        for pod in gang.pending:
            if pod.key not in placed:
                leftover = True
                message = result.pod_messages.get(pod.key, "no node fits this pod")
                decisions.append(_unschedulable(pod, "Unschedulable", message))
        if leftover:
            # Members beyond the quorum that did not fit go straight back to the active
            # queue, as upstream requeues them after a successful attempt: the next attempt
            # finds minMember met, places what fits by then, else preempts for them.
            self.queue.requeue(gang.key)
        else:
            self.queue.done(gang.key)
        met = _met_by_bound(gang)
        for part in gang.parts:
            scheduled = len(part.bound) + sum(
                1 for pod, _ in result.placements if any(pod is p for p in part.pending)
            )
            level = result.levels.get(part.group.ref)
            if level is not None and not level[0] and part.group.ref not in met:
                outcome = WAITING if _short_of_members(part) else UNSCHEDULABLE
                decisions.append(GroupOutcome(part.group.ref, outcome, level[1]))
                continue
            decisions.append(
                GroupOutcome(part.group.ref, SCHEDULED, f"{scheduled} pod(s) scheduled")
            )
        decisions += _composite_outcomes(gang, result, SCHEDULED, result.message, met=met)
        return CycleReport(
            gang=gang.key,
            result=SCHEDULED,
            message=f"placed {len(result.placements)} pod(s) ({result.strategy})",
            decisions=decisions,
            pods=pods,
            strategy=result.strategy,
        )

    def _not_scheduled(
        self,
        gang: Gang,
        *,
        result: str,
        reason: str,
        message: str,
        pod_messages: dict[str, str],
        pods: list[str],
        levels: dict[GroupRef, tuple[bool, str]] | None = None,
    ) -> CycleReport:
        decisions: list[Decision] = []
        for pod in gang.pending:
            detail = pod_messages.get(pod.key)
            text = message if detail is None or detail in message else f"{message}; {detail}"
            decisions.append(_unschedulable(pod, reason, text))
        met = _met_by_bound(gang)
        for part in gang.parts:
            ref = part.group.ref
            if ref in met:
                # A level of a tree whose minimum its bound members meet stays scheduled
                # (see met_by_bound): the attempt failed for other members only.
                decisions.append(GroupOutcome(ref, SCHEDULED, met[ref]))
                continue
            level = (levels or {}).get(ref)
            own = message if level is None or level[1] in message else f"{level[1]}; {message}"
            decisions.append(GroupOutcome(ref, result, own))
        decisions += _composite_outcomes(gang, None, result, message, levels=levels, met=met)
        kind, name = _regarding(gang)
        event_type = "Normal" if result == WAITING_ON_PREEMPTION else "Warning"
        event_reason = "FailedScheduling" if result != WAITING_ON_PREEMPTION else "Preempting"
        decisions.append(Event(kind, name, event_type, event_reason, "Scheduling", message))
        return CycleReport(
            gang=gang.key, result=result, message=message, decisions=decisions, pods=pods
        )

    def _unresolved(self, gang: Gang, part: GangMember, now: float) -> CycleReport:
        ref = part.group.ref
        message = f"{ref.dialect.value} PodGroup {ref.key} not found"
        return self._waiting(gang, message, note=message, now=now, per_pod_events=True)

    def _waiting(
        self, gang: Gang, message: str, *, note: str, now: float, per_pod_events: bool = False
    ) -> CycleReport:
        """Held before the cycle, as upstream's PreEnqueue holds a gang with fewer than
        minCount members or no PodGroup yet: not an attempt, and never `Unschedulable`
        (cluster-autoscaler and Karpenter add nodes for pods with that reason, and no node
        can help a gang that is not complete). Pods get KEP-5501's `PodScheduled=False`
        reason `NotReadyForScheduling`; the PodGroup outcome and an event say why. The gang
        comes back only when its members or its PodGroup change (see the queue)."""
        self.queue.unschedulable(gang.key, now, counted=False, waiting=True)
        decisions: list[Decision] = [
            _condition(pod, NOT_READY_FOR_SCHEDULING, note) for pod in gang.pending
        ]
        met = _met_by_bound(gang)
        decisions += [
            GroupOutcome(part.group.ref, SCHEDULED, met[part.group.ref])
            if part.group.ref in met
            else GroupOutcome(part.group.ref, WAITING, message)
            for part in gang.parts
        ]
        decisions += _composite_outcomes(gang, None, WAITING, message, met=met)
        if per_pod_events:  # no PodGroup object to hang the event on: tell each pod
            decisions += [
                Event("Pod", pod.key, "Normal", NOT_READY_FOR_SCHEDULING, "Scheduling", note)
                for pod in gang.pending
            ]
        else:
            kind, name = _regarding(gang)
            decisions.append(
                Event(kind, name, "Normal", NOT_READY_FOR_SCHEDULING, "Scheduling", note)
            )
        return CycleReport(
            gang=gang.key,
            result=WAITING,
            message=message,
            decisions=decisions,
            pods=[p.key for p in gang.pending],
        )


def _scheduled_event(gang: Gang, assigned: list[tuple[Pod, str]]) -> Event:
    kind, regarding = _regarding(gang)
    if kind == "Pod":
        pod, node = assigned[0]
        note = f"Successfully assigned {pod.key} to {node}"
    else:
        # One event per gang rather than per pod: the gang is what was scheduled, and a
        # 64-pod gang costs one API write instead of 64.
        pairs = ", ".join(f"{pod.name} -> {node}" for pod, node in assigned)
        note = f"Successfully assigned {len(assigned)} pod(s): {pairs}"
    return Event(kind, regarding, "Normal", "Scheduled", "Binding", note)


def _missing_group(ref: GroupRef) -> PodGroup:
    """Stand-in for a PodGroup the pods name but the cluster does not have (min_member -1)."""
    return PodGroup(ref=ref, min_member=-1)


def _regarding(gang: Gang) -> tuple[str, str]:
    if gang.key.dialect is Dialect.LONE_POD:
        return "Pod", gang.key.key
    if gang.key.dialect is Dialect.COMPOSITE:
        return "CompositePodGroup", gang.key.key
    return "PodGroup", gang.key.key


def _short_of_members(part: GangMember) -> bool:
    return part.quorum_bound + len(part.pending) < part.group.min_member


def _met_by_bound(gang: Gang) -> dict[GroupRef, str]:
    """The levels of the gang's tree that its bound members satisfy (none for other gangs:
    a flat gang's outcome is its cycle's)."""
    if gang.tree is None or gang.broken is not None:
        return {}
    return met_by_bound(gang.tree, {part.group.ref: part for part in gang.parts})


def _composite_outcomes(
    gang: Gang,
    placed: CycleResult | None,
    result: str,
    message: str,
    *,
    levels: dict[GroupRef, tuple[bool, str]] | None = None,
    met: dict[GroupRef, str] | None = None,
) -> list[Decision]:
    """One outcome per CompositePodGroup of the tree (their status condition and the
    report), and for a broken tree one per CompositePodGroup on the broken path. `met`: the
    levels its bound members satisfy, scheduled whatever this cycle says."""
    if gang.broken is not None:
        return [
            GroupOutcome(ref, ERROR, gang.broken.message)
            for ref in gang.broken.path
            if ref.dialect is Dialect.COMPOSITE
        ]
    if gang.tree is None:
        return []
    levels = placed.levels if placed is not None else (levels or {})
    out: list[Decision] = []
    for node in gang.tree.walk():
        if node.composite is None:
            continue
        level = levels.get(node.ref)
        if met and node.ref in met and (placed is None or (level is not None and not level[0])):
            # (A level this cycle placed more of speaks of those too: its own words.)
            out.append(GroupOutcome(node.ref, SCHEDULED, met[node.ref]))
            continue
        if placed is not None and level is not None and not level[0]:
            out.append(GroupOutcome(node.ref, UNSCHEDULABLE, level[1]))
            continue
        own = message
        if placed is None and level is not None and level[1] not in message:
            own = f"{level[1]}; {message}"
        elif placed is not None and level is not None:
            own = level[1]
        out.append(GroupOutcome(node.ref, result, own))
    return out


def _unschedulable(pod: Pod, reason: str, message: str) -> SetCondition:
    return _condition(pod, reason, message)


def _condition(pod: Pod, reason: str, message: str) -> SetCondition:
    return SetCondition(pod.key, pod.uid, "PodScheduled", "False", reason, message)
