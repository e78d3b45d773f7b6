"""`gangsched run`: informers feed the cache, the scheduling loop runs the core, the actuator
writes back.

The CPU-bound cycle runs on the event loop, one gang at a time, yielding between gangs. We
chose this over a worker thread because the cluster state is mutated by informer callbacks on
the same loop: a thread would need a lock around every cache update and every cycle, and the
cycle is short (about 1.5 ms for a 3-pod gang and 20 ms for a 64-pod gang at 5,000 nodes,
see bench/) and bounded by the search budget, so watches and lease renewals never wait long.
`gangsched_cycle_seconds` (the attempt-duration histogram) shows the worst case in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from gangsched.config import Config
from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang
from gangsched.core.decisions import Event, Nominate
from gangsched.core.framework import Framework
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.queue import State
from gangsched.core.scheduler import (
    ERROR,
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING,
    CycleReport,
    PreemptionOutcome,
    Preemptor,
    Scheduler,
)
from gangsched.edge.actuator import Actuator
from gangsched.edge.cache import ClusterCache
from gangsched.edge.dra_cache import DRA_INFORMERS, RESOURCE_API, DraCache
from gangsched.edge.events import EventRecorder, ObjectRef
from gangsched.edge.informer import Informer
from gangsched.edge.kube import Kube
from gangsched.edge.metrics import Metrics
from gangsched.edge.podgroup_status import PodGroupStatusWriter
from gangsched.edge.volume_cache import STORAGE_INFORMERS, VolumeCache

log = structlog.get_logger("gangsched.operator")

#: PodGroup API groups we read, in the order we prefer their versions.
POD_GROUP_GROUPS = {
    "scheduling.sigs.k8s.io": Dialect.SIGS,
    "scheduling.x-k8s.io": Dialect.X_K8S,
    "scheduling.k8s.io": Dialect.UPSTREAM,
}

#: The most informers `start` runs at once, each holding one HTTP/1.1 connection for its watch:
#: pods, nodes, namespaces, priority classes, budgets, the storage and DRA kinds and one per
#: PodGroup dialect. The connection pool must be larger than this, or the watches take every
#: connection and a lease renewal waits behind them until leadership is lost.
MAX_WATCHES = 5 + len(STORAGE_INFORMERS) + len(DRA_INFORMERS) + len(POD_GROUP_GROUPS)


@dataclass
class TimedPreemptor:
    """Observes every preemption evaluation (scheduler_preemption_evaluation_duration_seconds)."""

    inner: Preemptor
    metrics: Metrics

    def preempt(
        self, gang: Gang, failed: CycleResult, cluster: ClusterState, framework: Framework
    ) -> PreemptionOutcome:
        started = time.perf_counter()
        try:
            return self.inner.preempt(gang, failed, cluster, framework)
        finally:
            self.metrics.preemption_duration.observe(time.perf_counter() - started)


@dataclass
class Operator:
    config: Config
    kube: Kube
    identity: str = "gangsched"
    metrics: Metrics = field(default_factory=Metrics)
    may_write: Callable[[], bool] = lambda: True
    preemptor: Preemptor | None = None
    discovery_seconds: float = 30.0
    #: Called when the scheduling loop cannot go on (a bug): the process exits 1.
    on_fatal: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        self.kube.on_request = lambda verb: self.metrics.api_requests.labels(verb).inc()
        cluster = ClusterState(scheduler_name=self.config.schedulerName)
        preemptor = self.preemptor
        if preemptor is not None:
            preemptor = TimedPreemptor(preemptor, self.metrics)
        self.scheduler = Scheduler(cluster, self.config.scheduler_config(), preemptor=preemptor)
        self.wake = asyncio.Event()
        self.cache = ClusterCache(self.scheduler, on_change=self.wake.set)
        self.events = EventRecorder(self.kube, instance=self.identity)
        self.actuator = Actuator(
            kube=self.kube,
            scheduler=self.scheduler,
            cache=self.cache,
            events=self.events,
            metrics=self.metrics,
            bind_concurrency=self.config.bindConcurrency,
            may_write=self._may_write,
            volume_bind_timeout=float(self.config.volumeBindTimeoutSeconds),
        )
        self.volume_cache = VolumeCache(self.cache)
        self.dra_cache = DraCache(self.cache)
        self.status = PodGroupStatusWriter(
            kube=self.kube,
            scheduler=self.scheduler,
            actuator=self.actuator,
            may_write=self._may_write,
        )
        self.cache.on_group_status = self.status.observed
        self.cache.on_problem = self._report_problem
        self.informers: dict[str, Informer] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.synced = asyncio.Event()
        #: Set once API discovery has answered (PodGroup informers started for what exists).
        self.discovered = asyncio.Event()
        self._published = 0.0
        #: Gangs whose last cycle found fewer members than minMember.
        self._waiting: set[GroupRef] = set()
        #: Half-bound gangs go first at start and after winning the lease.
        self._partial_first = True
        self.stopping = asyncio.Event()

    def on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)
        if leading:
            # A new leader starts from what the API server holds: requeue every pending gang.
            self._partial_first = True
            self.scheduler.enqueue_pending(time.monotonic())
            self.scheduler.queue.cluster_changed(time.monotonic())
            self.wake.set()
            # Problems seen while following were not reported (followers do not write).
            for where, message in list(self.cache.problems.items()):
                kind, _, key = where.partition("/")
                self._report_problem(kind, key, message)

    def _report_problem(self, kind: str, key: str, message: str) -> None:
        """An object we cannot read gets a Warning event saying why (a pod of ours: the
        FailedScheduling that `kubectl describe` shows; anything else: InvalidObject)."""
        ref = self.cache.problem_refs.get(f"{kind}/{key}", {})
        ours = kind == "Pod" and ref.get("schedulerName") == self.config.schedulerName
        namespace, _, name = key.rpartition("/")
        api_version = ref.get("apiVersion") or ("v1" if kind in ("Pod", "Node") else "")
        self.actuator.apply_event(
            Event(
                kind,
                key,
                "Warning",
                "FailedScheduling" if ours else "InvalidObject",
                "Scheduling" if ours else "Reading",
                f"gangsched cannot use this object: {message}",
            ),
            ObjectRef(kind, namespace, name, api_version, ref.get("uid", "")),
        )

    def _may_write(self) -> bool:
        # Indirect on purpose: leader election replaces `may_write` after construction.
        return self.may_write()

    # ------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._add_informer("pods", "/api/v1/pods", self.cache.pods())
        self._add_informer("nodes", "/api/v1/nodes", self.cache.nodes())
        self._add_informer("namespaces", "/api/v1/namespaces", self.cache.namespaces())
        self._add_informer(
            "priorityclasses",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            self.cache.priority_classes(),
        )
        self._add_informer(
            "poddisruptionbudgets",
            "/apis/policy/v1/poddisruptionbudgets",
            self.cache.budgets(),
        )
        for name, path, handler in STORAGE_INFORMERS:
            self._add_informer(name, path, handler(self.volume_cache))
        await self._start_dra()
        if await self._discover_pod_groups():
            self.discovered.set()
        self._tasks.append(asyncio.create_task(self._rediscover(), name="discovery"))
        self._tasks.append(asyncio.create_task(self._schedule_forever(), name="scheduling"))
        self._tasks.append(asyncio.create_task(self.status.run(), name="podgroup-status"))

    async def stop(self) -> None:
        self.stopping.set()
        for informer_task in self._tasks:
            informer_task.cancel()
        for informer_task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await informer_task
        await self.actuator.drain()

    def _add_informer(
        self, name: str, path: str, handler: object, *, api_version: str = "", kind: str = ""
    ) -> None:
        informer = Informer(
            self.kube,
            path,
            handler,  # type: ignore[arg-type]
            name=name,
            api_version=api_version,
            kind=kind,
            on_relist=lambda resource: self.metrics.informer_relists.labels(resource).inc(),
            on_error=lambda resource, code: self.metrics.api_errors.labels(
                f"list/watch {resource}", code
            ).inc(),
        )
        self.informers[name] = informer
        self.metrics.informer_relists.labels(name)  # the series exists (0) before any relist
        self._tasks.append(asyncio.create_task(informer.run(), name=f"informer-{name}"))

    async def _start_dra(self) -> None:
        """Dynamic Resource Allocation where the API server serves resource.k8s.io/v1
        (Kubernetes 1.34+): its four kinds are watched and pods' claims allocated. Elsewhere
        pods with resource claims stay unschedulable, never bound without their devices."""
        try:
            await self.kube.get(RESOURCE_API)
        except Exception as exc:  # not served (404) or unreachable: no DRA this run
            log.warning("resource.k8s.io/v1 not served; no DRA", error=str(exc) or repr(exc))
            return
        self.scheduler.cluster.dra = self.dra_cache.state
        for name, path, handler in DRA_INFORMERS:
            self._add_informer(name, path, handler(self.dra_cache))

    async def _discover_pod_groups(self) -> bool:
        """Start a PodGroup informer for every dialect the API server serves (CRDs may be
        installed after we start; `_rediscover` picks them up). False if discovery failed."""
        try:
            groups = await self.kube.get("/apis")
        except Exception as exc:  # HTTP error or API server unreachable: retried later
            log.warning("API discovery failed", error=str(exc) or repr(exc))
            return False
        for entry in groups.get("groups", []):
            name = entry.get("name")
            if name not in POD_GROUP_GROUPS or f"podgroups.{name}" in self.informers:
                continue
            # The preferred version may not serve PodGroups (scheduling.k8s.io/v1 is
            # PriorityClasses): take the first version, in the server's order, that does.
            version = ""
            for candidate in entry.get("versions") or []:
                group_version = str(candidate.get("groupVersion", ""))
                if group_version and await self._serves_pod_groups(group_version):
                    version = group_version
                    break
            if not version:
                continue
            self.actuator.api_versions[POD_GROUP_GROUPS[name]] = version
            log.info("watching PodGroups", apiVersion=version)
            self._add_informer(
                f"podgroups.{name}",
                f"/apis/{version}/podgroups",
                self.cache.pod_groups(POD_GROUP_GROUPS[name]),
                api_version=version,
                kind="PodGroup",
            )
            self.status.watch(POD_GROUP_GROUPS[name], version)
        return True

    async def _serves_pod_groups(self, group_version: str) -> bool:
        try:
            resources = await self.kube.get(f"/apis/{group_version}")
        except Exception:
            return False
        return any(r.get("name") == "podgroups" for r in resources.get("resources", []))

    async def _rediscover(self) -> None:
        # Until discovery first succeeds (e.g. started while the API server restarts) retry
        # soon: scheduling waits for it, or gangs would look like groups without PodGroups.
        delay = 1.0
        while not self.discovered.is_set():
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.discovery_seconds)
            if await self._discover_pod_groups():
                self.discovered.set()
        while True:
            await asyncio.sleep(self.discovery_seconds)
            await self._discover_pod_groups()

    def not_ready(self) -> str:
        """Why /readyz fails: "" once every informer has synced, else what is missing."""
        if self.synced.is_set():
            return ""
        if not self.discovered.is_set():
            return "API discovery (PodGroup dialects) has not succeeded yet"
        waiting = [
            f"{name}: {informer.last_error or 'listing'}"
            for name, informer in self.informers.items()
            if not informer.synced.is_set()
        ]
        return "caches syncing: " + ("; ".join(waiting) or "starting")

    async def wait_synced(self) -> None:
        await self.discovered.wait()
        await asyncio.gather(*(i.synced.wait() for i in list(self.informers.values())))
        self.synced.set()

    # ----------------------------------------------------------------------------- scheduling
    async def _schedule_forever(self) -> None:
        await self.wait_synced()
        log.info(
            "caches synced; scheduling",
            nodes=len(self.scheduler.cluster.nodes),
            pods=len(self.scheduler.cluster.pods),
        )
        self.scheduler.enqueue_pending(time.monotonic())
        try:
            await self._schedule_loop()
        except Exception:
            # A bug, not a condition to live with: the gang in flight would stay stuck.
            log.exception("scheduling loop failed; exiting to restart clean")
            if self.on_fatal is not None:
                self.on_fatal()
            raise

    async def _schedule_loop(self) -> None:
        while not self.stopping.is_set():
            if not self.may_write():
                self.wake.clear()  # followers keep caches warm but do not schedule
                await self._sleep(1.0)
                continue
            now = time.monotonic()
            started = time.perf_counter()
            # Cleared before looking at the queue, so a change that arrives while we look is
            # not lost: the wait below then returns at once.
            self.wake.clear()
            if self._partial_first:
                self._partial_first = False
                await self._finish_partial_gangs(now)
            report = self.step(now)
            if report is None and self.wake.is_set():
                await asyncio.sleep(0)  # a cycle failed: go on with the next gang
                continue
            if report is None:
                self._publish_queue()
                ready = self.scheduler.queue.next_ready_at()
                await self._sleep(1.0 if ready is None else max(0.0, min(ready - now, 1.0)))
                continue
            self._carry_out(report, now, time.perf_counter() - started)
            await asyncio.sleep(0)  # let watches, renewals and writes run between cycles

    def _carry_out(self, report: CycleReport, now: float, seconds: float) -> None:
        self._record(report, seconds)
        self.actuator.apply(report)
        if report.result in (UNSCHEDULABLE, WAITING):
            self._drop_nominations(report)
        if any(isinstance(d, Nominate) for d in report.decisions):
            # A nomination used, moved or cleared frees the capacity it reserved (maybe
            # on another node): gangs waiting for room get another look.
            self.scheduler.queue.cluster_changed(now)

    async def _finish_partial_gangs(self, now: float) -> None:
        """A new leader (or a restarted one) first tries the gangs its predecessor left
        half-bound -- some members bound, fewer than minMember -- in priority order, before
        any other gang can take the room their decision had placed them in."""
        cluster = self.scheduler.cluster
        partial = []
        for key in {self.scheduler.unit_key(ref) for ref in cluster.pending_refs()}:
            gang = self.scheduler.gang(key)
            if any(p.bound and len(p.bound) < p.group.min_member for p in gang.parts):
                partial.append(gang)
        partial.sort(key=lambda g: (-g.priority, g.key.key))
        for gang in partial:
            log.info("finishing a half-bound gang first", group=gang.key.key)
            started = time.perf_counter()
            mark = cluster.snapshot.checkpoint()
            try:
                report = self.scheduler.schedule(gang, now)
            except Exception:
                cluster.snapshot.rollback(mark)
                log.exception("scheduling cycle failed", groups=[gang.key.key])
                continue  # the queue retries it like any other gang
            self._carry_out(report, now, time.perf_counter() - started)
            await asyncio.sleep(0)

    def step(self, now: float) -> CycleReport | None:
        """One scheduling step. A cycle that raises (a bug, or an object the core cannot
        handle) is contained: its assumptions are rolled back, the gang is told and retried
        after its backoff, and the others go on (None is returned, `wake` is set)."""
        mark = self.scheduler.cluster.snapshot.checkpoint()
        try:
            return self.scheduler.step(now)
        except Exception as exc:
            self.scheduler.cluster.snapshot.rollback(mark)
            self._cycle_failed(exc, now)
            self.wake.set()
            return None

    def _cycle_failed(self, exc: Exception, now: float) -> None:
        """A cycle raised (a bug, or an object the core cannot handle): log it, tell the
        gang, and retry it after its backoff instead of leaving it in flight for ever."""
        queue = self.scheduler.queue
        in_flight = [
            ref
            for ref, entry in queue._entries.items()
            if entry.state is State.BACKOFF and entry.ready_at == float("inf")
        ]
        log.exception("scheduling cycle failed", groups=[ref.key for ref in in_flight])
        self.metrics.podgroup_attempts.labels(ERROR).inc()
        for ref in in_flight:
            queue.backoff(ref, now)
            kind = "Pod" if ref.dialect is Dialect.LONE_POD else "PodGroup"
            self.actuator.apply_event(
                Event(
                    kind,
                    ref.key,
                    "Warning",
                    "FailedScheduling",
                    "Scheduling",
                    f"internal error while scheduling this group: {exc!r}; retrying",
                )
            )

    def _drop_nominations(self, report: CycleReport) -> None:
        """A gang that failed with no preemption under way gives up its old nominations, as
        kube-scheduler's failure handler clears nominatedNodeName: a nomination that no longer
        fits would otherwise hold its node's room against every other gang for ever."""
        cluster = self.scheduler.cluster
        for key in report.pods:
            pod = cluster.pods.get(key)
            if pod is not None and cluster.is_pending(pod) and pod.nominated_node_name:
                clear = Nominate(pod.key, pod.uid, None)
                report.decisions.append(clear)
                self.actuator.apply_nomination(clear)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), timeout=seconds)

    def _record(self, report: CycleReport, seconds: float) -> None:
        m = self.metrics
        m.podgroup_attempts.labels(report.result).inc()
        m.podgroup_attempt_duration.labels(report.result).observe(seconds)
        m.podgroup_algorithm_duration.observe(report.algorithm_seconds)
        if report.result == SCHEDULED:
            # Pod scheduling SLI: creation to bind decision, by the gang's attempt count.
            now = time.time()
            attempts = str(min(report.attempts, 15))
            for bind in report.bound:
                pod = self.scheduler.cluster.pods.get(bind.pod)
                if pod is not None and pod.created:
                    m.sli_duration.labels(attempts).observe(max(0.0, now - pod.created))
        if report.result != WAITING:  # held before the cycle: not an attempt (as upstream)
            result = "scheduled" if report.result == SCHEDULED else "unschedulable"
            m.schedule_attempts.labels(result, self.config.schedulerName).inc(len(report.pods))
        if report.result == SCHEDULED and report.strategy:
            m.cycle_strategy.labels(report.strategy).inc()
        if report.preemption is not None:
            outcome = report.preemption
            label = "started" if outcome.started else "cannot_help"
            m.preemption_attempts.labels(label).inc()
            if outcome.victims:
                m.preemption_victims.observe(len(outcome.victims))
            m.pdb_violations.inc(outcome.pdb_violations)
            m.reprieved.inc(outcome.reprieved)
        log.info(
            "cycle",
            group=report.gang.key,
            result=report.result,
            pods=len(report.pods),
            bound=len(report.bound),
            victims=report.victims,
            strategy=report.strategy or None,
            message=report.message if report.result != SCHEDULED else None,
            ms=round(seconds * 1000, 2),
        )
        if report.result == WAITING:
            self._waiting.add(report.gang)
        else:
            self._waiting.discard(report.gang)
        self._publish_queue()

    def _publish_queue(self) -> None:
        """Queue gauges, at most once a second: counting pending pods walks every pod."""
        now = time.monotonic()
        if now - self._published < 1.0:
            return
        self._published = now
        queue = self.scheduler.queue
        for name, value in queue.counts().items():
            self.metrics.pending_groups.labels(name).set(value)
        # kube-scheduler's queue="gated": pods its PreEnqueue plugins hold (scheduling
        # gates, and gangs waiting for their members or PodGroup).
        per_state = {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
        cluster = self.scheduler.cluster
        oldest: dict[GroupRef, float] = {}
        for pod in cluster.pods.values():
            if cluster.is_gated(pod):
                per_state["gated"] += 1
            elif cluster.is_pending(pod):
                unit = self.scheduler.unit_key(cluster.group_of(pod))
                state = queue.state_of(unit)
                if queue.is_waiting(unit):
                    per_state["gated"] += 1
                else:
                    per_state[state.value if state is not None else "active"] += 1
                if pod.group is not None:
                    oldest[pod.group] = min(oldest.get(pod.group, pod.created), pod.created)
        for name, value in per_state.items():
            self.metrics.pending_pods.labels(name).set(value)
        wall = time.time()
        pending: dict[tuple[str, str], tuple[float, int | None]] = {}
        for ref, created in oldest.items():
            group = cluster.groups.get(ref)
            timeout = group.schedule_timeout_seconds if group is not None else None
            pending[(ref.namespace, ref.name)] = (max(0.0, wall - created), timeout)
        self.metrics.set_pending_groups(pending)
        self.metrics.waiting_gangs.set(len(self._waiting))
