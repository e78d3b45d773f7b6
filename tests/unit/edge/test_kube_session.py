"""The API client session: no per-request environment lookups (proxies, ~/.netrc), the
environment's proxy still honoured (looked up once); unary requests the same on either
transport (pyreqwest, or aiohttp where the configuration needs it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from gangsched.edge.aiohttp_session import KEEPALIVE_S
from gangsched.edge.kube import Kube, KubeError, _env_proxy
from gangsched.edge.reqwest_transport import TRANSPORT_ENV, root_certificates, unsupported
from tests.builders import loopback_api_server

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: "t"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
"""


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)


@pytest.fixture(params=["pyreqwest", "aiohttp"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test using it runs on both transports: what the server sees must not differ."""
    name: str = request.param
    if name == "aiohttp":
        monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    return name


async def connect(kubeconfig: Path, transport: str) -> Kube:
    kube = await Kube.connect(str(kubeconfig))
    assert (kube.fast is not None) == (transport == "pyreqwest")
    return kube


async def test_session_does_not_read_the_environment_per_request(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    kube = await Kube.connect(str(path))
    try:
        assert kube.api.rest_client.pool_manager.trust_env is False
        assert kube.api.configuration.proxy is None
    finally:
        await kube.close()


async def test_environment_proxy_is_looked_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    kube = await Kube.connect(str(path))
    try:
        assert kube.fast is None  # a proxy stays with aiohttp, which sends its headers
        assert kube.api.configuration.proxy == "http://proxy.example:3128"
        assert kube.api.configuration.proxy_headers == {
            "Proxy-Authorization": "Basic dXNlcjpzZWNyZXQ="
        }
    finally:
        await kube.close()


def test_no_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,.cluster.local")
    assert _env_proxy("https://127.0.0.1:6443") == (None, None)
    assert _env_proxy("https://api.cluster.local") == (None, None)
    assert _env_proxy("https://api.example.com") == ("http://proxy.example:3128", None)
    assert _env_proxy(None) == (None, None)


async def test_responses_are_asked_for_uncompressed(tmp_path: Path, transport: str) -> None:
    """As kube-scheduler's client: the API server would gzip every list page over 128 KiB,
    which doubled a page's time on the bench cluster (bench/README.md, issue 17)."""
    seen: list[str] = []

    async def pods(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Accept-Encoding", ""))
        return web.json_response({"items": [], "metadata": {"resourceVersion": "1"}})

    async with loopback_api_server(tmp_path, web.get("/api/v1/pods", pods)) as kubeconfig:
        kube = await connect(kubeconfig, transport)
        try:
            assert (await kube.get("/api/v1/pods", limit=500))["metadata"]["resourceVersion"] == "1"
        finally:
            await kube.close()
    assert seen == ["identity"]


async def test_requests_carry_the_token_the_query_and_the_body(
    tmp_path: Path, transport: str
) -> None:
    """Requests go straight to the client's session (not through its generated `call_api`):
    the bearer token, refreshed through the configuration's hook, the query string, the
    content type and the JSON body still reach the server as the client sent them."""
    seen: list[tuple[str, str, str, str, object]] = []

    async def record(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        seen.append(
            (
                request.method,
                request.path_qs,
                request.headers.get("Authorization", ""),
                request.headers.get("Content-Type", ""),
                body,
            )
        )
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    refreshed: list[bool] = []
    binding = {"kind": "Binding", "target": {"name": "n-1"}}
    async with loopback_api_server(tmp_path, web.route("*", "/{tail:.*}", record)) as kubeconfig:
        kube = await connect(kubeconfig, transport)

        def refresh(configuration: object) -> None:
            refreshed.append(True)
            kube.api.configuration.api_key["BearerToken"] = "Bearer rotated"

        kube.api.configuration.refresh_api_key_hook = refresh
        try:
            assert await kube.post("/api/v1/namespaces/ns/pods/p/binding", binding) == {
                "kind": "Status",
                "status": "Success",
            }
            await kube.apply("/apis/g/v1/namespaces/ns/things/t", {"spec": {"a": 1}})
            await kube.get("/api/v1/pods", labelSelector="a=b,c", limit=2)
        finally:
            await kube.close()
    assert len(refreshed) == 3
    assert seen == [
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/binding",
            "Bearer rotated",
            "application/json",
            binding,
        ),
        (
            "PATCH",
            "/apis/g/v1/namespaces/ns/things/t?fieldManager=gangsched&force=true",
            "Bearer rotated",
            "application/apply-patch+yaml",
            {"spec": {"a": 1}},
        ),
        (
            "GET",
            "/api/v1/pods?labelSelector=a%3Db%2Cc&limit=2",
            "Bearer rotated",
            "application/json",
            None,
        ),
    ]


async def test_warm_connections_are_the_ones_a_burst_then_uses(tmp_path: Path) -> None:
    """`Kube.warm` opens as many connections as asked, and the burst that follows goes out
    on them: no request of the burst waits for a new connection (a TLS handshake each)."""
    connections_by_path: dict[str, set[int]] = {}
    in_burst = asyncio.Event()
    arrived = 0

    async def version(request: web.Request) -> web.Response:
        connections_by_path.setdefault("/version", set()).add(id(request.transport))
        await asyncio.sleep(0.05)  # the warm requests overlap, as a burst's would
        return web.json_response({"major": "1", "minor": "37"})

    async def binding(request: web.Request) -> web.Response:
        nonlocal arrived
        connections_by_path.setdefault("binding", set()).add(id(request.transport))
        arrived += 1
        if arrived == 4:
            in_burst.set()
        await in_burst.wait()  # all four in flight at once
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    routes = (
        web.get("/version", version),
        web.post("/api/v1/namespaces/ns/pods/{name}/binding", binding),
    )
    async with loopback_api_server(tmp_path, *routes) as kubeconfig:
        kube = await Kube.connect(str(kubeconfig))
        try:
            # aiohttp would close an idle connection after 15 s (the attribute must still exist).
            connector = kube.api.rest_client.pool_manager.connector
            assert connector._keepalive_timeout == KEEPALIVE_S  # type: ignore[union-attr]
            await kube.warm(in_flight=4)
            assert kube.requests["GET"] == 4
            body = {"kind": "Binding", "target": {"name": "n-1"}}
            await asyncio.wait_for(
                asyncio.gather(
                    *(kube.post(f"/api/v1/namespaces/ns/pods/p{i}/binding", body) for i in range(4))
                ),
                timeout=10,
            )
        finally:
            await kube.close()
    assert len(connections_by_path["/version"]) == 4
    assert connections_by_path["binding"] == connections_by_path["/version"]


async def test_requests_keep_the_servers_path_prefix(tmp_path: Path, transport: str) -> None:
    """A server URL with a path (a proxy such as Rancher's, `/k8s/clusters/<id>`) keeps it
    in front of every request's path; the query arrives as encoded."""
    seen: list[tuple[str, dict[str, str]]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.path, dict(request.query)))
        return web.json_response({"items": []})

    selector = "spec.nodeName=,spec.schedulerName=a b"
    async with loopback_api_server(
        tmp_path, web.route("*", "/{tail:.*}", record), path="/k8s/clusters/c-1/"
    ) as kubeconfig:
        kube = await connect(kubeconfig, transport)
        try:
            query = {"fieldSelector": selector, "limit": 500, "continue": "x/+=="}
            await kube.request("GET", "/api/v1/pods", query=query)
            await kube.get("/api/v1/nodes")
        finally:
            await kube.close()
    assert seen == [
        (
            "/k8s/clusters/c-1/api/v1/pods",
            {"fieldSelector": selector, "limit": "500", "continue": "x/+=="},
        ),
        ("/k8s/clusters/c-1/api/v1/nodes", {}),
    ]


async def test_errors_read_the_same_on_either_transport(tmp_path: Path, transport: str) -> None:
    """A refusal is a KubeError with the Status's code, reason and message; a server that
    does not answer in time is a TimeoutError; one that cannot be reached is an OSError
    (the callers retry or settle on these, whatever the client underneath)."""

    async def missing(request: web.Request) -> web.Response:
        status = {"kind": "Status", "reason": "NotFound", "message": 'pods "p" not found'}
        return web.json_response(status, status=404)

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(1)
        return web.json_response({})

    routes = (web.get("/api/v1/namespaces/ns/pods/p", missing), web.get("/slow", slow))
    async with loopback_api_server(tmp_path, *routes) as kubeconfig:
        kube = await connect(kubeconfig, transport)
        try:
            with pytest.raises(KubeError) as refused:
                await kube.get("/api/v1/namespaces/ns/pods/p")
            assert (refused.value.status, refused.value.reason) == (404, "NotFound")
            assert refused.value.message == 'pods "p" not found'
            with pytest.raises(TimeoutError) as late:
                await kube.request("GET", "/slow", timeout=0.2)
            # Not pyreqwest's "ConnectTimeoutError" for a server that was reached.
            assert str(late.value) == "GET /slow: no answer within 0.2 s"
        finally:
            await kube.close()
    kube = await connect(kubeconfig, transport)  # the server has stopped
    try:
        with pytest.raises(OSError):
            await kube.get("/api/v1/nodes")
    finally:
        await kube.close()


async def test_a_silent_watch_times_out_naming_the_watch(tmp_path: Path) -> None:
    """A watch whose server falls silent ends with a TimeoutError saying which watch and how
    long it waited (aiohttp says "Timeout on reading data from socket", not which one)."""

    async def one_event_then_silence(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type": "BOOKMARK", "object": {"metadata": {}}}\n')
        await asyncio.sleep(2)
        return response

    async with loopback_api_server(
        tmp_path, web.get("/api/v1/pods", one_event_then_silence)
    ) as kubeconfig:
        kube = await Kube.connect(str(kubeconfig))
        events = []
        try:
            with pytest.raises(TimeoutError) as silent:
                async for event in kube.watch("/api/v1/pods", query={}, read_timeout=0.3):
                    events.append(event)
        finally:
            await kube.close()
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert str(silent.value) == "watch /api/v1/pods: nothing received for 0.3 s"


def test_what_pyreqwest_cannot_do_stays_on_aiohttp(tmp_path: Path) -> None:
    from kubernetes_asyncio.client import Configuration

    def configuration(**fields: object) -> Configuration:
        c = Configuration(host="https://127.0.0.1:6443")
        for name, value in fields.items():
            setattr(c, name, value)
        return c

    assert unsupported(configuration()) is None
    assert unsupported(configuration(verify_ssl=False)) is None
    assert unsupported(configuration(tls_server_name="kubernetes")) == "tls-server-name"
    assert unsupported(configuration(proxy="http://proxy:3128")) == "proxy"
    assert unsupported(configuration(username="admin", password="x")) == "basic auth"
    assert (
        unsupported(configuration(disable_strict_ssl_verification=True))
        == "relaxed X.509 verification"
    )


def test_every_certificate_of_a_ca_bundle_is_trusted() -> None:
    """A cluster's CA file holds the old and the new CA while it rotates them."""
    old = b"-----BEGIN CERTIFICATE-----\nMIIBold\n-----END CERTIFICATE-----"
    new = b"-----BEGIN CERTIFICATE-----\nMIIBnew\nline2\n-----END CERTIFICATE-----"
    bundle = b"# cluster CA\n" + old + b"\n\n" + new + b"\n"
    assert root_certificates(bundle) == [old, new]
    assert root_certificates(b"") == []


def test_an_unknown_transport_is_refused_naming_the_variable(tmp_path: Path) -> None:
    """`gangsched run` exits 2 with one line that names the variable, before any request."""
    import os
    import subprocess
    import sys

    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    proc = subprocess.run(
        [sys.executable, "-m", "gangsched.cli", "run", "--kubeconfig", str(path)],
        env={**os.environ, TRANSPORT_ENV: "h3"},
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "gangsched run: GANGSCHED_HTTP_TRANSPORT='h3': expected one of h2, h1, aiohttp\n"
    )
