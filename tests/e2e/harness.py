"""Production-like gangsched processes for the fault, HA, RBAC and deploy e2e tests
(test_faults.py, test_ha.py, test_rbac.py, test_deploy.py); their workloads are in
workload.py and the invariants checked over a run in invariants.py.

* :func:`manifest_config` is the scheduler configuration from manifests/20-config.yaml's
  ConfigMap, with only the listen addresses moved to free loopback ports (and, where a test says
  so, other fields overridden).
* :class:`Replica` runs ``gangsched run`` as a real process, authenticated as a ServiceAccount
  (by default the shipped one, manifests/10-rbac.yaml), identity from ``POD_NAME`` as the
  Deployment sets it; its PID is registered in the cluster's pid dir, so cluster-down stops it
  even if a test dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools import gangsched as gangsched_process
from devtools.processes import http_get, http_ok, wait_ready_async

from .conftest import REPO_ROOT, Cluster
from .k8s import JSON

MANIFESTS = REPO_ROOT / "manifests"
SIGS = "scheduling.sigs.k8s.io/v1alpha1"
SYSTEM_NS = "gangsched-system"


# ------------------------------------------------------------------------------ installation
def manifest_docs() -> list[JSON]:
    docs: list[JSON] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def manifest_config(**overrides: Any) -> dict[str, Any]:
    """manifests/' ConfigMap config.yaml, addresses moved to free loopback ports."""
    config_map = next(d for d in manifest_docs() if d["kind"] == "ConfigMap")
    config: dict[str, Any] = gangsched_process.listen_config(
        **yaml.safe_load(config_map["data"]["config.yaml"])
    )
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


def install(cluster: Cluster) -> None:
    """`kubectl apply -f crds/ -f manifests/`, as docs/operations/install.md says (idempotent)."""
    cluster.kubectl("apply", "-f", str(REPO_ROOT / "crds"))
    cluster.kubectl("wait", "--for", "condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("apply", "-f", str(MANIFESTS))


def token_kubeconfig(
    cluster: Cluster, service_account: str, out: Path, *, namespace: str = SYSTEM_NS
) -> Path:
    """A kubeconfig authenticating as <namespace>/<service_account> (a bound token)."""
    token = cluster.kubectl(
        "-n", namespace, "create", "token", service_account, "--duration", "2h"
    ).stdout.strip()
    ca = cluster.kubectl(
        "config", "view", "--raw", "--minify", "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ).stdout.strip()  # fmt: skip
    return gangsched_process.token_kubeconfig(
        out,
        server=cluster.env.get("SERVER", cluster.server),
        ca_data=ca,
        token=token,
        user=service_account,
    )


# ----------------------------------------------------------------------------------- replicas
@dataclass
class Replica:
    """One `gangsched run` process (restartable: each start is a new incarnation)."""

    cluster: Cluster
    name: str
    workdir: Path
    config: dict[str, Any]
    service_account: str = "gangsched"
    service_account_namespace: str = SYSTEM_NS
    command: Sequence[str] = gangsched_process.COMMAND
    process: subprocess.Popen[bytes] | None = None
    incarnation: int = 0
    exit_codes: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / f"{self.name}.yaml"
        self.kubeconfig = token_kubeconfig(
            self.cluster,
            self.service_account,
            self.workdir / f"{self.name}.kubeconfig",
            namespace=self.service_account_namespace,
        )
        self.metrics_url = gangsched_process.metrics_url(self.config)

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.{self.incarnation}.log"

    def logs(self) -> list[Path]:
        return [self.workdir / f"{self.name}.{i}.log" for i in range(1, self.incarnation + 1)]

    def start(self) -> Replica:
        assert not self.alive, f"{self.name} is already running"
        self.incarnation += 1
        self.process = gangsched_process.start(
            kubeconfig=self.kubeconfig,
            config=self.config,
            config_path=self.config_path,
            log=self.log,
            command=self.command,
            env={"POD_NAME": self.name},  # the identity, as the Deployment sets it
            cwd=self.workdir,
            new_session=True,
        )
        pid_dir = self.cluster.dir / "pids"
        if pid_dir.is_dir() and str(self.cluster.dir) in str(self.kubeconfig):
            (pid_dir / f"e2e-{self.name}.pid").write_text(str(self.process.pid))
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(sig)

    async def wait_exit(self, timeout: float = 40.0) -> int:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                self.process.kill()
                self.process.wait(10)
                raise AssertionError(f"{self.name} did not exit within {timeout}s")
            await asyncio.sleep(0.1)
        code = self.process.returncode
        self.exit_codes.append(code)
        return code

    async def stop(self, timeout: float = 40.0) -> int | None:
        """SIGTERM and wait (SIGKILL after the timeout); None if it was not running."""
        if not self.alive:
            if self.process is not None and self.process.returncode is not None:
                return self.process.returncode
            return None
        self.kill(signal.SIGTERM)
        return await self.wait_exit(timeout)

    def http(self, path: str) -> tuple[int, str]:
        # A loaded machine can hold a busy process's answer for seconds: a short timeout here
        # turned a one-off read of a metric into NaN (and a failed comparison).
        return http_get(f"{self.metrics_url}{path}", timeout=15)

    def ready(self) -> bool:
        return http_ok(f"{self.metrics_url}/readyz")

    def assert_alive(self) -> None:
        if not self.alive:
            raise AssertionError(f"{self.name} exited:\n{self.tail()}")

    async def wait_ready(self, timeout: float = 90.0) -> None:
        url = f"{self.metrics_url}/readyz"
        if not await wait_ready_async(url, alive=self.assert_alive, timeout=timeout):
            raise AssertionError(f"{self.name} not ready within {timeout}s:\n{self.tail()}")

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 if none)."""
        try:
            text = self.http("/metrics")[1]
        except OSError:
            return float("nan")
        return metric_value(text, name, **labels)

    def is_leader(self) -> bool:
        return self.alive and self.metric("gangsched_leader") == 1

    def events(self) -> list[dict[str, Any]]:
        """Every JSON log line of every incarnation, tagged with `_incarnation`."""
        out = []
        for i, path in enumerate(self.logs(), start=1):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        record["_incarnation"] = i
                        out.append(record)
        return out

    def text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs() if p.exists())

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


def metric_value(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        match = re.match(rf"^{re.escape(name)}(\{{(.*)\}})?\s+(\S+)$", line)
        if not match:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match[2] or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(match[3])
    return total


async def eventually(
    check: Callable[[], Awaitable[Any]] | Callable[[], Any],
    *,
    timeout: float,
    interval: float = 0.5,
    what: str,
) -> Any:
    """Poll until `check()` (sync or async) is truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(interval)
