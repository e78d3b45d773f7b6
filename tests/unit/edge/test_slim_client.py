"""kubernetes-asyncio without its generated modules: still configures, connects and lets kopf
load; in a fresh interpreter, since the test process already holds the full client."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.builders import kubeconfig_file

_PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    from gangsched.edge import slim_client
    slim = slim_client.install()
    import kopf  # imports kubernetes_asyncio.client itself, looking for models
    from gangsched.edge.kube import Kube

    async def main():
        kube = await Kube.connect(sys.argv[1])
        host = kube.api.configuration.host
        token = kube.api.configuration.api_key.get("BearerToken", "")
        await kube.close()
        return host, token

    host, token = asyncio.run(main())
    loaded = sorted(n for n in sys.modules if n.startswith("kubernetes_asyncio.client."))
    try:
        from kubernetes_asyncio.client import V1Pod
        missing = ""
    except ImportError as exc:
        missing = str(exc)
    print(json.dumps({"slim": slim, "host": host, "token": token, "loaded": loaded,
                      "missing": missing, "second": slim_client.install()}))
    """
)


def _run(probe: str, *args: str, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run `probe` in a fresh interpreter; the JSON object its last line prints."""
    done = subprocess.run(
        [sys.executable, *flags, "-c", probe, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _probe(tmp_path: Path, *args: str) -> dict[str, Any]:
    kubeconfig = kubeconfig_file(
        tmp_path / "kubeconfig", server="https://127.0.0.1:1", token="s3cret"
    )
    return _run(_PROBE, str(kubeconfig), flags=args)


def test_slim_client_configures_a_session_without_generated_modules(tmp_path: Path) -> None:
    result = _probe(tmp_path)
    assert result["slim"] is True
    assert result["second"] is True
    assert result["host"] == "https://127.0.0.1:1"
    assert result["token"] == "Bearer s3cret"
    loaded = result["loaded"]
    assert isinstance(loaded, list)
    assert "kubernetes_asyncio.client.api_client" in loaded
    assert not [
        n
        for n in loaded
        if n.startswith(("kubernetes_asyncio.client.models.", "kubernetes_asyncio.client.api."))
    ]
    assert "V1Pod" in str(result["missing"])


def test_a_process_holding_the_full_client_keeps_it() -> None:
    import kubernetes_asyncio.client

    from gangsched.edge import slim_client

    assert slim_client.install() is False
    assert hasattr(kubernetes_asyncio.client, "CoreV1Api")


def test_run_leaves_out_what_only_development_tools_bring() -> None:
    """structlog logs (console rendering, exceptions) without rich, as in the image, and
    rich's modules are never loaded; a fresh interpreter, as `gangsched run` is."""
    probe = textwrap.dedent(
        """
        import json, sys
        from gangsched.edge import slim_client
        slim_client.leave_out_dev_only()
        from gangsched.edge import logs
        logs.configure("console")
        import structlog
        try:
            raise ValueError("boom")
        except ValueError:
            structlog.get_logger("probe").exception("failed")
        try:
            import rich
            blocked = False
        except ImportError:
            blocked = True
        loaded = [n for n in sys.modules if n.startswith(("rich.", "pygments"))]
        print(json.dumps({"blocked": blocked, "loaded": loaded}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "ValueError: boom" in done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"blocked": True, "loaded": []}


_CAS_PROBE = textwrap.dedent(
    """
    import json, ssl
    from gangsched.edge import slim_client
    slim_client.import_aiohttp()
    import aiohttp.connector as connector
    def cas(context):
        return context.cert_store_stats()["x509_ca"]
    system = cas(ssl.create_default_context())  # built after: the system CAs as ever
    before = [cas(connector._SSL_CONTEXT_VERIFIED), cas(connector._SSL_CONTEXT_UNVERIFIED)]
    loaded = slim_client.load_deferred_cas()
    after = [cas(connector._SSL_CONTEXT_VERIFIED), cas(connector._SSL_CONTEXT_UNVERIFIED)]
    print(json.dumps({"system": system, "before": before, "loaded": loaded, "after": after,
                      "again": slim_client.load_deferred_cas()}))
    """
)


def test_aiohttp_default_contexts_get_the_system_cas_only_when_asked() -> None:
    # gangsched.edge.slim_client.import_aiohttp: their CA loading put off until the first
    # binds are out, then the same contexts hold what aiohttp would have loaded at import.
    result = _run(_CAS_PROBE)
    assert result["system"] > 0  # this machine has a CA bundle, else the test shows nothing
    assert result["before"] == [0, 0]
    assert result["loaded"] == 2
    assert result["after"] == [result["system"], result["system"]]
    assert result["again"] == 0


_DEFERRED_PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    from gangsched.edge import slim_client
    slim_client.install()
    from gangsched.edge.kube import Kube
    import kubernetes_asyncio.config.openid as openid_before

    async def connect():
        kube = await Kube.connect(sys.argv[1])
        fast = kube.fast is not None
        await kube.close()
        return fast

    fast = asyncio.run(connect())
    before = "aiohttp" in sys.modules
    if sys.argv[2] == "load":
        slim_client.load_client()

    async def session():
        kube = await Kube.connect(sys.argv[1])
        agent = kube.api.default_headers["User-Agent"]
        await kube.close()
        return agent

    agent = asyncio.run(session())
    import kubernetes_asyncio.client as client
    import kubernetes_asyncio.config.openid as openid
    print(json.dumps({
        "fast": fast, "aiohttp_before": before, "aiohttp_after": "aiohttp" in sys.modules,
        "stand_in_module": type(openid_before).__name__,
        "api_client": client.ApiClient.__module__,
        "openid": openid.OpenIDRequestor.__module__, "agent": agent,
    }))
    """
)


def test_a_kubeconfig_loads_and_lists_can_go_out_before_aiohttp(tmp_path: Path) -> None:
    """`gangsched run`'s early lists: aiohttp (kubernetes-asyncio's session) waits for
    `load_client`, or for the session's first use."""
    kubeconfig = kubeconfig_file(
        tmp_path / "kubeconfig", server="https://127.0.0.1:1", token="s3cret"
    )
    for how in ("load", "first use"):
        result = _run(_DEFERRED_PROBE, str(kubeconfig), how)
        assert result["fast"] is True
        assert result["aiohttp_before"] is False, how
        assert result["stand_in_module"] == "_Shell"
        assert result["aiohttp_after"] is True
        assert result["api_client"] == "kubernetes_asyncio.client.api_client", how
        # The OIDC helper loads at its first call (an OIDC kubeconfig's token refresh).
        openid = (
            "kubernetes_asyncio.config.openid" if how == "load" else "gangsched.edge.slim_client"
        )
        assert result["openid"] == openid, how
        assert result["agent"].startswith("gangsched/")
