"""Hosts the operator: start-up and clean-up, the metrics and readiness server, and kopf
(gangsched.edge.kopf_host: login, the liveness probe, start-up and clean-up handlers). Every
watch is our own informer, PodGroups' too: kopf handles one object at a time, at about 3 ms of
CPU per event.

The operator starts first; kopf is imported (in a worker thread) and started once the caches
have synced and the binds that followed have settled: nothing kopf does is needed for them, and
its import and discovery would compete with the informers' lists and the binds for the CPU
(issue 30). A start that fails here is retried by kopf's startup handler, as every start was
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import os
import signal
import socket
import time
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gangsched.config import Config
from gangsched.core.queue import ACTIVE
from gangsched.edge import slim_client
from gangsched.edge.early_lists import EarlyLists
from gangsched.edge.kube import Kube
from gangsched.edge.leader import LeaderElector, LeadershipLost
from gangsched.edge.operator import Operator
from gangsched.edge.watches import MAX_WATCHES, wait_for_any

if TYPE_CHECKING:  # aiohttp loads once the watches may start (Watches.open_watches)
    from aiohttp import web

log = structlog.get_logger("gangsched.app")

#: kopf starts once the caches have synced and the binds that followed have settled, or after
#: this long if they have not: its liveness endpoint must come up all the same (the shipped
#: probe gives it 15 s, then three failures 10 s apart).
KOPF_AFTER_S = 20.0
#: How often the start-up looks whether the first binds have settled: no write in flight at
#: two looks in a row.
SETTLED_POLL_S = 0.25


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)  # "[::1]:9090" listens on ::1


async def _serve_metrics(operator: Operator, address: str) -> web.AppRunner:
    from aiohttp import web

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(operator.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthy(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def ready(_: web.Request) -> web.Response:
        problem = operator.not_ready()
        if problem:
            return web.Response(status=503, text=problem)
        without = operator.without()
        return web.Response(text=f"ok; scheduling without {without}" if without else "ok")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/readyz", ready)
    app.router.add_get("/healthz", healthy)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = _host_port(address)
    await web.TCPSite(runner, host, port).start()
    return runner


def _load_deferred() -> None:
    """What start-up put off until the first binds were out: kopf, and the system CAs of
    aiohttp's default TLS contexts (gangsched.edge.slim_client.import_aiohttp)."""
    slim_client.load_client()  # done already, unless the watches are still held
    slim_client.load_deferred_cas()
    importlib.import_module("gangsched.edge.kopf_host")


async def _serve_once_watching(operator: Operator, address: str, holder: dict[str, Any]) -> None:
    """The metrics and readiness server, started with the watches: aiohttp (its server as the
    watches' client) loads then, once the first bind is answered or WATCH_HOLD_S after the
    start, not before (Watches.open_watches). Until then /readyz could only have said "not
    ready" (the caches had not synced), and a readiness probe that finds nothing listening
    says the same. A port that cannot be bound stops the process, as a failed start did when
    it was bound first."""
    await operator.watches.watching.wait()
    try:
        holder["http"] = await _serve_metrics(operator, address)
    except OSError:
        log.exception("cannot serve metrics and probes; exiting", address=address)
        _fail(holder)


async def start_operator(
    *,
    config: Config,
    kubeconfig: str | None,
    identity: str,
    holder: dict[str, Any],
    early: EarlyLists | None = None,
) -> None:
    """Connect, start the operator, its metrics server and leader election (what holds them
    goes in `holder`); on failure, what was started is stopped again."""
    try:
        # Binds (or victims) in flight, the informers' watches, and room for the lease renewal,
        # status writes and events (connections open only when needed: the cap costs nothing).
        kube = await Kube.connect(kubeconfig, connections=config.bindConcurrency + MAX_WATCHES + 16)
        # As `gangsched simulate` builds it: the configured strategy, with the scheduler's own
        # cycle and topology settings and preemption's domain budgets (None when disabled).
        preemptor = config.preemptor(clock=time.time)  # pods' condition times are wall-clock
        operator = Operator(
            config=config,
            kube=kube,
            identity=identity,
            preemptor=preemptor,
            early=early or EarlyLists(),
        )
        operator.on_fatal = lambda: _fail(holder)
        holder["operator"] = operator
        serving = _serve_once_watching(operator, config.metricsAddress, holder)
        holder["serving"] = asyncio.create_task(serving, name="metrics server")
        election = config.leaderElection
        if election.enabled:
            elector = LeaderElector(
                kube=kube,
                identity=identity,
                name=election.leaseName,
                namespace=election.leaseNamespace,
                lease_seconds=election.leaseDurationSeconds,
                renew_deadline=election.renewDeadlineSeconds,
                retry_period=election.retryPeriodSeconds,
                on_change=operator.on_leadership,
                # A follower binds nothing: its watches, and the metrics and readiness
                # server with them, need not wait WATCH_HOLD_S for a first bind.
                on_follow=operator.idle_first.set,
            )
            operator.may_write = elector.is_leader
            holder["elector"] = elector
            holder["election"] = asyncio.create_task(_elect(elector, holder))
        else:
            operator.metrics.leader.set(1)
        await operator.start()
    except BaseException:
        await cleanup(holder)
        raise
    holder["started"] = True
    log.info("started", identity=identity, schedulerName=config.schedulerName)


async def cleanup(holder: dict[str, Any]) -> None:
    """Stop what `start_operator` started, once (later calls find nothing left)."""
    holder.pop("started", None)
    for name in ("election", "serving"):
        task: asyncio.Task[None] | None = holder.pop(name, None)
        if task is not None and not task.done():
            task.cancel()
    elector: LeaderElector | None = holder.pop("elector", None)
    if elector is not None:
        await elector.release()
    operator: Operator | None = holder.pop("operator", None)
    if operator is not None:
        await operator.stop()
        await operator.kube.close()
    runner: web.AppRunner | None = holder.pop("http", None)
    if runner is not None:
        await runner.cleanup()


async def _elect(elector: LeaderElector, holder: dict[str, Any]) -> None:
    try:
        await elector.run()
    except LeadershipLost as exc:
        log.error("leadership lost; exiting to restart clean", error=str(exc))
        _fail(holder)
    except Exception:
        log.exception("leader election failed; exiting to restart clean")
        _fail(holder)


def _fail(holder: dict[str, Any]) -> None:
    """Stop the process with exit status 1 (the Deployment restarts it clean)."""
    holder["exit_code"] = 1
    stop: asyncio.Event = holder["stop"]
    stop.set()


async def _until_settled(holder: dict[str, Any], stop: asyncio.Event) -> None:
    """Until the operator's caches have synced and the writes that followed have settled
    (none in flight at two looks in a row), it stops, or KOPF_AFTER_S have passed: kopf
    waits, so its import, discovery and watches do not slow the informers' lists (at 300
    pods, loading kopf alongside them delayed the sync by a quarter) nor the first binds
    (importing kopf holds the interpreter for most of a second of CPU, issue 30)."""
    operator: Operator | None = holder.get("operator")
    if operator is None:
        return  # not started: kopf's startup handler retries at once
    loop = asyncio.get_running_loop()
    deadline = loop.time() + KOPF_AFTER_S
    await wait_for_any((operator.synced, stop), timeout=KOPF_AFTER_S)
    idle_looks = 0
    while idle_looks < 2 and not stop.is_set() and loop.time() < deadline:
        await asyncio.sleep(SETTLED_POLL_S)
        idle_looks = idle_looks + 1 if _idle(operator) else 0


def _idle(operator: Operator) -> bool:
    """No write in flight and no gang queued for its turn. Writes alone do not tell: where
    gangs are large (precreated (b): 100 of 8-24 pods) a cycle can outlast the binds before
    it, and kopf's import then ran amid the binds, most of a second of CPU (py-spy, issue 30)."""
    return operator.actuator.in_flight == 0 and not operator.scheduler.queue.counts()[ACTIVE]


async def run(
    *,
    config: Config,
    kubeconfig: str | None,
    identity: str | None = None,
    stop: asyncio.Event | None = None,
    early: EarlyLists | None = None,
) -> int:
    """Run until stopped; the exit code is 1 when leadership was lost. `early`: the pod
    and node lists `gangsched run` started before loading the rest (the informers take them
    over)."""
    if kubeconfig is not None:
        os.environ["KUBECONFIG"] = kubeconfig
    stop = stop or asyncio.Event()
    holder: dict[str, Any] = {"stop": stop}
    name = identity or default_identity()

    async def start() -> None:
        if "started" not in holder:
            await start_operator(
                config=config, kubeconfig=kubeconfig, identity=name, holder=holder, early=early
            )

    # Until kopf takes the signals over: a SIGTERM stops as it will then (the lease released).
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop.set)
    try:
        try:
            await start()
        except Exception:
            log.exception("start-up failed; retried by kopf's startup handler")
        await _until_settled(holder, stop)
        # Start-up ran without collections (gangsched.cli); the operator turned them on again
        # once its caches synced, unless it never started or has not synced yet.
        gc.enable()
        # In a worker thread: the watches and the first decisions go on meanwhile.
        await asyncio.to_thread(_load_deferred)
        from gangsched.edge import kopf_host

        registry = kopf_host.build_registry(
            kubeconfig=kubeconfig, holder=holder, start=start, cleanup=lambda: cleanup(holder)
        )
        host, port = _host_port(config.healthAddress)
        await kopf_host.operate(
            registry, liveness_endpoint=f"http://{host}:{port}/healthz", stop=stop, identity=name
        )
    finally:
        try:
            await cleanup(holder)  # kopf's cleanup handler did it, unless kopf never ran
        except Exception:
            log.exception("clean-up failed")
        if early is not None:
            await early.close()  # not taken when start-up failed before the informers
    return int(holder.get("exit_code", 0))
