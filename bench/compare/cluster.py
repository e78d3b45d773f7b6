"""A fresh control plane per run, prepared the same way for every scheduler: the loadgen
binary that creates objects, the API priority and fairness flow, the priority classes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.compare.workloads import NAMESPACE
from bench.harness import (
    ROOT,
    Cluster,
    install_gangsched,
)
from gangsched.edge.kube import Kube

LOADGEN_SRC = ROOT / "bench" / "loadgen"
FLOW_SCHEMA = "bench-scheduler"
KS_SA = ("kube-system", "kube-scheduler-bench")
#: scheduler-plugins' controller beside Coscheduling: its own ServiceAccount, so its requests are
#: told apart from the harness's and counted with the scheduler's (the FlowSchema below).
CO_CONTROLLER_SA = ("kube-system", "scheduler-plugins-controller")
#: The chart's ClusterRole for that controller (manifests/install/charts/as-a-second-scheduler/
#: templates/rbac.yaml of scheduler-plugins v0.33.5, without the optional SySched rules).
CO_CONTROLLER_RULES: list[dict[str, list[str]]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["create", "get", "update"],
    },
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {
        "apiGroups": ["topology.node.k8s.io"],
        "resources": ["noderesourcetopologies"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.x-k8s.io"],
        "resources": ["podgroups", "elasticquotas", "podgroups/status", "elasticquotas/status"],
        "verbs": ["get", "list", "watch", "create", "delete", "update", "patch"],
    },
]


# ---------------------------------------------------------------------------- plumbing
def loadgen_binary() -> Path:
    cache = Path(os.environ.get("GANGSCHED_K8S_CACHE", Path.home() / ".cache" / "gangsched"))
    out = cache / "bench-loadgen"
    subprocess.run(
        ["go", "build", "-o", str(out), "."],
        cwd=LOADGEN_SRC,
        check=True,
        env={**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"},
    )
    return out


@dataclass
class Env:
    cluster: Cluster
    server: str
    token: str
    ca: Path
    loadgen: Path

    @classmethod
    def of(cls, cluster: Cluster, loadgen: Path) -> Env:
        values: dict[str, str] = {}
        for line in (cluster.dir / "cluster.env").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                values[key] = value.strip("'")
        return cls(
            cluster,
            values["SERVER"],
            values["ADMIN_TOKEN"],
            cluster.dir / "pki" / "ca.crt",
            loadgen,
        )

    def feature_gates(self) -> str:
        for line in (self.cluster.dir / "cluster.env").read_text().splitlines():
            if line.startswith("FEATURE_GATES="):
                return line.partition("=")[2].strip("'")
        return "GenericWorkload=true,PodGroupPreemptionPolicy=true"

    async def post_all(
        self, requests: list[dict[str, Any]], concurrency: int = 64, rate: float = 0.0
    ) -> dict[str, float]:
        """POST every request through loadgen, `rate` a second if set (else as fast as the API
        server answers); returns key -> wall time its answer arrived."""
        if not requests:
            return {}
        proc = await asyncio.create_subprocess_exec(
            str(self.loadgen),
            "-server",
            self.server,
            "-token",
            self.token,
            "-ca",
            str(self.ca),
            "-concurrency",
            str(concurrency),
            "-rate",
            str(rate),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        payload = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in requests).encode()
        out, err = await proc.communicate(payload)
        if proc.returncode != 0:
            raise RuntimeError(f"loadgen failed: {err.decode()[-2000:]}")
        done: dict[str, float] = {}
        for line in out.decode().splitlines():
            key, at, _status = line.split("\t")
            done[key] = int(at) / 1e9
        return done

    def metrics(self) -> str:
        context = ssl.create_default_context(cafile=str(self.ca))
        request = urllib.request.Request(
            f"{self.server}/metrics", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            text: str = response.read().decode()
            return text


async def prepare_cluster(env: Env, kube: Kube) -> None:
    """What every run has, whichever scheduler: gangsched's CRDs/RBAC, ServiceAccounts for
    kube-scheduler and scheduler-plugins' controller, the FlowSchema that attributes the
    scheduler's requests (and that controller's), priorities."""
    install_gangsched(env.cluster)
    await kube.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    await kube.post(
        f"/api/v1/namespaces/{KS_SA[0]}/serviceaccounts", {"metadata": {"name": KS_SA[1]}}
    )
    await install_controller_rbac(kube)
    await kube.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": KS_SA[1]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "namespace": KS_SA[0], "name": KS_SA[1]}],
        },
    )
    everything = {
        "verbs": ["*"],
        "apiGroups": ["*"],
        "resources": ["*"],
        "clusterScope": True,
        "namespaces": ["*"],
    }
    await kube.post(
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
        {
            "metadata": {"name": FLOW_SCHEMA},
            "spec": {
                # Exempt, like the admin clients (harness, kwok): neither scheduler is queued
                # by API Priority and Fairness, and its requests are counted apart.
                "matchingPrecedence": 100,
                "priorityLevelConfiguration": {"name": "exempt"},
                "rules": [
                    {
                        "subjects": [
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {
                                    "namespace": "gangsched-system",
                                    "name": "gangsched",
                                },
                            },
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {"namespace": KS_SA[0], "name": KS_SA[1]},
                            },
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {
                                    "namespace": CO_CONTROLLER_SA[0],
                                    "name": CO_CONTROLLER_SA[1],
                                },
                            },
                        ],
                        "resourceRules": [everything],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        },
    )
    for name, value in (("bench-low", 100), ("bench-high", 10000)):
        await kube.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        )


async def install_controller_rbac(kube: Kube) -> None:
    """scheduler-plugins' controller's ServiceAccount bound to the chart's ClusterRole for it,
    so it runs with the rights it has as installed."""
    namespace, name = CO_CONTROLLER_SA
    await kube.post(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}})
    await kube.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {"metadata": {"name": name}, "rules": CO_CONTROLLER_RULES},
    )
    await kube.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "namespace": namespace, "name": name}],
        },
    )


def announce_kept(cluster: Cluster) -> None:
    """--keep leaves the control plane running (its logs and objects stay inspectable); say
    how to stop it, since kept clusters keep loading the machine for the runs after them."""
    print(
        f"[compare] kept running: {cluster.dir} "
        f"(stop: CLUSTER_DIR={cluster.dir} hack/cluster-down.sh)",
        file=sys.stderr,
    )


def stop_cluster(cluster: Cluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.dir, ignore_errors=True)  # our run directories (logs, kubeconfigs)
