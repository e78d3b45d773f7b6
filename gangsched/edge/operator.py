"""`gangsched run`: informers feed the cache, the scheduling loop runs the core, the actuator
writes back.

The CPU-bound cycle runs on the event loop, one gang at a time, yielding between gangs, not in
a worker thread: informer callbacks mutate the cluster state on the same loop, so a thread
would need a lock around every cache update and every cycle, and the cycle is short (about 1.5
ms for a 3-pod gang and 20 ms for a 64-pod gang at 5,000 nodes, see bench/) and bounded by the
search budget. `gangsched_cycle_seconds` (the attempt-duration histogram) shows the worst case.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from gangsched.config import Config
from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang
from gangsched.core.decisions import ERROR, SCHEDULED, UNSCHEDULABLE, WAITING, Event, Nominate
from gangsched.core.framework import Framework
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.new_capacity import bound_on_new_capacity
from gangsched.core.queue import State
from gangsched.core.scheduler import CycleReport, PreemptionOutcome, Preemptor, Scheduler
from gangsched.edge.actuator import Actuator
from gangsched.edge.cache import ClusterCache
from gangsched.edge.composite_cache import CompositeCache
from gangsched.edge.domain_pinning import DomainPinner
from gangsched.edge.dra_cache import DraCache
from gangsched.edge.early_lists import EarlyLists
from gangsched.edge.events import EventRecorder, ObjectRef
from gangsched.edge.gang_protection import GangProtection
from gangsched.edge.kube import Kube
from gangsched.edge.metrics import Metrics
from gangsched.edge.podgroup_status import PodGroupStatusWriter
from gangsched.edge.volume_cache import VolumeCache
from gangsched.edge.watches import Watches

log = structlog.get_logger("gangsched.operator")


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
    #: The longest the loop waits, after a cycle that chose victims, for their evictions to
    #: be sent before it starts the next cycle.
    eviction_wait: float = 1.0
    #: Called when the scheduling loop cannot go on (a bug): the process exits 1.
    on_fatal: Callable[[], None] | None = None
    #: Lists started before the operator existed, taken over by its informers.
    early: EarlyLists = field(default_factory=EarlyLists)

    def __post_init__(self) -> None:
        self.kube.on_request = lambda verb: self.metrics.api_requests.labels(verb).inc()
        if self.early.kube is not None:  # its requests so far, and from now on, count too
            for verb, count in self.early.kube.requests.items():
                self.metrics.api_requests.labels(verb).inc(count)
            self.early.kube.on_request = self.kube.on_request
        cluster = ClusterState(scheduler_name=self.config.schedulerName)
        preemptor = self.preemptor
        if preemptor is not None:
            preemptor = TimedPreemptor(preemptor, self.metrics)
        self.scheduler = Scheduler(cluster, self.config.scheduler_config(), preemptor=preemptor)
        self.wake = asyncio.Event()
        self.cache = ClusterCache(self.scheduler, on_change=self.wake.set, queueing=False)
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
        self.composite_cache = CompositeCache(self.cache)
        self.status = PodGroupStatusWriter(
            kube=self.kube,
            scheduler=self.scheduler,
            actuator=self.actuator,
            may_write=self._may_write,
            gate=self.actuator.write_gate(),
            starting_hold=self.config.podGroupStatusHoldSeconds,
        )
        self.protection = GangProtection(
            kube=self.kube,
            cache=self.cache,
            actuator=self.actuator,
            metrics=self.metrics,
            config=self.config.gangHealth.settings(),
            may_write=self._may_write,
            gate=self.actuator.write_gate(),
        )
        self.domain_pinner = DomainPinner(
            kube=self.kube,
            cache=self.cache,
            actuator=self.actuator,
            metrics=self.metrics,
            may_write=self._may_write,
        )
        self.cache.on_group_status = self.status.observed
        self.cache.on_group_deleted = self.status.forget
        self.composite_cache.on_status = self.status.observed
        self.cache.on_problem = self._report_problem
        self.watches = Watches(
            kube=self.kube,
            metrics=self.metrics,
            cache=self.cache,
            volume_cache=self.volume_cache,
            dra_cache=self.dra_cache,
            composite_cache=self.composite_cache,
            on_pod_groups=self._watching_pod_groups,
            discovery_seconds=self.discovery_seconds,
            early=self.early,
        )
        #: Cancelled at `stop`. The loops stay until then; a warm-up (one per leadership won)
        #: leaves once it is done.
        self._tasks: set[asyncio.Task[None]] = set()
        self._published = 0.0
        #: Gangs whose last cycle found fewer members than minMember.
        self._waiting: set[GroupRef] = set()
        #: Half-bound gangs go first at start and after winning the lease.
        self._partial_first = True
        self.stopping = asyncio.Event()
        self.idle_first = asyncio.Event()  # first step bound nothing, or following (open_watches)

    def on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)
        if leading:
            self._warm_connections()  # a new leader's first cycles bind a burst at once
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

    def _watching_pod_groups(self, dialect: Dialect, api_version: str) -> None:
        self.actuator.api_versions[dialect] = api_version
        self.status.watch(dialect, api_version)

    def _may_write(self) -> bool:
        # Indirect on purpose: leader election replaces `may_write` after construction.
        return self.may_write()

    # ------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.may_write():  # else once leading (`on_leadership`): only a leader binds
            self._warm_connections()
        await self.watches.start()
        opening = self.watches.open_watches(after=(self.idle_first, self.actuator.bind_answered))
        self._tasks.add(asyncio.create_task(opening, name="open watches"))
        self._tasks.add(asyncio.create_task(self._schedule_forever(), name="scheduling"))
        self._tasks.add(asyncio.create_task(self.status.run(), name="podgroup-status"))
        for run in (self.protection.run, self.domain_pinner.run):
            self._tasks.add(asyncio.create_task(self._after_sync(run)))

    def _warm_connections(self) -> None:
        """Connections for the first binds, opened while the caches fill (`Kube.warm`)."""
        warm = self.kube.warm(in_flight=self.config.bindConcurrency)
        task = asyncio.create_task(warm, name="warm-connections")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _after_sync(self, run: Callable[[], Awaitable[None]]) -> None:
        await self.watches.wait_synced()  # a half-listed cluster would mislead reviews, pins
        await run()

    async def stop(self) -> None:
        self.stopping.set()
        tasks = [*self.watches.tasks, *self._tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.early.close()
        await self.actuator.drain()

    def not_ready(self) -> str:
        """Why /readyz fails: "" once every informer has synced, else what is missing."""
        return self.watches.not_ready()

    def without(self) -> str:
        """The optional resources we schedule without (their list is forbidden), or ""."""
        return self.watches.without()

    @property
    def synced(self) -> asyncio.Event:
        return self.watches.synced

    # ----------------------------------------------------------------------------- scheduling
    async def _schedule_forever(self) -> None:
        await self.watches.wait_synced()
        await self.early.close()  # every early list was taken over and has ended
        # What the caches hold now lives as long as the process: collections of the oldest
        # generation need not walk it again and again (at 50,000 pods, each full collection
        # walks a few million objects; gc.freeze's documented use). No collection first: a
        # full one would delay the first decision by most of a second. `gangsched run` started
        # without collections (gangsched.cli): from here on, they run again.
        gc.freeze()
        gc.enable()
        log.info(
            "caches synced; scheduling",
            nodes=len(self.scheduler.cluster.nodes),
            pods=len(self.scheduler.cluster.pods),
            # The process's CPU so far: what start-up cost it, waits for the API server aside.
            cpu_seconds=round(time.process_time(), 3),
        )
        self.cache.start_queueing()
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
            if self.actuator.bind_backlog_full():
                # Binds first (Actuator.bind_backlog_full says why); bounded, so an API
                # server that stops answering cannot stop the loop's other work.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.actuator.bind_room.wait(), timeout=1.0)
                continue
            report = self.step(now)
            if report is None or not report.bound:
                self.idle_first.set()
            if report is None and self.wake.is_set():
                await asyncio.sleep(0)  # a cycle failed: go on with the next gang
                continue
            if report is None:
                self._publish_queue()
                ready = self.scheduler.queue.next_ready_at()
                await self._sleep(1.0 if ready is None else max(0.0, min(ready - now, 1.0)))
                continue
            evictions = self._carry_out(report, now, time.perf_counter() - started)
            if evictions:
                # Victims start terminating only once their DELETE reaches the API server,
                # after their DisruptionTarget condition is answered, and the next cycle
                # (often another preemption search) would hold the event loop meanwhile: in
                # the topology trace, evictions went out up to 2.5 s after their decision,
                # one search after another. So the loop waits until every DELETE is on its
                # way, bounded (an API server that does not answer cannot stall scheduling);
                # their answers and the Preempted events follow without holding the loop.
                await asyncio.wait(evictions, timeout=self.eviction_wait)
            await asyncio.sleep(0)  # let watches, renewals and writes run between cycles

    def _carry_out(
        self, report: CycleReport, now: float, seconds: float
    ) -> list[asyncio.Future[None]]:
        self._record(report, seconds)
        evictions = self.actuator.apply(report)
        if report.result in (UNSCHEDULABLE, WAITING):
            self._drop_nominations(report)
        if any(isinstance(d, Nominate) for d in report.decisions):
            # A nomination used, moved or cleared frees the capacity it reserved (maybe
            # on another node): gangs waiting for room get another look.
            self.scheduler.queue.cluster_changed(now)
        return evictions

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
            grown = bound_on_new_capacity(report.bound, self.scheduler.cluster, now=now)
            if grown is not None:
                m.new_capacity_seconds.observe(grown.seconds)
                m.new_capacity_nodes.observe(grown.nodes)
        if report.result != WAITING:  # held before the cycle: not an attempt (as upstream)
            result = "scheduled" if report.result == SCHEDULED else "unschedulable"
            m.schedule_attempts.labels(result, self.config.schedulerName).inc(len(report.pods))
        if report.result == SCHEDULED and report.strategy:
            m.cycle_strategy.labels(report.strategy).inc()
        if report.topology is not None:
            m.generated_placements.inc(report.topology.generated)
            for trial in report.topology.evaluations:
                m.placement_evaluations.labels(trial.outcome).inc()
                m.placement_evaluation_duration.labels(trial.outcome).observe(trial.seconds)
        if report.preemption is not None:
            outcome = report.preemption
            label = "started" if outcome.started else "cannot_help"
            if outcome.waiting_until is not None:
                label = "waiting_for_capacity"
            m.preemption_attempts.labels(label).inc()
            if outcome.victims and outcome.started:
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
        """Queue gauges, at most once a second: counting pending pods walks the unbound."""
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
        state_of_group: dict[GroupRef, str] = {}  # members share their gang's: once a group
        for pod in cluster.unbound.values():
            if cluster.is_gated(pod):
                per_state["gated"] += 1
            elif cluster.is_pending(pod):
                ref = cluster.group_of(pod)
                held = state_of_group.get(ref)
                if held is None:
                    unit = self.scheduler.unit_key(ref)
                    state = queue.state_of(unit)
                    held = "gated" if queue.is_waiting(unit) else state.value if state else "active"
                    state_of_group[ref] = held
                per_state[held] += 1
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
