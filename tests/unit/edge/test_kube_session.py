"""The API client session: no per-request environment lookups (proxies, ~/.netrc), the
environment's proxy still honoured (looked up once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangsched.edge.kube import Kube, _env_proxy

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
