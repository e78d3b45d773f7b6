"""Unary requests to the API server on pyreqwest (Rust's reqwest and hyper) instead of aiohttp.

Why: a scheduler's requests are mostly binds, small and many, and aiohttp's per-request work
in Python (request and response objects, header multidicts, its stream protocol over the
event loop's TLS) cost 0.43-0.64 ms of CPU a bind; on pyreqwest a bind costs 0.18-0.22 ms over
HTTP/2 (0.23-0.29 over HTTP/1.1), the HTTP and TLS work done in Rust (bare binds against the
bench's API server, 2,000 a run, bench/README.md). On two cores shared with the API server,
what the client spends is taken from the server.

Over HTTP/2, as client-go speaks to the API server: a TLS connection carries many requests at
once, so a burst of binds waits for no handshakes (`Kube.warm`). Not every request, though: the
API server lets a connection carry STREAMS_PER_CONNECTION at a time, and hyper queues the rest
behind them where Go's transport opens another connection. `Lanes` does what Go does.

kubernetes-asyncio still loads the configuration (kubeconfig, in-cluster, exec plugins,
token refresh) and serves the watches, whose streams aiohttp reads line by line. Where the
configuration asks for what this transport does not do (`unsupported`), every request stays
on aiohttp, as it was.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyreqwest.client import Client, ClientBuilder
from pyreqwest.exceptions import PyreqwestError

#: Each certificate of a PEM bundle: a cluster's CA file holds two during a CA rotation, and
#: a root certificate is added one at a time.
_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\s.+?\s-----END CERTIFICATE-----", re.DOTALL
)
#: How long an idle connection stays open: the API server closes idle ones after 90 s.
IDLE_S = 60.0
#: With every request on one HTTP/2 connection, a connection that died silently (a node or
#: network failure, no FIN) would hold every request in flight until its own timeout. As
#: client-go does (its HTTP/2 health check: ReadIdleTimeout 30 s, PingTimeout 15 s), a
#: connection quiet for PING_AFTER_S is pinged, and closed if no answer comes in PING_TIMEOUT_S.
PING_AFTER_S = 30.0
PING_TIMEOUT_S = 15.0
#: The requests one HTTP/2 connection may carry at once: the SETTINGS_MAX_CONCURRENT_STREAMS
#: k8s.io/apiserver announces unless --http2-max-streams-per-connection says otherwise. On one
#: connection, gangsched's 256 binds in flight (the benchmarks') were 100 on the wire and 156
#: queued in hyper; on lanes, precreated (a) bound 347 pods a second against 266 (medians of 4
#: rounds side by side, bench/results/http2-lanes.json).
STREAMS_PER_CONNECTION = 100
#: A connection's task ends on pyreqwest's runtime thread after `close` returns, and drops
#: what it holds of Python's (the event loop it wakes) there: during the interpreter's
#: finalization that aborts the process ("PyGILState_Release: thread state must be current",
#: once in a CI run of `gangsched explain`, exit -6). A short command closes, then waits this
#: long before it exits.
CLOSE_SETTLE_S = 0.05


#: `aiohttp` keeps every request on kubernetes-asyncio's aiohttp session; `h1` sends unary
#: requests on pyreqwest over HTTP/1.1 only; unset (or `h2`), over HTTP/2 where the server
#: offers it. An escape hatch, and the switch benchmarks compare the transports with.
TRANSPORT_ENV = "GANGSCHED_HTTP_TRANSPORT"
TRANSPORTS = ("h2", "h1", "aiohttp")


def setting() -> str:
    """TRANSPORT_ENV's value; ValueError, naming the variable, for one it does not know."""
    value = os.environ.get(TRANSPORT_ENV) or "h2"
    if value not in TRANSPORTS:
        raise ValueError(f"{TRANSPORT_ENV}={value!r}: expected one of {', '.join(TRANSPORTS)}")
    return value


def unsupported(configuration: Any) -> str | None:
    """Why this configuration must stay on aiohttp, or None: a TLS server name other than the
    host's, relaxed X.509 checks and basic auth have no equivalent here, and a proxy is left
    to the client that honours its headers."""
    if getattr(configuration, "tls_server_name", None):
        return "tls-server-name"
    if getattr(configuration, "disable_strict_ssl_verification", False):
        return "relaxed X.509 verification"
    if configuration.proxy or configuration.proxy_headers:
        return "proxy"
    if configuration.username or configuration.password:
        return "basic auth"
    return None


def root_certificates(bundle: bytes) -> list[bytes]:
    """Every certificate of a PEM bundle, each on its own."""
    return _PEM_CERTIFICATE.findall(bundle)


@contextmanager
def _trusting_only(ca_file: str | None) -> Iterator[None]:
    """While the client is built, the system's trust store is the configuration's CA file.

    pyreqwest adds root certificates to the system's, with no way to leave those out, where a
    kubeconfig's CA replaces them (client-go; aiohttp's context from `cafile`): any public CA
    would then vouch for the API server. Its verifier reads the system's roots once, when the
    client is built, through rustls-native-certs, which takes SSL_CERT_FILE and SSL_CERT_DIR,
    when either is set, instead of the platform's store (its documented override). Both are
    put back as they were once the client is built."""
    if not ca_file:
        yield
        return
    saved = {name: os.environ.get(name) for name in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    os.environ["SSL_CERT_FILE"] = ca_file
    os.environ.pop("SSL_CERT_DIR", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Lanes:
    """Clients of one configuration, each with a connection of its own, enough for `in_flight`
    requests at once over HTTP/2 (one over HTTP/1.1, whose pool opens a connection for each
    request in flight anyway).

    A request goes on the first lane with a stream free, else on the least busy: as Go's
    HTTP/2 transport (client-go's), a second connection opens only once the first carries all
    the streams the server allows, so a quiet scheduler holds one. A lane connects at its first
    request (pyreqwest's pool), and keeps its connection while requests come (IDLE_S)."""

    def __init__(self, clients: list[Client]) -> None:
        self.clients = clients
        self.in_flight = [0] * len(clients)

    def pick(self) -> int:
        """The lane the next request goes on."""
        busy = self.in_flight
        for lane, count in enumerate(busy):
            if count < STREAMS_PER_CONNECTION:
                return lane
        return busy.index(min(busy))

    async def send(
        self,
        method: str,
        url: str,
        *,
        token: str | None,
        body: bytes | None,
        content_type: str,
        timeout: float | None,
        lane: int | None = None,
    ) -> tuple[int, bytes]:
        """`send` on `lane`, else on the one `pick` chooses."""
        if lane is None:
            lane = self.pick()
        self.in_flight[lane] += 1
        try:
            return await send(
                self.clients[lane],
                method,
                url,
                token=token,
                body=body,
                content_type=content_type,
                timeout=timeout,
            )
        finally:
            self.in_flight[lane] -= 1

    async def close(self) -> None:
        """Close every client, then give pyreqwest's runtime thread CLOSE_SETTLE_S to end
        their connections' tasks while the interpreter still runs."""
        for client in self.clients:
            await client.close()
        await asyncio.sleep(CLOSE_SETTLE_S)


def lanes_needed(in_flight: int, *, http2: bool) -> int:
    """The lanes `in_flight` requests at once fill: one per STREAMS_PER_CONNECTION over HTTP/2,
    one over HTTP/1.1."""
    return max(math.ceil(in_flight / STREAMS_PER_CONNECTION), 1) if http2 else 1


def build_lanes(
    configuration: Any, *, default_headers: Mapping[str, str], in_flight: int, http2: bool
) -> Lanes:
    """As many clients as `in_flight` requests at once need (`Lanes`)."""
    return Lanes(
        [
            build_client(
                configuration, default_headers=default_headers, connections=in_flight, http2=http2
            )
            for _ in range(lanes_needed(in_flight, http2=http2))
        ]
    )


def build_client(
    configuration: Any, *, default_headers: Mapping[str, str], connections: int, http2: bool
) -> Client:
    """A client with the configuration's trust and identity: its CA file alone (else the
    system's roots), its client certificate, or no verification where the kubeconfig says so."""
    with _trusting_only(configuration.ssl_ca_cert):
        return _build(
            configuration, default_headers=default_headers, connections=connections, http2=http2
        )


def _build(
    configuration: Any, *, default_headers: Mapping[str, str], connections: int, http2: bool
) -> Client:
    builder = (
        ClientBuilder()
        .default_headers(dict(default_headers))
        .gzip(False)
        .follow_redirects(False)
        .pool_idle_timeout(datetime.timedelta(seconds=IDLE_S))
        .max_connections(connections)
        .tcp_nodelay(True)
    )
    # HTTP/2 is offered in TLS's ALPN, with HTTP/1.1 beside it for a server or load balancer
    # that does not speak it; a plain-HTTP server (`kubectl proxy`) is spoken to in HTTP/1.1.
    if http2:
        builder = (
            builder.http2(True)
            .http2_keep_alive_interval(datetime.timedelta(seconds=PING_AFTER_S))
            .http2_keep_alive_timeout(datetime.timedelta(seconds=PING_TIMEOUT_S))
        )
    else:
        builder = builder.http1_only()
    if configuration.ssl_ca_cert:
        for certificate in root_certificates(Path(configuration.ssl_ca_cert).read_bytes()):
            builder = builder.add_root_certificate_pem(certificate)
    if configuration.cert_file and configuration.key_file:
        builder = builder.identity_pem(
            Path(configuration.cert_file).read_bytes()
            + b"\n"
            + Path(configuration.key_file).read_bytes()
        )
    if not configuration.verify_ssl:
        builder = builder.danger_accept_invalid_certs(True)
    return builder.build()


async def send(
    client: Client,
    method: str,
    url: str,
    *,
    token: str | None,
    body: bytes | None,
    content_type: str,
    timeout: float | None,
) -> tuple[int, bytes]:
    """One request: its status and body. Failures to reach the server are raised as
    ConnectionError (an OSError, as aiohttp's are), timeouts as TimeoutError."""
    request = client.request(method, url).header("Content-Type", content_type)
    if token is not None:
        request = request.header("authorization", token, is_sensitive=True)
    if body is not None:
        request = request.body_bytes(body)
    if timeout is not None:
        request = request.timeout(datetime.timedelta(seconds=timeout))
    try:
        response = await request.build().send()
        return response.status, (await response.bytes()).to_bytes()
    except TimeoutError:
        raise
    except PyreqwestError as exc:
        raise ConnectionError(f"{method} {url}: {exc}") from exc
