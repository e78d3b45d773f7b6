"""kubernetes-asyncio's client and its aiohttp session, tuned for a scheduler: what watches
(and requests pyreqwest cannot carry, gangsched.edge.reqwest_transport) go out on.

Its own module so that gangsched.edge.kube loads aiohttp only when the session is first used:
`gangsched run` sends its first lists on pyreqwest before aiohttp is imported
(gangsched.edge.slim_client says why).
"""

from __future__ import annotations

import asyncio.sslproto
from typing import Any

import aiohttp
from kubernetes_asyncio import client

#: How long an idle connection waits in the pool for the next request: aiohttp closes it after
#: 15 s, so a burst of binds after a quiet quarter minute would pay a TLS handshake per bind
#: again. The API server closes idle connections after 90 s (k8s.io/apiserver's secure
#: serving), so a connection we keep is still open at its next use.
KEEPALIVE_S = 60.0
#: Bytes asyncio reads from a TLS socket at once: four TLS records (16 KiB each at most).
TLS_READ_BUFFER = 64 * 1024


def new_api_client(configuration: client.Configuration, *, user_agent: str) -> client.ApiClient:
    """The client over `configuration`, its session set up once rather than per request."""
    _small_tls_read_buffers()
    api = client.ApiClient(configuration)
    api.user_agent = user_agent
    # kubernetes-asyncio's session trusts the environment, so aiohttp looks up proxies and
    # ~/.netrc again for every request, each time in a worker thread: about a quarter of
    # gangsched's samples while binding (py-spy, bench/README.md). The proxy is looked up once
    # (gangsched.edge.kube's `_env_proxy`); netrc credentials could only clash with our bearer
    # token.
    session = api.rest_client.pool_manager
    session._trust_env = False
    _keep_connections_open(session.connector)
    return api


def _keep_connections_open(connector: aiohttp.BaseConnector | None) -> None:
    """Lengthen the pool's keep-alive (kubernetes-asyncio builds the connector with aiohttp's
    default, and offers no setting for it)."""
    if connector is not None and hasattr(connector, "_keepalive_timeout"):
        connector._keepalive_timeout = KEEPALIVE_S


def _small_tls_read_buffers() -> None:
    """asyncio gives every TLS connection a 256 KiB read buffer up front (CPython issue
    109534); with one HTTP/1.1 connection per request in flight, that was 17 MiB of a
    preempting scheduler's peak (tracemalloc, bench/README.md). A TLS record carries 16 KiB
    at most, so reading 64 KiB at a time loses nothing. `gangsched run` runs on uvloop, whose
    TLS layer mallocs its 256 KiB (resident only as far as it is filled); this is for
    asyncio's own loop, which the tests and any embedding program use."""
    protocol: Any = asyncio.sslproto.SSLProtocol
    if getattr(protocol, "max_size", 0) > TLS_READ_BUFFER:
        protocol.max_size = TLS_READ_BUFFER


def timeout(*, total: float | None = None, read: float | None = None) -> aiohttp.ClientTimeout:
    """A request's timeout: `total` for the whole exchange, `read` for each silence."""
    if read is None:
        return aiohttp.ClientTimeout(total=total)
    return aiohttp.ClientTimeout(total=total, sock_connect=10, sock_read=read)
