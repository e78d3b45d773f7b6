"""The one seam to the API server: raw JSON in, raw JSON out.

kubernetes-asyncio supplies configuration (kubeconfig, in-cluster service account, TLS,
token refresh) and its aiohttp session (for watches, and for requests where pyreqwest cannot go;
made at its first use, so that `gangsched run`'s first lists go out before aiohttp is loaded,
gangsched.edge.slim_client); we bypass its generated models, which are slow to
decode and, for `pods/binding`, wrong (the server answers a Status, which the client fails to
parse as a Binding after a successful bind). Answers are decoded with orjson: the standard
library's decoder was 41% of a scheduler's start-up CPU listing 20,000 pods (py-spy,
bench/README.md); orjson decodes the same pages about twice as fast. Every request is
counted per verb so benchmarks can report API requests per bound pod.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode
from urllib.request import getproxies

import orjson
import structlog
from kubernetes_asyncio import client, config
from yarl import URL

if TYPE_CHECKING:  # imported at the session's first use (Kube.api)
    import aiohttp

from gangsched import __version__
from gangsched.edge import reqwest_transport

log = structlog.get_logger("gangsched.kube")

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
#: Server-side apply (JSON is YAML): the server merges by field ownership, list maps by key.
APPLY_PATCH = "application/apply-patch+yaml"
#: The field manager gangsched applies as (`kubectl get --show-managed-fields` shows it).
FIELD_MANAGER = "gangsched"
#: Connections opened at start (and on winning the lease) for the first binds; the rest open as
#: binds need them. Each is a TLS handshake on both sides, and done alongside the lists they
#: delayed the sync: bindConcurrency 64 of them took 0.15 of the 1.4-1.6 CPU seconds start-up
#: spends before the sync (bench.startup, precreated (b), 6 launches each side by side: CPU at
#: the sync 1.41 against 1.56 s, the sync at 1.84 against 1.95 s; issue 30). 16 is a first
#: gang's binds and more.
WARM_CONNECTIONS = 16


class KubeError(Exception):
    """A non-2xx answer; `status` is the HTTP code, `reason` the Status reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def forbidden(self) -> bool:
        return self.status == 403


@dataclass
class Kube:
    configuration: client.Configuration
    requests: Counter[str] = field(default_factory=Counter)
    #: Called with the HTTP verb of every request (metrics).
    on_request: Callable[[str], None] | None = None
    _forbidden_logged: dict[tuple[str, str], float] = field(default_factory=dict)
    #: The API server's URL, parsed once (`_url`).
    _base: URL | None = field(default=None, init=False, repr=False)
    #: The clients unary requests go out on (edge/reqwest_transport.py); None keeps them on
    #: kubernetes-asyncio's aiohttp session, as watches always are.
    fast: reqwest_transport.Lanes | None = None
    #: Whether `fast` speaks HTTP/2 (a connection carries many requests in flight).
    http2: bool = False
    _api: client.ApiClient | None = field(default=None, init=False, repr=False)

    @property
    def api(self) -> client.ApiClient:
        """kubernetes-asyncio's client and its aiohttp session, made at the first use."""
        if self._api is None:
            from gangsched.edge.aiohttp_session import new_api_client

            self._api = new_api_client(self.configuration, user_agent=USER_AGENT)
        return self._api

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, *, connections: int = 32) -> Kube:
        """From a kubeconfig path, else $KUBECONFIG / ~/.kube/config, else in-cluster.

        `connections` caps the HTTP/1.1 connections (one per request in flight, each watch
        holds one): every TLS connection costs 256 KiB of read buffer in asyncio, so a pool
        sized to the writes we run in parallel saves memory and loses no speed.
        """
        configuration = client.Configuration()
        if kubeconfig is None:
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except config.ConfigException:
                await config.load_kube_config(client_configuration=configuration)
        else:
            await config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration
            )
        configuration.connection_pool_maxsize = max(connections, 16)
        if not configuration.proxy:
            configuration.proxy, configuration.proxy_headers = _env_proxy(configuration.host)
        kube = cls(configuration=configuration)
        transport = reqwest_transport.setting()
        reason = "asked" if transport == "aiohttp" else reqwest_transport.unsupported(configuration)
        if reason is None:
            kube.http2 = transport != "h1" and str(configuration.host).startswith("https://")
            kube.fast = reqwest_transport.build_lanes(
                configuration,
                default_headers=_default_headers(),
                in_flight=configuration.connection_pool_maxsize,
                http2=kube.http2,
            )
        else:
            log.info("requests stay on aiohttp", reason=reason)
        return kube

    async def close(self) -> None:
        if self.fast is not None:
            await self.fast.close()
        if self._api is not None:
            await self._api.close()

    async def warm(self, *, in_flight: int) -> None:
        """Open now the connections a burst of `in_flight` writes will need.

        Over HTTP/1.1 each request in flight needs a connection of its own, and each new one
        a TLS handshake, which costs the API server most (an RSA signature each): the first
        gangs' binds, bindConcurrency at once, went out only after as many handshakes (0.30 s
        between the first decision and its first bind answered, 1,600 pods waiting, issue 30).
        Opened while the informers list, the handshakes are done when the binds start; the
        connections then wait in the pool (KEEPALIVE_S). Only as many as the first binds need
        (WARM_CONNECTIONS): the handshakes compete with the lists for the CPU. Over HTTP/2 a
        connection carries STREAMS_PER_CONNECTION of them, so one request opens each lane the
        burst fills (reqwest_transport.Lanes). `GET /version` is the cheapest request every
        identity may send (system:public-info-viewer)."""
        started = time.perf_counter()
        if self.http2 and self.fast is not None:
            lanes = min(
                len(self.fast.clients), reqwest_transport.lanes_needed(in_flight, http2=True)
            )
            opening = [
                self._fast_raw(self.fast, "GET", "/version", lane=lane) for lane in range(lanes)
            ]
        else:
            opening = [
                self.request_raw("GET", "/version") for _ in range(min(WARM_CONNECTIONS, in_flight))
            ]
        answers = await asyncio.gather(*opening, return_exceptions=True)
        failed = [answer for answer in answers if isinstance(answer, Exception)]
        log.info(
            "connections opened",
            connections=len(answers) - len(failed),
            seconds=round(time.perf_counter() - started, 3),
            error=str(failed[0]) if failed else None,
        )

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> aiohttp.ClientResponse:
        """One request on kubernetes-asyncio's session, with its configuration's bearer token
        (refreshed by its hook, as the client's own `call_api` does) but none of the generated
        client's per-request work: serialising the body through its model sanitiser and the
        standard library's encoder, and the header and query conversions, were a quarter of
        the CPU a bind took (py-spy of a precreated run, issue 30). The body is encoded with
        orjson; the URL is built as the client builds it."""
        api = self.api  # first: it loads the session's module
        from gangsched.edge.aiohttp_session import timeout as session_timeout

        headers = {**_default_headers(), "Content-Type": content_type}
        token = await self._count_and_authorize(method)
        if token is not None:
            headers["authorization"] = token
        url = self._url(path, query)
        rest = api.rest_client
        options: dict[str, Any] = {}
        if rest.proxy:
            options["proxy"] = rest.proxy
        if rest.proxy_headers:
            options["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            options["server_hostname"] = rest.server_hostname
        response: aiohttp.ClientResponse = await rest.pool_manager.request(
            method,
            url,
            headers=headers,
            data=None if body is None else _encoded(body),
            timeout=session_timeout(total=timeout, read=read_timeout),
            **options,
        )
        return response

    async def _count_and_authorize(self, method: str) -> str | None:
        """Count one request (per verb, and `on_request`) and give its bearer token, read
        through the configuration's refresh hook, or None without one: both transports."""
        self.requests[method] += 1
        if self.on_request is not None:
            self.on_request(method)
        configuration = self.configuration
        if "BearerToken" not in configuration.api_key:
            return None
        token: str = await configuration.get_api_key_with_prefix("BearerToken")
        return token

    def _url(self, path: str, query: Mapping[str, Any] | None) -> URL:
        """The request's URL from parts already encoded (names are DNS labels, the query is
        urlencoded): given a string, aiohttp parses and requotes the whole URL of every
        request again, 11% of a bind's client CPU (py-spy, precreated (b), issue 30)."""
        base = self._base
        if base is None:
            base = self._base = URL(str(self.configuration.host))
        return URL.build(
            scheme=base.scheme,
            authority=base.raw_authority,
            path=base.raw_path.rstrip("/") + path,
            query_string=urlencode(list(query.items())) if query else "",
            encoded=True,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
        decode: Callable[[bytes], JSON] | None = None,
    ) -> JSON:
        """`decode` replaces the generic JSON decoding of a successful answer (typed list
        pages, gangsched.edge.wire)."""
        raw = await self.request_raw(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        if not raw:
            return {}
        if decode is not None:
            return decode(raw)
        decoded: JSON = orjson.loads(raw)
        return decoded

    async def request_raw(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
    ) -> bytes:
        """The body of a successful answer, undecoded (KubeError otherwise; TimeoutError,
        naming the request and its timeout, when no answer came in time)."""
        try:
            if self.fast is not None:
                return await self._fast_raw(
                    self.fast,
                    method,
                    path,
                    query=query,
                    body=body,
                    content_type=content_type,
                    timeout=timeout,
                )
            response = await self._send(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
            async with response:
                raw = await response.read()
                if not 200 <= response.status < 300:
                    raise self._failed(method, path, query, _error(response.status, raw))
            return raw
        except TimeoutError as exc:
            # Either client's own words mislead here: pyreqwest calls a request that waited
            # its whole timeout on a connected server a ConnectTimeoutError, and aiohttp's
            # TimeoutError says nothing at all. The logs that carry it should say which
            # request waited how long.
            waited = "its timeout" if timeout is None else f"{timeout:g} s"
            raise TimeoutError(f"{method} {path}: no answer within {waited}") from exc

    async def _fast_raw(
        self,
        fast: reqwest_transport.Lanes,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
        lane: int | None = None,
    ) -> bytes:
        token = await self._count_and_authorize(method)
        status, raw = await fast.send(
            method,
            str(self._url(path, query)),
            token=token,
            body=None if body is None else _encoded(body),
            content_type=content_type,
            timeout=timeout,
            lane=lane,
        )
        if not 200 <= status < 300:
            raise self._failed(method, path, query, _error(status, raw))
        return raw

    async def get(
        self, path: str, *, decode: Callable[[bytes], JSON] | None = None, **query: Any
    ) -> JSON:
        return await self.request("GET", path, query=query, decode=decode)

    async def post(self, path: str, body: JSON) -> JSON:
        return await self.request("POST", path, body=body)

    async def put(self, path: str, body: JSON | bytes) -> JSON:
        return await self.request("PUT", path, body=body)

    async def patch(
        self, path: str, body: JSON | bytes, *, content_type: str = MERGE_PATCH
    ) -> JSON:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def apply(self, path: str, body: JSON, *, force: bool = True) -> JSON:
        """Server-side apply as FIELD_MANAGER: sets the fields in `body` that we own, leaves
        every other manager's fields alone, and removes ours that `body` no longer has."""
        query = {"fieldManager": FIELD_MANAGER, "force": "true" if force else "false"}
        return await self.request("PATCH", path, query=query, body=body, content_type=APPLY_PATCH)

    async def delete(self, path: str, body: JSON | None = None) -> JSON:
        return await self.request("DELETE", path, body=body)

    async def watch(
        self,
        path: str,
        *,
        query: Mapping[str, Any],
        read_timeout: float,
        decode: Callable[[bytes], JSON] = orjson.loads,
    ) -> AsyncIterator[JSON]:
        """Yield watch events as raw dicts (each line read with `decode`) until the server
        closes the stream.

        `read_timeout` bounds the silence between two lines (bookmarks arrive about once a
        minute), so a dead connection is noticed instead of hanging forever.
        """
        try:
            response = await self._send(
                "GET", path, query={**query, "watch": "true"}, read_timeout=read_timeout
            )
            async with response:
                if not 200 <= response.status < 300:
                    error = _error(response.status, await response.read())
                    raise self._failed("GET", path, {"watch": "true"}, error)
                while True:
                    line = await response.content.readline()
                    if not line:
                        return
                    if line.strip():
                        yield decode(line)
        except TimeoutError as exc:  # aiohttp says "Timeout on reading data from socket"
            raise TimeoutError(f"watch {path}: nothing received for {read_timeout:g} s") from exc

    def _failed(
        self, method: str, path: str, query: Mapping[str, Any] | None, error: KubeError
    ) -> KubeError:
        """Say plainly which permission is missing (once a minute per verb and resource):
        a 403 otherwise surfaces only as a failed operation somewhere downstream."""
        if error.status in (401, 403):
            verb, resource = rbac_verb(method, path, query), rbac_resource(path)
            now = time.monotonic()
            if now - self._forbidden_logged.get((verb, resource), -3600.0) >= 60.0:
                self._forbidden_logged[(verb, resource)] = now
                log.error(
                    "missing RBAC permission" if error.status == 403 else "unauthorized",
                    verb=verb,
                    resource=resource,
                    path=path,
                    message=error.message,
                )
        return error


def _encoded(body: Any) -> bytes:
    """A request body: JSON by orjson, bytes as they are (a body whose encoding matters,
    claim_writebacks)."""
    return body if isinstance(body, bytes) else orjson.dumps(body)


#: On every request, both transports (kubernetes-asyncio's default names its code generator):
#: the API server's audit log and `apiserver_request_total` consumers then see who asked.
USER_AGENT = f"gangsched/{__version__}"


def _default_headers() -> dict[str, str]:
    return {
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
        # As kube-scheduler's client (kubernetes PR 80919): no gzip. Between a scheduler and
        # its API server the network is fast and both CPUs are busy; a gzipped 500-pod page
        # took twice as long to arrive (bench/README.md).
        "Accept-Encoding": "identity",
    }


def _env_proxy(host: str | None) -> tuple[str | None, dict[str, str] | None]:
    """HTTPS_PROXY/HTTP_PROXY (NO_PROXY honoured) for the API server, as aiohttp's trust_env
    would find it per request: (proxy URL, Proxy-Authorization header) or (None, None)."""
    if not host or not {"http", "https"} & set(getproxies()):
        return None, None  # no proxy set: aiohttp's helper (and aiohttp) not loaded for it
    from aiohttp.helpers import get_env_proxy_for_url

    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except (LookupError, ValueError):
        return None, None
    headers = {"Proxy-Authorization": auth.encode()} if auth is not None else None
    return str(proxy), headers


def rbac_resource(path: str) -> str:
    """The RBAC resource a REST path names, as `kubectl auth can-i` spells it:
    "pods/binding", "leases.coordination.k8s.io", "podgroups.scheduling.x-k8s.io/status"."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return path
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]  # a namespaced resource (not the namespaces themselves)
    if not rest:
        return path
    resource = rest[0] + (f".{group}" if group else "")
    return f"{resource}/{rest[2]}" if len(rest) >= 3 else resource


def rbac_verb(method: str, path: str, query: Mapping[str, Any] | None = None) -> str:
    """The RBAC verb of a request: get/list/watch for reads, create/update/patch/delete."""
    method = method.upper()
    if method == "GET":
        if str((query or {}).get("watch", "")).lower() in ("true", "1"):
            return "watch"
        parts = [p for p in path.split("?", 1)[0].split("/") if p]
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            rest = rest[2:]
        return "list" if len(rest) == 1 else "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def _error(status: int, raw: bytes) -> KubeError:
    reason, message = "", raw.decode("utf-8", "replace")[:500]
    try:
        body = orjson.loads(raw)
        if isinstance(body, dict):
            reason = str(body.get("reason", ""))
            message = str(body.get("message", message))
    except ValueError:
        pass
    return KubeError(status, reason, message)
