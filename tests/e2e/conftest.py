"""Session fixtures for end-to-end tests: a real etcd + kube-apiserver + kwok control plane.

``cluster`` (session): builds the binaries if needed (hack/build-k8s.sh), starts a private control
plane with hack/cluster-up.sh in a temporary directory on free loopback ports, and tears it down
with hack/cluster-down.sh at the end. If the control plane cannot be built or started the fixture
FAILS with the reason and the tail of the logs; it never skips.

``kube`` (per test): a :class:`tests.e2e.k8s.Kube` (raw JSON client) connected to that cluster.

Environment knobs:
  GANGSCHED_E2E_NODES            number of kwok nodes (default 2, 4 CPU / 16Gi / 110 pods each)
  GANGSCHED_E2E_CLUSTER_DIR      reuse an already running cluster (e.g. .cluster after
                                 `make cluster-up`); it is not torn down
  GANGSCHED_E2E_KEEP=1           keep the temporary cluster's state (logs) after the session
  GANGSCHED_E2E_BUILD_TIMEOUT    seconds allowed for building the binaries (default 3600)
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devtools.processes import free_ports

from .k8s import Kube

REPO_ROOT = Path(__file__).resolve().parents[2]
HACK = REPO_ROOT / "hack"
CRDS = REPO_ROOT / "crds"
SCENARIOS = Path(os.environ.get("GANGSCHED_SCENARIOS", REPO_ROOT.parent / "shared" / "scenarios"))


@dataclass
class Cluster:
    """A running control plane (what the ``cluster`` fixture yields)."""

    dir: Path  # CLUSTER_DIR: state, logs/, pids/
    kubeconfig: Path  # admin kubeconfig (token auth, CA data inline)
    server: str  # https://127.0.0.1:<port>
    token: str  # admin bearer token (group system:masters)
    bin_dir: Path  # kube-apiserver, kube-scheduler, kubectl, etcd, kwok
    ports: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # cluster.env as written by cluster-up.sh
    nodes: int = 2
    owned: bool = True  # False when reusing GANGSCHED_E2E_CLUSTER_DIR

    @property
    def kubectl_path(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def log_dir(self) -> Path:
        return self.dir / "logs"

    def script_env(self, **extra: str) -> dict[str, str]:
        """Environment for hack/*.sh scripts so they act on this cluster."""
        env = dict(os.environ)
        env.update({"CLUSTER_DIR": str(self.dir), "K8S_BIN_DIR": str(self.bin_dir)})
        env.update(extra)
        return env

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; raise AssertionError with its output on failure."""
        cmd = [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args]
        proc = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {shlex.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def run_script(
        self, script: str, *args: str, timeout: float = 300, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run hack/<script> against this cluster (e.g. ``baseline-scheduler.sh``)."""
        return subprocess.run(
            [str(HACK / script), *args],
            env=self.script_env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def log_tail(self, lines: int = 40) -> str:
        return logs_tail(self.dir, lines)


def logs_tail(cluster_dir: Path, lines: int = 40) -> str:
    out = []
    for log in sorted((cluster_dir / "logs").glob("*.log")):
        text = log.read_text(errors="replace").splitlines()
        out.append(f"----- {log} (last {lines} lines) -----")
        out.extend(text[-lines:])
    return "\n".join(out) if out else f"(no logs in {cluster_dir / 'logs'})"


def read_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        parts = shlex.split(value)
        env[key] = parts[0] if parts else ""
    return env


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def build_binaries() -> Path:
    timeout = float(os.environ.get("GANGSCHED_E2E_BUILD_TIMEOUT", "3600"))
    try:
        proc = subprocess.run(
            [str(HACK / "build-k8s.sh")],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hack/build-k8s.sh did not finish within {timeout:.0f}s", pytrace=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.fail(
            f"cannot build the control plane binaries: hack/build-k8s.sh exited "
            f"{proc.returncode}\n{_tail(proc.stderr)}",
            pytrace=False,
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def cluster_from_dir(cluster_dir: Path, *, owned: bool) -> Cluster:
    env = read_env_file(cluster_dir / "cluster.env")
    return Cluster(
        dir=cluster_dir,
        kubeconfig=Path(env["KUBECONFIG_FILE"]),
        server=env["SERVER"],
        token=env["ADMIN_TOKEN"],
        bin_dir=Path(env["K8S_BIN_DIR"]),
        ports={
            k: int(env[k])
            for k in ("ETCD_PORT", "ETCD_PEER_PORT", "APISERVER_PORT", "KWOK_PORT")
            if k in env
        },
        env=env,
        nodes=int(env.get("NODES", "0")),
        owned=owned,
    )


def start_cluster(bin_dir: Path, cluster_dir: Path, extra_env: Mapping[str, str]) -> Cluster:
    etcd, peer, apiserver, kwok = free_ports(4)
    env = dict(os.environ)
    env.update(
        {
            "CLUSTER_DIR": str(cluster_dir),
            "K8S_BIN_DIR": str(bin_dir),
            "ETCD_PORT": str(etcd),
            "ETCD_PEER_PORT": str(peer),
            "APISERVER_PORT": str(apiserver),
            "KWOK_PORT": str(kwok),
            **extra_env,
        }
    )
    proc = subprocess.run(
        [str(HACK / "cluster-up.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        logs = logs_tail(cluster_dir)
        stop_cluster(cluster_dir, keep_state=False)
        pytest.fail(
            f"cannot start the control plane: hack/cluster-up.sh exited {proc.returncode}\n"
            f"{_tail(proc.stderr)}\n{logs}",
            pytrace=False,
        )
    return cluster_from_dir(cluster_dir, owned=True)


def stop_cluster(cluster_dir: Path, *, keep_state: bool) -> None:
    env = dict(os.environ, CLUSTER_DIR=str(cluster_dir), KEEP_STATE="1" if keep_state else "0")
    subprocess.run(
        [str(HACK / "cluster-down.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if not keep_state:
        shutil.rmtree(cluster_dir, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/e2e is an e2e test, even if its module forgets ``pytestmark``."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A private control plane for the test session (see module docstring)."""
    reuse = os.environ.get("GANGSCHED_E2E_CLUSTER_DIR")
    if reuse:
        cluster_dir = Path(reuse).resolve()
        if not (cluster_dir / "cluster.env").is_file():
            pytest.fail(
                f"GANGSCHED_E2E_CLUSTER_DIR={reuse} has no cluster.env (run make cluster-up)",
                pytrace=False,
            )
        status = subprocess.run(
            [str(HACK / "cluster-status.sh")],
            env=dict(os.environ, CLUSTER_DIR=str(cluster_dir)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if status.returncode != 0:
            pytest.fail(f"cluster in {cluster_dir} is not healthy:\n{status.stderr}", pytrace=False)
        yield cluster_from_dir(cluster_dir, owned=False)
        return

    bin_dir = build_binaries()
    cluster_dir = Path(tempfile.mkdtemp(prefix="gangsched-e2e-"))
    keep = os.environ.get("GANGSCHED_E2E_KEEP") == "1"
    nodes = os.environ.get("GANGSCHED_E2E_NODES", "2")
    c = start_cluster(bin_dir, cluster_dir, {"NODES": nodes})
    try:
        yield c
    finally:
        stop_cluster(cluster_dir, keep_state=keep)
        if keep:
            print(f"\ngangsched e2e: cluster state kept in {cluster_dir}")


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[Kube]:
    """Raw JSON API client for the session's cluster (closed after the test)."""
    k = await Kube.from_kubeconfig(cluster.kubeconfig)
    try:
        yield k
    finally:
        with contextlib.suppress(Exception):
            await k.close()
