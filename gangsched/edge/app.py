"""Hosts the operator in kopf: start-up and clean-up, health probes, and the PodGroup events
that drive status writing. The pod and node hot path stays on our own informers: kopf
handles one object at a time, which is right for PodGroup status and wrong for scheduling.

kopf runs standalone (no KopfPeering objects: leader election is ours, on a Lease) and with
event-watching handlers only, so it puts no finalizers or annotations on users' PodGroups.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

import kopf
import structlog
from aiohttp import web
from kopf._core.engines.peering import Identity as PeeringIdentity  # not re-exported
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gangsched.config import Config
from gangsched.core.model import Dialect, GroupRef
from gangsched.edge.early_lists import EarlyLists
from gangsched.edge.kube import Kube
from gangsched.edge.leader import LeaderElector, LeadershipLost
from gangsched.edge.operator import Operator
from gangsched.edge.watches import MAX_WATCHES, POD_GROUP_GROUPS

log = structlog.get_logger("gangsched.app")


#: Where the kubelet projects a pod's ServiceAccount token, CA and namespace.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster_login(
    settings: kopf.OperatorSettings, *, directory: Path = SERVICE_ACCOUNT_DIR
) -> kopf.ConnectionInfo | None:
    """In-cluster credentials for kopf, as client-go's rest.InClusterConfig builds them.

    kopf's own login_with_service_account always talks to https://kubernetes.default.svc,
    which only cluster DNS resolves (not a pod with hostNetwork and dnsPolicy Default, nor a
    cluster whose service lives elsewhere); the API server's address is what the kubelet puts
    in KUBERNETES_SERVICE_HOST/PORT, which our own client (kubernetes_asyncio) uses too. None
    without a token, so kopf falls back to the next login method.
    """
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    token_path = directory / "token"
    if not host or not port or not token_path.is_file():
        return None
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address (net.JoinHostPort)
    namespace_path, ca_path = directory / "namespace", directory / "ca.crt"
    namespace = namespace_path.read_text().strip() if namespace_path.is_file() else ""
    return kopf.ConnectionInfo(
        server=f"https://{host}:{port}",
        ca_path=str(ca_path) if ca_path.is_file() else None,
        token=token_path.read_text().strip() or None,
        default_namespace=namespace or None,
        trust_env=settings.networking.trust_env,
    )


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)  # "[::1]:9090" listens on ::1


async def _serve_metrics(operator: Operator, address: str) -> web.AppRunner:
    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(operator.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def ready(_: web.Request) -> web.Response:
        problem = operator.not_ready()
        if problem:
            return web.Response(status=503, text=problem)
        without = operator.without()
        return web.Response(text=f"ok; scheduling without {without}" if without else "ok")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/readyz", ready)
    app.router.add_get("/healthz", lambda _: _ok())
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = _host_port(address)
    await web.TCPSite(runner, host, port).start()
    return runner


async def _ok() -> web.Response:
    return web.Response(text="ok")


def build_registry(
    *,
    config: Config,
    kubeconfig: str | None,
    identity: str,
    holder: dict[str, Any],
    early: EarlyLists | None = None,
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(settings: kopf.OperatorSettings, **kwargs: Any) -> Any:
        # The same choice as Kube.connect: the kubeconfig given, else in-cluster, else the
        # default kubeconfig.
        if kubeconfig is None and (credentials := in_cluster_login(settings)) is not None:
            return credentials
        return kopf.login_with_kubeconfig(settings=settings, **kwargs)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # our events go through the deduplicating recorder
        settings.peering.standalone = True
        settings.watching.server_timeout = 300
        # Binds (or victims) in flight, the informers' watches, and room for the lease renewal,
        # status writes and events (connections open only when needed: the cap costs nothing).
        kube = await Kube.connect(kubeconfig, connections=config.bindConcurrency + MAX_WATCHES + 16)
        # As `gangsched simulate` builds it: the configured strategy, with the scheduler's own
        # cycle and topology settings and preemption's domain budgets (None when disabled).
        preemptor = config.preemptor()
        operator = Operator(
            config=config,
            kube=kube,
            identity=identity,
            preemptor=preemptor,
            early=early or EarlyLists(),
        )
        operator.on_fatal = lambda: _fail(holder)
        holder["operator"] = operator
        holder["http"] = await _serve_metrics(operator, config.metricsAddress)
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
            )
            operator.may_write = elector.is_leader
            holder["elector"] = elector
            holder["election"] = asyncio.create_task(_elect(elector, holder))
        else:
            operator.metrics.leader.set(1)
        await operator.start()
        log.info("started", identity=identity, schedulerName=config.schedulerName)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        task: asyncio.Task[None] | None = holder.get("election")
        if task is not None and not task.done():
            task.cancel()
        elector: LeaderElector | None = holder.get("elector")
        if elector is not None:
            await elector.release()
        operator: Operator | None = holder.get("operator")
        if operator is not None:
            await operator.stop()
            await operator.kube.close()
        runner: web.AppRunner | None = holder.get("http")
        if runner is not None:
            await runner.cleanup()

    @kopf.on.probe(id="cachesSynced", registry=registry)
    def synced(**_: Any) -> bool:
        operator: Operator | None = holder.get("operator")
        return operator is not None and operator.synced.is_set()

    # kopf resolves resources through each group's preferred version, which for the built-in
    # scheduling.k8s.io is v1 (PriorityClasses): upstream PodGroups reach the status writer
    # from our own informer instead (see Operator).
    for group, dialect in POD_GROUP_GROUPS.items():
        if dialect is not Dialect.UPSTREAM:
            _register_podgroup_events(registry, group, dialect, holder)
    return registry


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


def _register_podgroup_events(
    registry: kopf.OperatorRegistry, group: str, dialect: Dialect, holder: dict[str, Any]
) -> None:
    @kopf.on.event(f"podgroups.{group}", registry=registry)
    def podgroup_event(body: kopf.Body, type: str | None, **_: Any) -> None:
        operator: Operator | None = holder.get("operator")
        if operator is None or type == "DELETED":
            return
        ref = GroupRef(dialect, str(body.metadata.namespace), str(body.metadata.name))
        operator.status.observed(ref, dict(body.get("status") or {}))


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
    identity = identity or default_identity()
    registry = build_registry(
        config=config, kubeconfig=kubeconfig, identity=identity, holder=holder, early=early
    )
    host, port = _host_port(config.healthAddress)
    try:
        await kopf.operator(
            registry=registry,
            clusterwide=True,
            standalone=True,
            liveness_endpoint=f"http://{host}:{port}/healthz",
            stop_flag=stop,
            # Ours, not kopf's default (user@host via getpass): under a numeric runAsUser
            # with no passwd entry, as the image runs in a pod, getpass raises and nothing
            # starts.
            identity=PeeringIdentity(identity),
        )
    finally:
        if early is not None:
            await early.close()  # not taken when start-up failed before the informers
    return int(holder.get("exit_code", 0))
