"""The actuator's writes about pods other than the bind: conditions, nominations, the
preemption of victims, and events.

Conditions are strategic-merge patches of `pods/status` (merging by condition type keeps the
kubelet's conditions), written only when they changed and one at a time per pod (two PATCHes
in flight on two connections may land in either order, and a stale message landing last stays
on the pod until the gang's next cycle). A victim first gets its DisruptionTarget condition,
then a graceful delete with a UID precondition, then the Preempted event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from gangsched.core.api.capacity_wait import UNSCHEDULABLE_REASON
from gangsched.core.composite.model import composite_ref
from gangsched.core.decisions import Decision, Event, Evict, Nominate, SetCondition
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.scheduler import CycleReport, Scheduler
from gangsched.edge.cache import ClusterCache
from gangsched.edge.events import EventRecorder, ObjectRef, event_time
from gangsched.edge.kube import STRATEGIC_MERGE_PATCH, Kube, KubeError
from gangsched.edge.metrics import Metrics

log = structlog.get_logger("gangsched.actuator")

_CLUSTER_KINDS = {"Node": "v1", "PriorityClass": "scheduling.k8s.io/v1", "Namespace": "v1"}

#: Until discovery says which version the cluster serves (it replaces these): scheduling.k8s.io
#: serves PodGroups at v1beta1 from Kubernetes 1.37 on (v1alpha2 is gone).
POD_GROUP_API_VERSIONS = {
    Dialect.SIGS: "scheduling.sigs.k8s.io/v1alpha1",
    Dialect.X_K8S: "scheduling.x-k8s.io/v1alpha1",
    Dialect.UPSTREAM: "scheduling.k8s.io/v1beta1",
    Dialect.VOLCANO: "scheduling.volcano.sh/v1beta1",
}


def split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def pod_path(key: str, sub: str = "") -> str:
    namespace, name = split_key(key)
    return f"/api/v1/namespaces/{namespace}/pods/{name}" + (f"/{sub}" if sub else "")


@dataclass
class PodWriter:
    kube: Kube
    scheduler: Scheduler
    cache: ClusterCache
    events: EventRecorder
    metrics: Metrics
    #: Writes happen only while this says so (leader election).
    may_write: Callable[[], bool]
    #: PodGroup apiVersion per dialect, for event references (shared with the actuator, which
    #: discovery updates in place).
    api_versions: dict[Dialect, str]
    #: Victims in flight at once (the actuator's bindConcurrency).
    concurrency: int = 16
    #: Last PodScheduled condition written per pod: unchanged conditions are not rewritten.
    written: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    #: When each of those was written (`clock`).
    written_at: dict[str, float] = field(default_factory=dict)
    #: A condition whose status and reason stay the same is rewritten for a new message at
    #: most this often (seconds); see `pod_condition`.
    message_refresh: float = 5.0
    #: PodScheduled writes in flight at once. They say why a pod waits: none may hold a
    #: connection a bind or an eviction needs, nor crowd them at the API server.
    condition_concurrency: int = 4
    clock: Callable[[], float] = time.monotonic
    #: The newest condition decided per pod; an older one still waiting is not written.
    latest_condition: dict[str, SetCondition] = field(default_factory=dict)
    #: One condition write per pod at a time, and the number of writers using each lock.
    _condition_locks: dict[str, tuple[asyncio.Lock, list[int]]] = field(default_factory=dict)
    _eviction_slots: asyncio.Semaphore | None = None
    _condition_slots: asyncio.Semaphore | None = None

    # ---------------------------------------------------------------------------- conditions
    async def pod_condition(self, cond: SetCondition, delay: float = 0.0) -> None:
        """Write a pod's PodScheduled condition if it changed. A new status or reason goes out
        at once; a new message alone waits until `message_refresh` has passed since the last
        write, and only the newest decided by then is written. An unschedulable gang's
        message counts free room per domain, so it differs at nearly every retry: in the
        topology trace every retry rewrote all its members (1,484 writes decided for 1,394
        binds), the burst landing among the preemptors' binds when victims left."""
        if delay:
            await asyncio.sleep(delay)
            pod = self.scheduler.cluster.pods.get(cond.pod)
            if pod is None or not self.scheduler.cluster.is_pending(pod):
                return
        if self.latest_condition.get(cond.pod) is not cond:
            return  # superseded by a newer decision (or the pod was bound)
        prior = self.written.get(cond.pod)
        if prior is not None and prior[:2] == (cond.status, cond.reason):
            hold = self.written_at.get(cond.pod, 0.0) + self.message_refresh - self.clock()
            if hold > 0 and prior[2] != cond.message:
                await asyncio.sleep(hold)
                if self.latest_condition.get(cond.pod) is not cond:
                    return
        lock, users = self._condition_locks.setdefault(cond.pod, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:  # an older write of this pod's condition lands first
                if self.latest_condition.get(cond.pod) is not cond:
                    return  # superseded while the older write was in flight
                self.latest_condition.pop(cond.pod, None)
                signature = (cond.status, cond.reason, cond.message)
                if self.written.get(cond.pod) == signature or not self.may_write():
                    return
                if self._condition_slots is None:
                    self._condition_slots = asyncio.Semaphore(self.condition_concurrency)
                async with self._condition_slots:
                    if cond.pod in self.latest_condition or not self._pending(cond.pod):
                        return  # a newer decision came, or the pod was bound or deleted
                    await self.write_pod_scheduled(cond)
        finally:
            users[0] -= 1
            if not users[0]:
                self._condition_locks.pop(cond.pod, None)

    def _pending(self, key: str) -> bool:
        """Still ours and unbound (gated or not): its condition still says something."""
        cluster = self.scheduler.cluster
        pod = cluster.pods.get(key)
        return pod is not None and (cluster.is_pending(pod) or cluster.is_gated(pod))

    async def write_pod_scheduled(self, cond: SetCondition) -> bool:
        """PATCH a PodScheduled condition and remember it. The status unchanged, the
        transition time stays (strategic merge keeps fields the patch leaves out), as
        kube-scheduler's UpdatePodCondition does."""
        transition = self._transition(cond)
        if not await self.patch_condition(cond, transition=transition):
            return False
        self._remember(cond.pod, (cond.status, cond.reason, cond.message))
        return True

    def _transition(self, cond: SetCondition) -> bool:
        """Whether the write sets a new lastTransitionTime: a new status, as upstream; and,
        unlike upstream, a reason that becomes or stops being `Unschedulable`, so that the
        time says since when the pod is Unschedulable (what an autoscaler reacts to, where a
        wait for new capacity starts: core/preemption/capacity_wait.py), not since when it
        was held waiting for its members or behind a gate. With nothing remembered (a
        restart, a new leader), a pod already Unschedulable keeps its time."""
        prior = self.written.get(cond.pod)
        if prior is not None:
            return prior[0] != cond.status or (
                prior[1] != cond.reason and UNSCHEDULABLE_REASON in (prior[1], cond.reason)
            )
        pod = self.scheduler.cluster.pods.get(cond.pod)
        already = pod is not None and pod.unschedulable_since is not None
        return not (already and cond.status == "False" and cond.reason == UNSCHEDULABLE_REASON)

    def _remember(self, pod: str, signature: tuple[str, str, str]) -> None:
        self.written[pod] = signature
        self.written_at[pod] = self.clock()
        if len(self.written) > 2 * len(self.scheduler.cluster.pods) + 1024:
            # Pods deleted since: their entries go, a sweep every so often (amortised).
            pods = self.scheduler.cluster.pods
            for key in [key for key in self.written if key not in pods]:
                self.forget(key)

    def forget(self, pod: str) -> None:
        """The pod was bound or is gone: what was written on it no longer matters."""
        self.written.pop(pod, None)
        self.written_at.pop(pod, None)
        self.latest_condition.pop(pod, None)

    async def patch_condition(self, cond: SetCondition, *, transition: bool = True) -> bool:
        condition = {
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason,
            "message": cond.message,
        }
        if transition:
            condition["lastTransitionTime"] = event_time()[:19] + "Z"
        body = {"metadata": {"uid": cond.uid}, "status": {"conditions": [condition]}}
        try:
            await self.kube.patch(
                pod_path(cond.pod, "status"), body, content_type=STRATEGIC_MERGE_PATCH
            )
        except KubeError as exc:
            if not exc.not_found:
                self.metrics.api_errors.labels("pod_status", str(exc.status)).inc()
                log.warning("condition not written", pod=cond.pod, type=cond.type, error=str(exc))
            return False
        return True

    async def nominate(self, nominate: Nominate) -> None:
        if not self.may_write():
            return
        pod = self.scheduler.cluster.pods.get(nominate.pod)
        if nominate.node is None and (pod is None or pod.node_name is not None):
            # Bound (or binding): the API server refuses any nominatedNodeName on a bound pod
            # and the reservation is already gone from the cache.
            self.cache.nominations.pop(nominate.pod, None)
            return
        body = {"metadata": {"uid": nominate.uid}, "status": {"nominatedNodeName": nominate.node}}
        try:
            await self.kube.patch(
                pod_path(nominate.pod, "status"), body, content_type=STRATEGIC_MERGE_PATCH
            )
        except KubeError as exc:
            self.cache.nominations.pop(nominate.pod, None)
            if not exc.not_found:
                self.metrics.api_errors.labels("nominate", str(exc.status)).inc()
                log.warning("nomination not written", pod=nominate.pod, error=str(exc))

    # ---------------------------------------------------------------------------- preemption
    async def preempt(
        self, steps: list[Decision], *, evicted: asyncio.Future[None] | None = None
    ) -> None:
        """Condition, eviction, event. `evicted` resolves once the DELETE is sent (or the
        victim is left running): what the scheduling loop waits for, not the answer."""
        evict = next((step for step in steps if isinstance(step, Evict)), None)
        if self._eviction_slots is None:
            # As many victims in flight as binds: a gang preempting 1,000 pods would otherwise
            # queue 3,000 requests at once behind the connection pool (memory, not speed).
            self._eviction_slots = asyncio.Semaphore(self.concurrency)
        done = False
        try:
            async with self._eviction_slots:
                done = await self._steps(steps, evicted)
        finally:
            if evicted is not None and not evicted.done():
                evicted.set_result(None)
            if not done and evict is not None:
                # Left running (or unknown, the connection lost): chosen again if still
                # needed; a second eviction of a pod already going is a harmless 404/409.
                self.cache.eviction_failed(evict.pod, evict.uid)

    async def _steps(self, steps: list[Decision], evicted: asyncio.Future[None] | None) -> bool:
        """Condition, eviction, event, in order; False if the victim was left running."""
        if not self.may_write():
            return False
        for step in steps:
            try:
                if isinstance(step, SetCondition):
                    if not await self.patch_condition(step):
                        return False  # no eviction without the condition saying why
                elif isinstance(step, Evict):
                    # The loop may go on once this DELETE is on its way: resolved here, the
                    # request is written before the loop's next cycle starts (see
                    # Operator._schedule_loop), and its answer need not hold scheduling.
                    if evicted is not None and not evicted.done():
                        evicted.set_result(None)
                    await self.kube.delete(
                        pod_path(step.pod),
                        {
                            "apiVersion": "v1",
                            "kind": "DeleteOptions",
                            "preconditions": {"uid": step.uid},
                        },
                    )
                    log.info("preempted", pod=step.pod, preemptor=step.preemptor.key)
                elif isinstance(step, Event):
                    await self.event(step)
            except KubeError as exc:
                if exc.not_found or exc.conflict:
                    return True  # already gone or replaced: nothing left to preempt
                self.metrics.api_errors.labels("preempt", str(exc.status)).inc()
                log.warning("preemption step failed", step=type(step).__name__, error=str(exc))
                return isinstance(step, Event)
        return True

    # -------------------------------------------------------------------------------- events
    async def waiting_event(self, event: Event, report: CycleReport, delay: float) -> None:
        """Why a gang waits, told only if it still waits after `delay` (the actuator's
        waiting_condition_delay: gangs whose members arrive together are complete by then):
        the same delay and the same test as the pods' NotReadyForScheduling condition."""
        await asyncio.sleep(delay)
        cluster = self.scheduler.cluster
        pods = [event.regarding] if event.regarding_kind == "Pod" else report.pods
        if not self.scheduler.queue.is_waiting(report.gang):
            return
        still = [cluster.pods.get(key) for key in pods]
        if any(pod is not None and cluster.is_pending(pod) for pod in still):
            await self.event(event)

    async def event(self, event: Event, regarding: ObjectRef | None = None) -> None:
        if not self.may_write():
            return
        regarding = regarding or self.ref(event.regarding_kind, event.regarding)
        related = self.ref(event.related_kind, event.related) if event.related else None
        failed = await self.events.post(event, regarding, related)
        if failed is not None:
            self.metrics.api_errors.labels("event", failed).inc()

    def ref(self, kind: str, key: str) -> ObjectRef:
        if "/" not in key:  # cluster-scoped: Node, PriorityClass
            return ObjectRef(kind, "", key, _CLUSTER_KINDS.get(kind, "v1"))
        namespace, name = split_key(key)
        if kind == "Pod":
            pod = self.scheduler.cluster.pods.get(key)
            return ObjectRef("Pod", namespace, name, "v1", pod.uid if pod else "")
        if kind == "CompositePodGroup":
            composite = self.scheduler.cluster.composites.get(composite_ref(namespace, name))
            api_version = self.api_versions.get(Dialect.COMPOSITE, "scheduling.k8s.io/v1alpha3")
            return ObjectRef(kind, namespace, name, api_version, composite.uid if composite else "")
        # Looked up by key in each dialect: a scan of every group was quadratic over a run
        # of gangs, one event each (2% of a precreated run's samples, py-spy, issue 30).
        for dialect in Dialect:
            group = self.scheduler.cluster.groups.get(GroupRef(dialect, namespace, name))
            if group is not None:
                api_version = self.api_versions.get(dialect, "v1")
                return ObjectRef("PodGroup", namespace, name, api_version, group.uid)
        if kind == "PodDisruptionBudget":
            return ObjectRef(kind, namespace, name, "policy/v1")
        return ObjectRef(kind, namespace, name, POD_GROUP_API_VERSIONS[Dialect.SIGS])
