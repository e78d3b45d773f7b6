"""One scheduling step: pop the most important gang, run its cycle, return the decisions.

`gangsched run` and `gangsched simulate` both drive this class; they differ only in how the
decisions are carried out (API server vs in-memory cluster) and in where time comes from.
Placements are assumed in the cluster state as soon as they are decided, like kube-scheduler's
cache, so the next cycle never double-books a node while a bind is in flight.

As kube-scheduler's ScheduleOne hands what it pops to the cycle for its kind, all over one
framework, the step places each unit with the placer for its kind (core/placers.py): a
PodGroup or GangGroup with the topology placer, a CompositePodGroup tree with the tree
placer. What every PodGroup of a unit goes through before and after its cycle is in
schedule_group.py; what only a tree has, its CompositePodGroup levels, in schedule_tree.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from gangsched.core.autoscaling_room import NODE_POOL_LIMIT_REACHED, pool_limit_shortfall
from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleConfig, CycleResult, Gang, GangMember
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
    Nominate,
    SetCondition,
)
from gangsched.core.framework import Framework
from gangsched.core.gang_waiting import waiting_note
from gangsched.core.model import Dialect, GroupRef, Pod
from gangsched.core.placers import UnitPlacer
from gangsched.core.plugins import ScoringConfig, build_framework
from gangsched.core.queue import SchedulingQueue
from gangsched.core.queue_order import queue_position
from gangsched.core.schedule_group import (
    failed_outcomes,
    group_member,
    scheduled_outcomes,
    waiting_outcomes,
)
from gangsched.core.schedule_tree import broken_tree, composite_outcomes, levels_met, unit_tree
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
    #: Not started because the gang waits for new capacity first (preemption/capacity_wait.py):
    #: when that wait ends, on the preemptor's clock, and seconds until then, after which
    #: the gang is tried again even if nothing in the cluster changed.
    waiting_until: float | None = None
    retry_after: float | None = None


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

    def enqueue_unit(self, key: GroupRef, now: float = 0.0) -> None:
        """Queue (or re-order, its priority or age changed) the unit `key` if it has pending
        pods: what a PodGroup's change needs, without walking every pending pod."""
        gang = self.gang(key)
        if gang.pending:
            self._enqueue(gang, now)

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
        """The unit queued under `key`: a PodGroup, a GangGroup or a CompositePodGroup tree,
        each PodGroup with its members by state (schedule_group.py), a tree with its levels
        (schedule_tree.py)."""
        cluster = self.cluster
        broken = broken_tree(cluster, key)
        if broken is not None:
            return Gang(key=key, parts=[group_member(cluster, key)], broken=broken)
        parts = [group_member(cluster, ref) for ref in cluster.unit_of(key)]
        return Gang(key=key, parts=parts, tree=unit_tree(cluster, key))

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
        if preemption is not None and preemption.retry_after is not None:
            self.queue.retry_by(gang.key, now + preemption.retry_after)
        message = result.message
        if preemption is not None and preemption.message:
            message = f"{message}; {preemption.message}"
        # Karpenter provisions for `Unschedulable` pods only: a gang no node it may still add
        # can make fit gets another reason, so that no node is launched (and kept) for it.
        reason = "Unschedulable"
        shortfall = pool_limit_shortfall(
            gang,
            snapshot=snap,
            pools=list(self.cluster.node_pools.values()),
            nodes=self.cluster.nodes.values(),
        )
        if shortfall is not None:
            reason = NODE_POOL_LIMIT_REACHED
            message = f"{shortfall.message}; {message}"
        report = self._not_scheduled(
            gang,
            result=UNSCHEDULABLE,
            reason=reason,
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
        met = levels_met(gang)
        decisions += scheduled_outcomes(gang, result, met)
        decisions += composite_outcomes(gang, result, SCHEDULED, result.message, met=met)
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
        met = levels_met(gang)
        decisions += failed_outcomes(gang, result, message, levels, met)
        decisions += composite_outcomes(gang, None, result, message, levels=levels, met=met)
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
        met = levels_met(gang)
        decisions += waiting_outcomes(gang, message, met)
        decisions += composite_outcomes(gang, None, WAITING, message, met=met)
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


def _regarding(gang: Gang) -> tuple[str, str]:
    if gang.key.dialect is Dialect.LONE_POD:
        return "Pod", gang.key.key
    if gang.key.dialect is Dialect.COMPOSITE:
        return "CompositePodGroup", gang.key.key
    return "PodGroup", gang.key.key


def _unschedulable(pod: Pod, reason: str, message: str) -> SetCondition:
    return _condition(pod, reason, message)


def _condition(pod: Pod, reason: str, message: str) -> SetCondition:
    return SetCondition(pod.key, pod.uid, "PodScheduled", "False", reason, message)
