"""Deployment: `kubectl apply -f crds/ -f manifests/` works (also as a server-side dry run), the
Deployment is what production needs (and passes the "restricted" Pod Security Standard), and
gangsched installed exactly as the Dockerfile installs it -- from the hash-locked requirements
into a fresh virtualenv, by hack/install-locked.sh -- runs on the cluster with the ConfigMap's
configuration as the shipped ServiceAccount.

The test cluster's kube-controller-manager creates the Deployment's pods, but nothing runs the
default scheduler they ask for, so they stay Pending: applying it is harmless, and the tests run
the same configuration as local processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangsched.config import Config

from .conftest import REPO_ROOT, Cluster
from .harness import MANIFESTS, SYSTEM_NS, Replica, eventually, install, manifest_config
from .k8s import JSON, Kube, unique_name, wait_for
from .workload import Gang, Workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

APP = {"app.kubernetes.io/name": "gangsched", "app.kubernetes.io/component": "scheduler"}


async def test_manifests_apply_and_describe_a_production_deployment(
    cluster: Cluster, kube: Kube
) -> None:
    install(cluster)  # docs/operations/install.md's `kubectl apply -f crds/ -f manifests/`
    dry = cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "--dry-run=server",
        "-f", str(REPO_ROOT / "crds"), "-f", str(MANIFESTS),
    )  # fmt: skip
    assert "serverside-applied (server dry run)" in dry.stdout, dry.stdout

    base = f"/apis/apps/v1/namespaces/{SYSTEM_NS}"
    deployment = await kube.get(f"{base}/deployments/gangsched")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert spec["selector"]["matchLabels"] == APP and spec["template"]["metadata"]["labels"] == APP
    assert pod["serviceAccountName"] == "gangsched"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    # The mounted config is the ConfigMap, valid for gangsched, listening where the probes look.
    config_map = await kube.get(f"/api/v1/namespaces/{SYSTEM_NS}/configmaps/gangsched-config")
    config = Config.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.metricsAddress.endswith(f":{ports['metrics']}")
    assert config.healthAddress.endswith(f":{ports['health']}")
    assert config.leaderElection.enabled and config.leaderElection.leaseNamespace == SYSTEM_NS
    args = container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert args[args.index("--config") + 1].startswith(mount["mountPath"])
    assert any(v.get("configMap", {}).get("name") == "gangsched-config" for v in pod["volumes"])

    service = await kube.get(f"/api/v1/namespaces/{SYSTEM_NS}/services/gangsched-metrics")
    assert service["spec"]["selector"] == APP
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    budget = await kube.get(
        f"/apis/policy/v1/namespaces/{SYSTEM_NS}/poddisruptionbudgets/gangsched"
    )
    assert budget["spec"]["selector"]["matchLabels"] == APP and budget["spec"]["minAvailable"] == 1

    # The pod template passes the "restricted" Pod Security Standard (admission decides).
    ns = unique_name("pss")
    await kube.create(
        "/api/v1/namespaces",
        {
            "metadata": {
                "name": ns,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            }
        },
    )
    try:
        admitted = await kube.create(
            f"/api/v1/namespaces/{ns}/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gangsched-0"}, "spec": pod},
            dryRun="All",
        )
        assert admitted["metadata"]["name"] == "gangsched-0"
    finally:
        await kube.delete(f"/api/v1/namespaces/{ns}")

    # kube-controller-manager runs the Deployment: its two pods exist, for the default
    # scheduler (which this cluster does not run, so they stay Pending, and gangsched, whose
    # schedulerName they do not carry, leaves them alone).
    async def replicas() -> list[JSON] | None:
        pods = await kube.get(
            f"/api/v1/namespaces/{SYSTEM_NS}/pods",
            labelSelector=",".join(f"{k}={v}" for k, v in APP.items()),
        )
        return pods["items"] if len(pods["items"]) == 2 else None

    made = await wait_for(replicas, timeout=120, what="the Deployment's two pods")
    for replica in made:
        assert replica["spec"]["serviceAccountName"] == "gangsched"
        assert replica["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
        assert not replica["spec"].get("nodeName")


@pytest.fixture(scope="module")
def locked_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv built as the Dockerfile builds the image, from a copy of the Docker build
    context (only what .dockerignore lets in)."""
    context = tmp_path_factory.mktemp("context")
    for line in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        if line.startswith("!"):
            source = REPO_ROOT / line[1:].rstrip("/")
            target = context / line[1:].rstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, target)
    venv = tmp_path_factory.mktemp("image") / "venv"
    started = time.monotonic()
    proc = subprocess.run(
        ["sh", "hack/install-locked.sh", "all", str(venv)],
        cwd=context,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, (
        f"locked install failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    print(f"\nlocked install into a fresh venv: {time.monotonic() - started:.0f}s")
    return venv


async def test_locked_install_reports_its_version_and_rejects_bad_configs(
    locked_venv: Path, tmp_path: Path
) -> None:
    gangsched = locked_venv / "bin" / "gangsched"
    version = subprocess.run(
        [str(gangsched), "--version"], capture_output=True, text=True, check=False
    )
    assert version.returncode == 0 and version.stdout.strip() == "gangsched 0.1.0"
    assert not (locked_venv / "bin" / "pip").exists(), "no pip in the runtime venv"
    for bad, field in (
        ({"bogus": 1}, "bogus"),
        ({"bindConcurrency": "many"}, "bindConcurrency"),
        ({"metricsAddress": "localhost"}, "metricsAddress"),
        ({"leaderElection": {"renewDeadlineSeconds": 20}}, "leaderElection"),
    ):
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(bad))
        proc = subprocess.run(
            [str(gangsched), "run", "--config", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert f"{path}: {field}" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


async def test_locked_install_schedules_on_the_cluster_with_the_configmap_config(
    locked_venv: Path, cluster: Cluster, kube: Kube
) -> None:
    install(cluster)
    await kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/gangsched")
    workload = Workload(kube, unique_name("deploy"))
    replica = Replica(
        cluster,
        "gangsched-6c5b-x",
        cluster.dir / f"e2e-{workload.id}",
        manifest_config(),
        command=[str(locked_venv / "bin" / "gangsched")],
    )
    try:
        await workload.setup({"deploy-normal": 1000})
        await workload.add_nodes(2)
        replica.start()
        await replica.wait_ready()
        gang = Gang("train", 4, 4, "1", "deploy-normal", 1000)
        await workload.create_gangs([gang])

        async def bound() -> Any:
            pods = await workload.pods()
            return all(pods[p]["spec"].get("nodeName") for p in gang.pod_names())

        await eventually(bound, timeout=60, what="the gang bound by the installed gangsched")
        health = replica.config["healthAddress"]

        async def liveness() -> int | None:
            # kopf serves it, started once the first binds have settled (at most
            # KOPF_AFTER_S after the caches synced: within the probe's 15 s initial delay
            # plus its failureThreshold), not before the first bind.
            try:
                with urllib.request.urlopen(f"http://{health}/healthz", timeout=5) as response:
                    return int(response.status)
            except OSError:
                return None

        status = await eventually(liveness, timeout=30, what="the liveness endpoint served")
        assert status == 200  # the Deployment's liveness probe
        metrics = replica.http("/metrics")[1]
        assert "scheduler_podgroup_schedule_attempts_total" in metrics
        assert replica.metric("gangsched_leader") == 1
        assert await replica.stop() == 0
        assert "Traceback" not in replica.text(), replica.tail()
    finally:
        await replica.stop()
        await workload.cleanup()
