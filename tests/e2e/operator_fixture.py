"""Runs `gangsched run` as a real process against the e2e control plane, as its ServiceAccount.

The CRDs and manifests/ (namespace, ServiceAccount, least-privilege ClusterRole) are applied
first and gangsched authenticates with a token of that ServiceAccount, so a permission missing
from the shipped ClusterRole fails these tests instead of hiding behind cluster-admin.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools import gangsched as gangsched_process
from devtools.processes import http_get, log_tail, terminate, wait_ready

from .conftest import REPO_ROOT, Cluster


@dataclass
class Gangsched:
    process: subprocess.Popen[bytes]
    log: Path
    metrics_url: str
    kubeconfig: Path

    def log_tail(self, lines: int = 60) -> str:
        return log_tail(self.log, lines)

    def metrics(self) -> str:
        status, body = http_get(f"{self.metrics_url}/metrics")
        assert status == 200, f"GET /metrics: HTTP {status}"
        return body

    def assert_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"gangsched exited with {self.process.returncode}:\n{self.log_tail()}")


def install(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", str(REPO_ROOT / "crds"))
    cluster.kubectl("wait", "--for", "condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("apply", "-f", str(REPO_ROOT / "manifests"))


def service_account_kubeconfig(cluster: Cluster, out: Path) -> Path:
    env = {**os.environ, "KUBECTL": str(cluster.kubectl_path)}
    proc = subprocess.run(
        [str(REPO_ROOT / "hack" / "sa-kubeconfig.sh"), str(cluster.kubeconfig), str(out), "2h"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"cannot create the ServiceAccount kubeconfig:\n{proc.stderr}")
    return out


def start(cluster: Cluster, workdir: Path, *, name: str = "gangsched-e2e") -> Gangsched:
    install(cluster)
    kubeconfig = service_account_kubeconfig(cluster, workdir / f"{name}.kubeconfig")
    config = gangsched_process.listen_config(
        schedulerName="gangsched",
        logFormat="json",
        backoff={"initialSeconds": 0.5, "maxSeconds": 2},
        leaderElection={"enabled": True, "leaseNamespace": "gangsched-system", "leaseName": name},
    )
    log = workdir / f"{name}.log"
    process = gangsched_process.start(
        kubeconfig=kubeconfig,
        config=config,
        config_path=workdir / f"{name}.yaml",
        log=log,
        identity=name,
    )
    running = Gangsched(process, log, gangsched_process.metrics_url(config), kubeconfig)
    if wait_ready(f"{running.metrics_url}/readyz", alive=running.assert_alive, timeout=90):
        return running
    stop(running)
    pytest.fail(f"gangsched did not become ready within 90s:\n{running.log_tail()}")


def stop(running: Gangsched) -> int | None:
    return terminate(running.process)


@pytest.fixture(scope="module")
def gangsched(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gangsched]:
    running = start(cluster, tmp_path_factory.mktemp("gangsched"))
    yield running
    code = stop(running)
    assert "Traceback" not in running.log.read_text(errors="replace"), running.log_tail(200)
    assert code == 0, f"gangsched exited {code} on SIGTERM:\n{running.log_tail()}"
