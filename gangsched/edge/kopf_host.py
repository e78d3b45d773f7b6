"""The kopf side of `gangsched run`: login, the liveness probe, start-up and clean-up
(gangsched.edge.app starts the operator itself, before this module and kopf are even
imported: kopf is not needed for the first bind, and importing it takes most of a second of
CPU).

kopf runs standalone (no KopfPeering objects: leader election is ours, on a Lease) and
watches nothing: the PodGroup status writer reads the server's copies from our own PodGroup
informers (gangsched.edge.cache), which see every event anyway. kopf's own watches of the
PodGroup CRDs duplicated them at about 3 ms of CPU per event, 5% of a precreated run's
samples, while the binds went out (py-spy, issue 30).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import kopf
from kopf._core.engines.peering import Identity as PeeringIdentity  # not re-exported

from gangsched.edge.operator import Operator

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


def build_registry(
    *,
    kubeconfig: str | None,
    holder: dict[str, Any],
    start: Callable[[], Awaitable[None]],
    cleanup: Callable[[], Awaitable[None]],
) -> kopf.OperatorRegistry:
    """`start`: starts the operator unless it already runs (the startup handler, so a start
    that failed before kopf ran is retried as kopf retries any startup handler); `cleanup`:
    stops it (idempotent)."""
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
        await start()

    @kopf.on.cleanup(registry=registry)
    async def on_cleanup(**_: Any) -> None:
        await cleanup()

    @kopf.on.probe(id="cachesSynced", registry=registry)
    def synced(**_: Any) -> bool:
        operator: Operator | None = holder.get("operator")
        return operator is not None and operator.synced.is_set()

    return registry


async def operate(
    registry: kopf.OperatorRegistry, *, liveness_endpoint: str, stop: Any, identity: str
) -> None:
    """Run kopf until `stop` is set (or a signal)."""
    await kopf.operator(
        registry=registry,
        clusterwide=True,
        standalone=True,
        liveness_endpoint=liveness_endpoint,
        stop_flag=stop,
        # Ours, not kopf's default (user@host via getpass): under a numeric runAsUser
        # with no passwd entry, as the image runs in a pod, getpass raises and nothing
        # starts.
        identity=PeeringIdentity(identity),
    )
