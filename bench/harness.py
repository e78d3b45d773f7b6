"""Shared bench plumbing: a private control plane, kwok nodes, and a scheduler process.

Used by operator_bench (gangsched alone) and meant for the side-by-side comparison with the
upstream kube-scheduler: both schedulers run as separate processes against the same
apiserver, and everything is measured from outside through the API.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools import gangsched as gangsched_process
from devtools.processes import free_ports, http_get, terminate, wait_ready
from gangsched.edge.kube import Kube, KubeError

ROOT = Path(__file__).resolve().parents[1]
HACK = ROOT / "hack"


def bin_dir() -> Path:
    out = subprocess.run([str(HACK / "build-k8s.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass
class Cluster:
    dir: Path
    bins: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    def kubectl(self, *args: str) -> str:
        out = subprocess.run(
            [str(self.bins / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout

    @classmethod
    def start(cls, *, workdir: Path | None = None) -> Cluster:
        bins = bin_dir()
        directory = Path(workdir or tempfile.mkdtemp(prefix="gangsched-bench-"))
        etcd, peer, apiserver, kwok, sched = free_ports(5)
        env = {
            **os.environ,
            "CLUSTER_DIR": str(directory),
            "ETCD_PORT": str(etcd),
            "ETCD_PEER_PORT": str(peer),
            "APISERVER_PORT": str(apiserver),
            "KWOK_PORT": str(kwok),
            "SCHEDULER_PORT": str(sched),
            "NODES": "0",
            "K8S_BIN_DIR": str(bins),
            "KWOK_PARALLELISM": os.environ.get("KWOK_PARALLELISM", "32"),
        }
        subprocess.run([str(HACK / "cluster-up.sh")], check=True, env=env, capture_output=True)
        return cls(directory, bins, env)

    def stop(self) -> None:
        subprocess.run(
            [str(HACK / "cluster-down.sh")], env=self.env, capture_output=True, check=False
        )

    def start_baseline(self) -> None:
        subprocess.run(
            [str(HACK / "baseline-scheduler.sh"), "up"],
            check=True,
            env=self.env,
            capture_output=True,
        )

    def stop_baseline(self) -> None:
        subprocess.run(
            [str(HACK / "baseline-scheduler.sh"), "down"],
            env=self.env,
            capture_output=True,
            check=False,
        )


async def create_nodes(
    kube: Kube,
    count: int,
    *,
    cpu: str,
    memory: str,
    pods: str = "110",
    concurrency: int = 32,
    labels: Callable[[int], dict[str, str]] | None = None,
) -> list[str]:
    names = [f"bench-node-{i:05d}" for i in range(count)]
    slots = asyncio.Semaphore(concurrency)

    async def one(index: int, name: str) -> None:
        extra = labels(index) if labels is not None else {}
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"type": "kwok", "kubernetes.io/hostname": name, **extra},
            },
            "status": {
                "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
            },
        }
        async with slots:
            try:
                await kube.post("/api/v1/nodes", body)
            except KubeError as exc:
                if not exc.conflict:
                    raise

    await asyncio.gather(*(one(i, n) for i, n in enumerate(names)))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        nodes = await kube.get("/api/v1/nodes", labelSelector="type=kwok")
        ready = sum(
            1
            for n in nodes.get("items", [])
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in n.get("status", {}).get("conditions", [])
            )
        )
        if ready >= count:
            return names
        await asyncio.sleep(1)
    raise TimeoutError(f"only some of {count} nodes became Ready")


@dataclass
class SchedulerProcess:
    process: subprocess.Popen[bytes]
    metrics_url: str
    log: Path

    def rss_peak_mib(self) -> float:
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks = os.sysconf("SC_CLK_TCK")
            return (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            return 0.0

    def metric(self, name: str) -> float:
        text = http_get(f"{self.metrics_url}/metrics", timeout=10)[1]
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and not line.startswith("#")
        )

    def alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.log.stem} exited: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        terminate(self.process)


def install_gangsched(cluster: Cluster) -> None:
    """CRDs and the namespace/ServiceAccount/RBAC, as a user installs them."""
    cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    cluster.kubectl("wait", "--for", "condition=Established", "--timeout=60s", "crd", "--all")
    for manifest in ("00-namespace.yaml", "10-rbac.yaml"):
        cluster.kubectl("apply", "-f", str(ROOT / "manifests" / manifest))


def start_gangsched(
    cluster: Cluster, *, extra_config: dict[str, Any] | None = None
) -> SchedulerProcess:
    install_gangsched(cluster)
    sa = cluster.dir / "gangsched.kubeconfig"
    subprocess.run(
        [str(HACK / "sa-kubeconfig.sh"), str(cluster.kubeconfig), str(sa), "4h"],
        check=True,
        capture_output=True,
        env={**os.environ, "KUBECTL": str(cluster.bins / "kubectl")},
    )
    config = gangsched_process.listen_config(
        bindConcurrency=64, leaderElection={"enabled": False}, **(extra_config or {})
    )
    log = cluster.dir / "gangsched.log"
    process = gangsched_process.start(
        kubeconfig=sa, config=config, config_path=cluster.dir / "gangsched-bench.yaml", log=log
    )
    running = SchedulerProcess(process, gangsched_process.metrics_url(config), log)
    if wait_ready(f"{running.metrics_url}/readyz", alive=running.alive, timeout=120):
        return running
    running.stop()
    raise TimeoutError("gangsched not ready")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def connect(cluster: Cluster) -> Kube:
    return await Kube.connect(str(cluster.kubeconfig))


def dump(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=2)
