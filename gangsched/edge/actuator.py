"""Carries out the core's decisions against the API server.

Binds go through `pods/binding` with the pod's UID (a recreated pod of the same name is never
bound by mistake), a bounded number at a time; a 409 or 404 means the pod changed under us,
so the assumption is dropped and the gang requeued. A gang with pre-bind write-backs (volumes,
claims) binds only once all of them are confirmed (edge/prebind.py). Conditions, nominations,
victims and events are written by edge/pod_writes.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog

from gangsched.core.decisions import (
    SCHEDULED,
    WAITING,
    AllocateClaim,
    Bind,
    BindVolume,
    Decision,
    Event,
    Evict,
    GroupOutcome,
    Nominate,
    SelectNode,
    SetCondition,
)
from gangsched.core.group_status import PRE_BINDING
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.scheduler import CycleReport, Scheduler
from gangsched.edge.cache import ClusterCache
from gangsched.edge.claim_writebacks import claim_write_backs
from gangsched.edge.events import EventRecorder, ObjectRef
from gangsched.edge.kube import Kube, KubeError
from gangsched.edge.metrics import Metrics
from gangsched.edge.pod_writes import POD_GROUP_API_VERSIONS, PodWriter, pod_path, split_key
from gangsched.edge.prebind import PreBindStage, WriteBack
from gangsched.edge.volume_writebacks import volume_write_backs
from gangsched.edge.write_gate import WriteGate

log = structlog.get_logger("gangsched.actuator")

_POD_GROUP_DIALECTS = (Dialect.SIGS, Dialect.X_K8S, Dialect.UPSTREAM, Dialect.VOLCANO)


@dataclass
class Actuator:
    kube: Kube
    scheduler: Scheduler
    cache: ClusterCache
    events: EventRecorder
    metrics: Metrics
    bind_concurrency: int = 16
    #: Writes happen only while this says so (leader election).
    may_write: Callable[[], bool] = lambda: True
    api_versions: dict[Dialect, str] = field(default_factory=lambda: dict(POD_GROUP_API_VERSIONS))
    #: Latest outcome per PodGroup, read by the PodGroup status writer.
    outcomes: dict[GroupRef, GroupOutcome] = field(default_factory=dict)
    outcome_changed: asyncio.Event = field(default_factory=asyncio.Event)
    #: Groups whose outcome changed since the status writer last looked.
    changed_groups: set[GroupRef] = field(default_factory=set)
    #: A gang still collecting its members gets its pods' "waiting" condition only after this
    #: long: gangs created all at once bind before then, sparing one write per pod.
    waiting_condition_delay: float = 5.0
    #: How long a gang's pre-bind write-backs (volumes) may take to be confirmed.
    volume_bind_timeout: float = 600.0
    #: Gangs, and their pods, whose pre-bind write-backs are in flight (they bind after).
    pre_binding: set[GroupRef] = field(default_factory=set)
    pre_binding_pods: set[str] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _bind_slots: asyncio.Semaphore | None = None
    #: Binds decided and not yet answered (queued for a slot or in flight).
    binds_pending: int = 0
    #: Set while binds_pending is below bind_concurrency (see `bind_backlog_full`).
    bind_room: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set once a bind has been answered (or failed): the watches wait for it at start.
    bind_answered: asyncio.Event = field(default_factory=asyncio.Event)
    _gates: list[WriteGate] = field(default_factory=list)
    pods: PodWriter = field(init=False)

    def __post_init__(self) -> None:
        self.bind_room.set()
        self.events.gate = self.write_gate()
        self.pods = PodWriter(
            kube=self.kube,
            scheduler=self.scheduler,
            cache=self.cache,
            events=self.events,
            metrics=self.metrics,
            may_write=self.may_write,
            api_versions=self.api_versions,
            concurrency=self.bind_concurrency,
        )

    def apply(self, report: CycleReport) -> list[asyncio.Future[None]]:
        """Start carrying out a report's decisions; returns at once (work runs as tasks),
        with one future per victim of the report that resolves once its DELETE is sent
        (see Operator._schedule_loop; the Preempted event is posted after, not waited for)."""
        victims: dict[str, list[Decision]] = {}
        waiting = report.result == WAITING
        volumes = [d for d in report.decisions if isinstance(d, BindVolume | SelectNode)]
        claims = [d for d in report.decisions if isinstance(d, AllocateClaim)]
        held: list[Bind] = []
        for decision in report.decisions:
            if isinstance(decision, Bind):
                self.pods.forget(decision.pod)
                self.cache.assumed[decision.pod] = decision.node
                if volumes or claims:
                    held.append(decision)  # bound once volumes and claims are confirmed
                else:
                    self._bind_decided()
                    self._spawn(self._bind(decision, report.gang))
            elif isinstance(decision, Evict) or (
                isinstance(decision, SetCondition) and decision.type == "DisruptionTarget"
            ):
                victims.setdefault(decision.pod, []).append(decision)
            elif isinstance(decision, Event) and decision.reason == "Preempted":
                victims.setdefault(decision.regarding, []).append(decision)
            elif isinstance(decision, SetCondition):
                self.pods.latest_condition[decision.pod] = decision
                delay = self.waiting_condition_delay if waiting else 0.0
                self._spawn(self.pods.pod_condition(decision, delay))
            elif isinstance(decision, Nominate):
                # Reserve at once, as kube-scheduler's nominator does: the next cycle (maybe
                # another preemptor) must see this capacity as taken, not wait for the watch.
                self.cache.nominate(decision.pod, decision.uid, decision.node)
                self._spawn(self.pods.nominate(decision))
            elif isinstance(decision, Event) and waiting:
                self._spawn(self.pods.waiting_event(decision, report, self.waiting_condition_delay))
            elif isinstance(decision, Event):
                self._spawn(self.pods.event(decision))
            elif isinstance(decision, GroupOutcome):
                self.outcomes[decision.group] = decision
                self.changed_groups.add(decision.group)
                self.outcome_changed.set()
        evictions: list[asyncio.Future[None]] = []
        for steps in victims.values():
            for step in steps:
                if isinstance(step, Evict):
                    self.cache.evict(step.pod, step.uid)
            evicted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._spawn(self.pods.preempt(steps, evicted=evicted))
            evictions.append(evicted)
        if held:
            writes = volume_write_backs(volumes, self.scheduler.cluster)
            writes += claim_write_backs(claims, self.scheduler.cluster)
            waiting_for = (
                "volume claim(s) to be bound"
                if not claims
                else "resource claim(s) to be allocated"
                if not volumes
                else "volume and resource claim(s) to be written"
            )
            self.pre_binding_pods.update(bind.pod for bind in held)
            parts = [
                d.group
                for d in report.decisions
                if isinstance(d, GroupOutcome) and d.result == SCHEDULED
            ]
            for ref in parts:
                self.outcomes[ref] = GroupOutcome(
                    ref,
                    PRE_BINDING,
                    f"{len(held)} pod(s) placed; waiting for {len(writes)} {waiting_for} "
                    "before binding them",
                )
            self._spawn(self._pre_bind(writes, held, report.gang, parts))
        return evictions

    def apply_nomination(self, nominate: Nominate) -> None:
        """Set or clear a nomination that no cycle report carries (reserved at once)."""
        self.cache.nominate(nominate.pod, nominate.uid, nominate.node)
        self._spawn(self.pods.nominate(nominate))

    def apply_event(self, event: Event, regarding: ObjectRef | None = None) -> None:
        """Post an event that no cycle produced (e.g. a schedule timeout, an object we cannot
        read); `regarding` overrides the reference built from the cache."""
        self._spawn(self.pods.event(event, regarding))

    def write_gate(self) -> WriteGate:
        """A gate for one kind of write that follows binds (events, gang budgets, PodGroup
        statuses): after the binds unanswered, or once it has waited the gate's max_wait. One
        per kind, so that one kind's backlog (an event per gang) does not hold another (the
        budgets) behind it."""
        gate = WriteGate(binding=lambda: self.binds_pending > 0)
        self._gates.append(gate)
        return gate

    def bind_backlog_full(self) -> bool:
        """Whether binds have piled up beyond twice what goes out at once. The scheduling
        loop then waits for `bind_room` before its next cycle: cycles run on the event loop
        that also carries the binds' answers, and deciding gang after gang far ahead of the
        binds starved them (precreated (a): binds went out at 40-80 a second while the
        cycles ran, at 140-320 once they were done) and left every decided gang waiting for
        the backlog anyway."""
        return self.binds_pending >= 2 * self.bind_concurrency

    def _bind_decided(self) -> None:
        self.binds_pending += 1
        if self.binds_pending >= self.bind_concurrency:
            self.bind_room.clear()

    def _bind_done(self) -> None:
        self.binds_pending -= 1
        self.bind_answered.set()
        if self.binds_pending < self.bind_concurrency:
            self.bind_room.set()
        if self.binds_pending == 0:
            for gate in self._gates:
                gate.wake()  # every bind answered: more deferred writes at once

    @property
    def in_flight(self) -> int:
        """Writes under way: binds, evictions, conditions, nominations, events."""
        return len(self._tasks)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(self._guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        """A write that fails without an HTTP answer (API server restarting, connection
        reset) is logged and counted, never left as an unretrieved task exception."""
        try:
            await work
        except Exception as exc:
            operation = str(getattr(work, "__name__", "write")).lstrip("_")
            self.metrics.api_errors.labels(operation, "connection").inc()
            log.warning("API write failed", operation=operation, error=repr(exc))

    # --------------------------------------------------------------------------------- binds
    async def _bind(self, bind: Bind, gang: GroupRef) -> None:
        """Carry out one bind counted by `_bind_decided` (its count is released here)."""
        try:
            await self._bind_one(bind, gang)
        finally:
            self._bind_done()

    async def _bind_one(self, bind: Bind, gang: GroupRef) -> None:
        if self._bind_slots is None:
            self._bind_slots = asyncio.Semaphore(self.bind_concurrency)
        namespace, name = split_key(bind.pod)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": bind.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": bind.node},
        }
        async with self._bind_slots:
            if not self.may_write():
                self._bind_failed(bind, gang, "not leader")
                return
            stale = self._stale(bind)
            if stale:
                # Changed between decision and bind: binding now would be a stale decision.
                self.metrics.binding_errors.labels("stale").inc()
                self._bind_failed(bind, gang, stale, announce=True)
                return
            started = time.perf_counter()
            try:
                await self.kube.post(pod_path(bind.pod, "binding"), body)
            except KubeError as exc:
                cause = "conflict" if exc.conflict else "not_found" if exc.not_found else "other"
                self.metrics.binding_errors.labels(cause).inc()
                if exc.status >= 500 or exc.status == 429:
                    await self._settle(bind, gang, str(exc))  # may have been applied
                    return
                if cause == "other":
                    self.metrics.api_errors.labels("bind", str(exc.status)).inc()
                self._bind_failed(bind, gang, str(exc), announce=cause == "other")
                return
            except Exception as exc:  # connection lost: the bind may or may not have happened
                self.metrics.binding_errors.labels("other").inc()
                await self._settle(bind, gang, repr(exc))
                return
            self.metrics.binding_duration.observe(time.perf_counter() - started)
            self.metrics.pods_bound.inc()
            log.info("bound", pod=bind.pod, node=bind.node, group=gang.key)

    async def _pre_bind(
        self, writes: list[WriteBack], binds: list[Bind], gang: GroupRef, parts: list[GroupRef]
    ) -> None:
        """Write every member's pre-bind decisions, wait until all are confirmed, then bind
        the gang; on failure or timeout undo them and bind nothing (edge/prebind.py)."""
        self.pre_binding.add(gang)
        stage = PreBindStage(self.kube, timeout=self.volume_bind_timeout, may_write=self.may_write)
        try:
            outcome = await stage.run(writes)
        finally:
            self.pre_binding.discard(gang)
            self.pre_binding_pods.difference_update(bind.pod for bind in binds)
            self.changed_groups.update(parts)
            self.outcome_changed.set()
        if outcome.ok:
            log.info(
                "pre-bind confirmed", group=gang.key, writes=len(writes), seconds=outcome.seconds
            )
            for ref in parts:
                if (
                    current := self.outcomes.get(ref)
                ) is not None and current.result == PRE_BINDING:
                    self.outcomes[ref] = GroupOutcome(ref, SCHEDULED, "pod(s) scheduled")
            for _ in binds:
                self._bind_decided()
            await asyncio.gather(*(self._bind(bind, gang) for bind in binds))
            return
        self.metrics.binding_errors.labels("prebind").inc()
        message = (
            f'running PreBind plugin "{outcome.plugin}": {outcome.reason}'
            if outcome.plugin
            else outcome.reason
        )
        log.warning("pre-bind failed; retrying the group", group=gang.key, reason=outcome.reason)
        for write in writes:
            write.forget()
        for ref in parts:  # before the retry (which may start at once) sets its own
            self.outcomes[ref] = GroupOutcome(ref, "error", message)
        self.changed_groups.update(parts)
        self.outcome_changed.set()
        for bind in binds:
            self._bind_failed(bind, gang, outcome.reason)
        if outcome.reason == "not leader" or not self.may_write():
            return
        for bind in binds:
            condition = SetCondition(
                bind.pod, bind.uid, "PodScheduled", "False", "SchedulerError", message
            )
            await self.pods.write_pod_scheduled(condition)
        kind = "Pod" if gang.dialect is Dialect.LONE_POD else "PodGroup"
        await self.pods.event(
            Event(kind, gang.key, "Warning", "FailedScheduling", "Binding", f"{message}; retrying")
        )

    def _stale(self, bind: Bind) -> str:
        """Why carrying out this bind now would be wrong, or "" if it still holds."""
        cluster = self.scheduler.cluster
        pod = cluster.pods.get(bind.pod)
        if pod is None or pod.uid != bind.uid:
            return f"pod {bind.pod} was deleted"
        if pod.terminating:
            return f"pod {bind.pod} is being deleted"
        if bind.node not in cluster.nodes:
            return f"node {bind.node} was deleted"
        group_ref = pod.group
        if (
            group_ref is not None
            and group_ref.dialect in _POD_GROUP_DIALECTS
            and group_ref not in cluster.groups
        ):
            return f"{group_ref.dialect.value} PodGroup {group_ref.key} was deleted"
        for ref in cluster.unit_of(pod.group) if pod.group is not None else ():
            group = cluster.pod_group(ref)
            if group is None or group.min_member <= 1:
                continue
            placed = sum(
                1
                for member in cluster.group_members(ref)
                if member.node_name is not None and not member.terminating
            )
            if placed < group.min_member:
                return (
                    f"PodGroup {ref.key} now has {placed} placed member(s), fewer than "
                    f"minMember {group.min_member}"
                )
        return ""

    async def _settle(self, bind: Bind, gang: GroupRef, error: str) -> None:
        """The bind's outcome is unknown (connection lost, server error): keep its capacity
        reserved and read the pod back until we know, so a bind that did happen is neither
        repeated elsewhere nor its node double-booked meanwhile."""
        log.warning(
            "bind outcome unknown; checking",
            pod=bind.pod,
            node=bind.node,
            group=gang.key,
            error=error,
        )
        delay = 0.5
        while True:
            try:
                pod = await self.kube.get(pod_path(bind.pod))
            except KubeError as exc:
                if exc.not_found:
                    self._bind_failed(bind, gang, "pod deleted")
                    return
            except Exception:  # still unreachable
                pass
            else:
                meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
                if meta.get("uid") != bind.uid:
                    self._bind_failed(bind, gang, "pod replaced")
                elif spec.get("nodeName") == bind.node:
                    self.metrics.pods_bound.inc()
                    log.info("bound", pod=bind.pod, node=bind.node, group=gang.key, checked=True)
                else:
                    # The API server is back and the bind did not happen: retry the gang now,
                    # before gangs behind it in the queue take the room its other members
                    # (maybe already bound) were placed with.
                    self._bind_failed(bind, gang, error, retry_now=True)
                return
            if not self.may_write():
                return  # leadership lost (we exit): the next leader reads the pod itself
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _bind_failed(
        self,
        bind: Bind,
        gang: GroupRef,
        error: str,
        *,
        announce: bool = False,
        retry_now: bool = False,
    ) -> None:
        """Forget the assumed placement and retry the gang after its backoff."""
        log.warning("bind failed", pod=bind.pod, node=bind.node, group=gang.key, error=error)
        self.cache.assumed.pop(bind.pod, None)
        pod = self.scheduler.cluster.pods.get(bind.pod)
        if pod is not None and pod.node_name == bind.node and pod.uid == bind.uid:
            self.scheduler.cluster.forget(pod)
            self.scheduler.enqueue_pod(pod, time.monotonic())
            # The capacity it held is free again: gangs waiting for room get another look.
            self.scheduler.queue.cluster_changed(time.monotonic())
            self.cache.wake()
        if retry_now:
            self.scheduler.queue.activate(gang)
        else:
            self.scheduler.queue.backoff(gang, time.monotonic())
        if announce and self.may_write():
            kind = "Pod" if gang.dialect is Dialect.LONE_POD else "PodGroup"
            self.apply_event(
                Event(
                    kind,
                    gang.key,
                    "Warning",
                    "FailedScheduling",
                    "Binding",
                    f"binding {bind.pod} to {bind.node} not done: {error}; retrying the group",
                )
            )
