"""The one seam to the API server: raw JSON in, raw JSON out.

kubernetes-asyncio supplies configuration (kubeconfig, in-cluster service account, TLS,
token refresh) and its aiohttp session; we bypass its generated models, which are slow to
decode and, for `pods/binding`, wrong (the server answers a Status, which the client fails to
parse as a Binding after a successful bind). Every request is counted per verb so benchmarks
can report API requests per bound pod.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


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
    api: client.ApiClient
    requests: Counter[str] = field(default_factory=Counter)
    #: Called with the HTTP verb of every request (metrics).
    on_request: Callable[[str], None] | None = None

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, *, qps_hint: int = 0) -> Kube:
        """From a kubeconfig path, else $KUBECONFIG / ~/.kube/config, else in-cluster."""
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
        configuration.connection_pool_maxsize = max(qps_hint, 64)
        return cls(api=client.ApiClient(configuration))

    async def close(self) -> None:
        await self.api.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        self.requests[method] += 1
        if self.on_request is not None:
            self.on_request(method)
        response: Any = await self.api.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response  # type: ignore[no-any-return]

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
    ) -> JSON:
        response = await self._send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        async with response:
            raw = await response.read()
            if not 200 <= response.status < 300:
                raise _error(response.status, raw)
        if not raw:
            return {}
        decoded: JSON = json.loads(raw)
        return decoded

    async def get(self, path: str, **query: Any) -> JSON:
        return await self.request("GET", path, query=query)

    async def post(self, path: str, body: JSON) -> JSON:
        return await self.request("POST", path, body=body)

    async def patch(self, path: str, body: JSON, *, content_type: str = MERGE_PATCH) -> JSON:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, body: JSON | None = None) -> JSON:
        return await self.request("DELETE", path, body=body)

    async def watch(
        self, path: str, *, query: Mapping[str, Any], read_timeout: float
    ) -> AsyncIterator[JSON]:
        """Yield watch events as raw dicts until the server closes the stream.

        `read_timeout` bounds the silence between two lines (bookmarks arrive about once a
        minute), so a dead connection is noticed instead of hanging forever.
        """
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
        response = await self._send("GET", path, query={**query, "watch": "true"}, timeout=timeout)
        async with response:
            if not 200 <= response.status < 300:
                raise _error(response.status, await response.read())
            while True:
                line = await response.content.readline()
                if not line:
                    return
                if line.strip():
                    event: JSON = json.loads(line)
                    yield event


def _error(status: int, raw: bytes) -> KubeError:
    reason, message = "", raw.decode("utf-8", "replace")[:500]
    try:
        body = json.loads(raw)
        if isinstance(body, dict):
            reason = str(body.get("reason", ""))
            message = str(body.get("message", message))
    except ValueError:
        pass
    return KubeError(status, reason, message)
