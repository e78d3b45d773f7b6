"""The Helm chart (deploy/helm/gangsched) with Helm built from its Go module
(hack/build-helm.sh): lint, the default rendering equal to manifests/, every object accepted by
the API server (server-side dry run), and a release's life on the local control plane --
install, a scheduling run, upgrade with a changed value, uninstall leaving nothing
cluster-scoped but the CRDs.

The control plane's nodes are kwok's, so the Deployment's pods never really run. The
scheduling runs therefore start `gangsched run` from the venv with exactly what the release
installed: the configuration read back from the release's ConfigMap (only the listen addresses
moved to free loopback ports) and a token of the release's ServiceAccount, so its RBAC is the
chart's. (The image itself is run in-cluster by tests/e2e/test_image.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.processes import free_ports

from .conftest import HACK, REPO_ROOT, Cluster
from .harness import MANIFESTS, Replica, eventually
from .k8s import JSON, Kube, condition, fake_node, pod_manifest, unique_name, wait_for
from .walkthrough import replay_seed_walkthrough

pytestmark = [pytest.mark.e2e]

CHART = REPO_ROOT / "deploy" / "helm" / "gangsched"
# Labels Helm conventions add that manifests/ does not carry, and the pod template's checksum.
HELM_ONLY_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "app.kubernetes.io/instance",
}
MONITORING = [
    "--set", "serviceMonitor.enabled=true",
    "--set", "prometheusRule.enabled=true",
    "--set", "grafanaDashboard.enabled=true",
]  # fmt: skip


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    proc = subprocess.run(
        [str(HACK / "build-helm.sh")], capture_output=True, text=True, timeout=3600, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip(), (
        f"hack/build-helm.sh exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    )
    return Path(proc.stdout.strip().splitlines()[-1]) / "helm"


class Helm:
    def __init__(self, binary: Path, home: Path, kubeconfig: Path | None) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        if kubeconfig is not None:
            self.env["KUBECONFIG"] = str(kubeconfig)

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.binary), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if check:
            assert proc.returncode == 0, (
                f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def template(self, release: str, namespace: str, *args: str) -> list[JSON]:
        out = self("template", release, str(CHART), "--namespace", namespace, *args).stdout
        return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def helm_offline(helm_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_bin, tmp_path_factory.mktemp("helm"), None)


@pytest.fixture(scope="module")
def helm(helm_bin: Path, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_bin, tmp_path_factory.mktemp("helm"), cluster.kubeconfig)


# ------------------------------------------------------------------------------- offline
def test_chart_lints_with_defaults_and_with_everything_enabled(helm_offline: Helm) -> None:
    for extra in ([], MONITORING):
        proc = helm_offline("lint", "--strict", str(CHART), *extra)
        assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout, proc.stdout


def normalized(obj: Any) -> Any:
    """Helm's bookkeeping labels and the config checksum dropped; the config file parsed."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in HELM_ONLY_LABELS or key == "checksum/config":
                continue
            parsed = yaml.safe_load(value) if key == "config.yaml" else value
            out[key] = normalized(parsed)
        return out
    if isinstance(obj, list):
        return [normalized(v) for v in obj]
    return obj


def by_kind_and_name(docs: list[JSON]) -> dict[tuple[str, str], JSON]:
    return {(d["kind"], d["metadata"]["name"]): normalized(d) for d in docs}


def test_default_rendering_is_exactly_the_plain_manifests(helm_offline: Helm) -> None:
    """`helm install gangsched ... -n gangsched-system` and `kubectl apply -f manifests/`
    create the same objects (the namespace aside: Helm's --create-namespace makes it)."""
    rendered = by_kind_and_name(helm_offline.template("gangsched", "gangsched-system"))
    plain = by_kind_and_name(
        [
            d
            for path in sorted(MANIFESTS.glob("*.yaml"))
            for d in yaml.safe_load_all(path.read_text())
            if d and d["kind"] != "Namespace"
        ]
    )
    assert sorted(rendered) == sorted(plain)
    for key, obj in plain.items():
        assert rendered[key] == obj, f"{key}: chart and manifests/ differ"


def test_values_reach_the_objects(helm_offline: Helm) -> None:
    docs = helm_offline.template(
        "team", "batch",
        "--set", "replicaCount=3",
        "--set", "config.metricsAddress=0.0.0.0:9100",
        "--set", "config.scoring.strategy=MostAllocated",
        "--set", "image.digest=sha256:" + "a" * 64,
        "--set", "nodeSelector.role=control",
        "--set", "podDisruptionBudget.minAvailable=null",
        "--set", "podDisruptionBudget.maxUnavailable=1",
        "--set", "rbac.create=false",
        "--set", "serviceAccount.create=false",
        "--set", "serviceAccount.name=existing",
        *MONITORING,
    )  # fmt: skip
    objects = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    deployment = objects[("Deployment", "team-gangsched")]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "ghcr.io/gangsched/gangsched@sha256:" + "a" * 64
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"] == 9100
    assert pod["nodeSelector"] == {"role": "control"}
    assert pod["serviceAccountName"] == "existing"
    config = yaml.safe_load(objects[("ConfigMap", "team-gangsched-config")]["data"]["config.yaml"])
    assert config["scoring"]["strategy"] == "MostAllocated"
    assert config["leaderElection"]["leaseNamespace"] == "batch"  # follows the release
    assert objects[("Service", "team-gangsched-metrics")]["spec"]["ports"][0]["port"] == 9100
    assert objects[("PodDisruptionBudget", "team-gangsched")]["spec"] == {
        "maxUnavailable": 1,
        "selector": deployment["spec"]["selector"],
    }
    kinds = {kind for kind, _ in objects}
    assert not kinds & {"ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding"}
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds
    rules = objects[("PrometheusRule", "team-gangsched")]["spec"]["groups"]
    source = yaml.safe_load(
        (REPO_ROOT / "deploy" / "monitoring" / "prometheus-rules.yaml").read_text()
    )
    assert rules == source["groups"]  # alert templates ({{ $labels }}) passed through untouched
    dashboard = objects[("ConfigMap", "team-gangsched-grafana-dashboard")]
    assert json.loads(dashboard["data"]["gangsched.json"]) == json.loads(
        (REPO_ROOT / "deploy" / "monitoring" / "grafana-dashboard.json").read_text()
    )


def test_invalid_values_fail_with_a_clear_message(helm_offline: Helm) -> None:
    """values.schema.json (gangsched's own configuration schema for `config`) refuses bad
    values before anything reaches a cluster, naming them."""
    for args, named in (
        (["--set", "config.scorng.strategy=MostAllocated"], "scorng"),
        (["--set", "config.scoring.strategy=Packed"], "/config/scoring/strategy"),
        (["--set", "config.bindConcurrency=0"], "/config/bindConcurrency"),
        (["--set", "replicaCont=3"], "replicaCont"),
        (["--set", "serviceAccount.create=false"], "serviceAccount.name is required"),
    ):
        proc = helm_offline("template", "x", str(CHART), *args, check=False)
        assert proc.returncode != 0, args
        assert named in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------- on a cluster
STANDIN_MONITORING_CRDS = [
    ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
]


@pytest.fixture
def monitoring_crds(cluster: Cluster, tmp_path: Path) -> Iterator[None]:
    """The Prometheus Operator's two kinds, schema-less (the Operator is not installed here):
    enough for the API server to accept or refuse the objects' metadata and kinds."""
    docs = [
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
        for group, kind, plural in STANDIN_MONITORING_CRDS
    ]
    path = tmp_path / "monitoring-crds.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    existed = cluster.kubectl("get", "crd", "servicemonitors.monitoring.coreos.com", check=False)
    cluster.kubectl("apply", "-f", str(path))
    cluster.kubectl("wait", "--for", "condition=Established", "--timeout=60s", "-f", str(path))
    try:
        yield
    finally:
        if existed.returncode != 0:
            cluster.kubectl("delete", "-f", str(path), "--wait=false", check=False)


def test_rendered_chart_passes_server_side_dry_run(
    helm: Helm, cluster: Cluster, monitoring_crds: None, tmp_path: Path
) -> None:
    namespace = unique_name("helm-dry")
    cluster.kubectl("create", "namespace", namespace)
    try:
        rendered = helm(
            "template", "dry", str(CHART), "--namespace", namespace, "--include-crds", *MONITORING
        ).stdout
        path = tmp_path / "rendered.yaml"
        path.write_text(rendered)
        proc = cluster.kubectl(
            "apply", "--server-side", "--dry-run=server", "--namespace", namespace, "-f", str(path)
        )
        applied = [line for line in proc.stdout.splitlines() if "serverside-applied" in line]
        kinds = {d["kind"] for d in yaml.safe_load_all(rendered) if d}
        assert len(applied) == len([d for d in yaml.safe_load_all(rendered) if d]), proc.stdout
        assert {"CustomResourceDefinition", "Deployment", "ClusterRole", "ServiceMonitor"} <= kinds
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def cluster_scoped_leftovers(cluster: Cluster, release: str) -> list[str]:
    """Every cluster-scoped object (any kind the server serves) that belongs to the release."""
    kinds = cluster.kubectl(
        "api-resources", "--namespaced=false", "--verbs=list", "-o", "name"
    ).stdout.split()
    proc = cluster.kubectl("get", ",".join(kinds), "-o", "json", check=False)
    items = json.loads(proc.stdout or '{"items": []}')["items"]
    return [
        f"{item['kind']}/{item['metadata']['name']}"
        for item in items
        if release in item["metadata"]["name"]
        or (item["metadata"].get("labels") or {}).get("app.kubernetes.io/instance") == release
        or (item["metadata"].get("annotations") or {}).get("meta.helm.sh/release-name") == release
    ]


@pytest.mark.asyncio(loop_scope="session")
async def test_install_schedule_upgrade_uninstall(
    helm: Helm, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    release = unique_name("rel")
    # Its own namespace (the Lease and its Role must follow it), made by --create-namespace:
    # not part of the release, so Helm leaves it (the test deletes it).
    namespace = unique_name("helm-ns")
    fullname = f"{release}-gangsched"
    helm("install", release, str(CHART), "--namespace", namespace, "--create-namespace")
    try:
        status = json.loads(helm("status", release, "-n", namespace, "-o", "json").stdout)
        assert status["info"]["status"] == "deployed" and status["version"] == 1
        deployment = await kube.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{fullname}")
        assert deployment["spec"]["replicas"] == 2
        role = await kube.get(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{fullname}-leader-election"
        )
        assert role["rules"][0]["resources"] == ["leases"]
        for crd in (REPO_ROOT / "crds").glob("*.yaml"):
            name = yaml.safe_load(crd.read_text())["metadata"]["name"]
            await kube.wait_crd_established(name)

        # A scheduling run with the release's configuration and identity.
        config = await release_config(kube, namespace, fullname)
        assert config["leaderElection"]["leaseNamespace"] == namespace
        replica = Replica(
            cluster,
            f"{fullname}-0",
            tmp_path,
            config,
            service_account=fullname,
            service_account_namespace=namespace,
        )
        try:
            replica.start()
            await replica.wait_ready()

            def alive() -> None:
                assert replica.alive, f"gangsched exited:\n{replica.tail()}"

            await replay_seed_walkthrough(cluster, kube, workdir=tmp_path, alive=alive)
            lease = await kube.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/gangsched"
            )
            assert lease["spec"]["holderIdentity"] == replica.name
            assert "missing RBAC permission" not in replica.text(), replica.tail()
        finally:
            assert await replica.stop() == 0, replica.tail()

        # Upgrade with a changed value: the new configuration is installed, the pods would roll.
        before = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        helm(
            "upgrade", release, str(CHART), "--namespace", namespace, "--reuse-values",
            "--set", "config.scoring.strategy=MostAllocated", "--set", "replicaCount=1",
        )  # fmt: skip
        status = json.loads(helm("status", release, "-n", namespace, "-o", "json").stdout)
        assert status["info"]["status"] == "deployed" and status["version"] == 2
        deployment = await kube.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{fullname}")
        assert deployment["spec"]["replicas"] == 1
        after = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        assert after != before, "a changed configuration must roll the pods"
        config = await release_config(kube, namespace, fullname)
        assert config["scoring"]["strategy"] == "MostAllocated"
        await packs_two_pods_on_one_node(
            cluster,
            kube=kube,
            workdir=tmp_path,
            config=config,
            fullname=fullname,
            namespace=namespace,
        )
    finally:
        helm("uninstall", release, "--namespace", namespace)
    # Helm's rule: nothing of the release is left but the CRDs (never deleted by Helm).
    assert cluster_scoped_leftovers(cluster, release) == []
    for crd in (REPO_ROOT / "crds").glob("*.yaml"):
        name = yaml.safe_load(crd.read_text())["metadata"]["name"]
        assert await kube.get_or_none(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        ), f"CRD {name} was deleted"
    # `helm uninstall` deletes the Deployment with background propagation: the garbage
    # collector removes its ReplicaSets and their (Pending) pods afterwards, so wait for it.
    left: list[str] = []

    def nothing_left() -> bool:
        left[:] = cluster.kubectl(
            "get", "all,configmaps,serviceaccounts,roles,rolebindings,poddisruptionbudgets",
            "-n", namespace, "-l", f"app.kubernetes.io/instance={release}", "-o", "name",
        ).stdout.split()  # fmt: skip
        return not left

    try:
        await eventually(nothing_left, timeout=90, what="the release's namespaced objects gone")
    except AssertionError:
        raise AssertionError(f"left after uninstall: {left}") from None
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


async def release_config(kube: Kube, namespace: str, fullname: str) -> dict[str, Any]:
    """The release's configuration file as installed, listening on free loopback ports."""
    config_map = await kube.get(f"/api/v1/namespaces/{namespace}/configmaps/{fullname}-config")
    config: dict[str, Any] = yaml.safe_load(config_map["data"]["config.yaml"])
    metrics, health = free_ports(2)
    config["metricsAddress"] = f"127.0.0.1:{metrics}"
    config["healthAddress"] = f"127.0.0.1:{health}"
    return config


async def packs_two_pods_on_one_node(
    cluster: Cluster,
    *,
    kube: Kube,
    workdir: Path,
    config: dict[str, Any],
    fullname: str,
    namespace: str,
) -> None:
    """MostAllocated (the upgraded value) puts two 1-CPU pods on one of two empty nodes, where
    the default LeastAllocated spreads them."""
    run = unique_name("pack")
    await kube.create("/api/v1/namespaces", {"metadata": {"name": run}})
    nodes = [f"{run}-n{i}" for i in range(2)]
    replica = Replica(
        cluster,
        f"{fullname}-upgraded",
        workdir,
        config,
        service_account=fullname,
        service_account_namespace=namespace,
    )
    try:
        for node in nodes:
            await kube.create("/api/v1/nodes", fake_node(node, cpu="4", labels={"e2e-test": run}))
        for node in nodes:
            await kube.wait_for_object(
                f"/api/v1/nodes/{node}",
                lambda n: (condition(n, "Ready") or {}).get("status") == "True",
                timeout=90,
                what=f"node {node} Ready",
            )
        replica.start()
        await replica.wait_ready()
        for i in range(2):
            await kube.create(
                f"/api/v1/namespaces/{run}/pods",
                pod_manifest(
                    f"p{i}",
                    namespace=run,
                    cpu="1",
                    extra_spec={"nodeSelector": {"e2e-test": run}},
                ),
            )

            async def bound(name: str = f"p{i}") -> str:
                assert replica.alive, replica.tail()
                pod = await kube.get(f"/api/v1/namespaces/{run}/pods/{name}")
                return str(pod["spec"].get("nodeName") or "")

            await wait_for(bound, timeout=60, what=f"p{i} bound")
        pods = (await kube.get(f"/api/v1/namespaces/{run}/pods"))["items"]
        placed = {p["spec"]["nodeName"] for p in pods}
        assert len(placed) == 1, f"MostAllocated should pack: {placed}"
    finally:
        await replica.stop()
        await kube.delete(f"/api/v1/namespaces/{run}/pods", grace_period_seconds=0)
        for node in nodes:
            await kube.delete(f"/api/v1/nodes/{node}")
        await kube.delete(f"/api/v1/namespaces/{run}")
