"""kopf's in-cluster login: the API server from KUBERNETES_SERVICE_HOST/PORT, as client-go's
rest.InClusterConfig and our own client find it (kopf's own handler assumes cluster DNS)."""

from __future__ import annotations

from pathlib import Path

import kopf
import pytest

from gangsched.edge.kopf_host import in_cluster_login


@pytest.fixture
def service_account(tmp_path: Path) -> Path:
    (tmp_path / "token").write_text("secret-token\n")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "namespace").write_text("gangsched-system\n")
    return tmp_path


@pytest.mark.parametrize(
    ("host", "port", "server"),
    [
        ("10.96.0.1", "443", "https://10.96.0.1:443"),
        ("127.0.0.1", "36443", "https://127.0.0.1:36443"),
        ("fd00::1", "6443", "https://[fd00::1]:6443"),
    ],
)
def test_the_server_comes_from_the_service_env(
    service_account: Path, monkeypatch: pytest.MonkeyPatch, host: str, port: str, server: str
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    info = in_cluster_login(kopf.OperatorSettings(), directory=service_account)
    assert info is not None
    assert info.server == server
    assert info.token == "secret-token"
    assert info.ca_path == str(service_account / "ca.crt")
    assert info.default_namespace == "gangsched-system"


def test_outside_a_pod_there_is_no_in_cluster_login(
    service_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert in_cluster_login(kopf.OperatorSettings(), directory=service_account) is None


def test_without_a_token_there_is_no_in_cluster_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert in_cluster_login(kopf.OperatorSettings(), directory=tmp_path) is None
