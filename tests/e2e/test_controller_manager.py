"""kube-controller-manager in the local control plane (issue 12 section 4): the controllers a
real cluster runs for what gangsched relies on do their work here, on kwok nodes.

Each check waits on what only that controller writes: the garbage collector deleting a
dependent, the namespace controller emptying a deleted namespace, the disruption controller's
PDB status, the PodGroup protection finalizer (added by the admission plugin, removed by the
controller once no pod uses the group), the ephemeral-volume controller's `<pod>-<volume>`
claim and the resourceclaim controller's claim from a template.
"""

from __future__ import annotations

import pytest

from .conftest import Cluster
from .k8s import JSON, Kube, pod_manifest, unique_name

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

UPSTREAM = "scheduling.k8s.io/v1beta1"
PROTECTION = "scheduling.k8s.io/podgroup-protection"


async def namespace(kube: Kube) -> str:
    name = unique_name("kcm")
    await kube.create_namespace(name, {})
    return name


async def bind_pod(kube: Kube, ns: str, node: str, name: str, **kwargs: object) -> JSON:
    pod = await kube.create(
        f"/api/v1/namespaces/{ns}/pods",
        pod_manifest(name, namespace=ns, scheduler_name="nobody", **kwargs),  # type: ignore[arg-type]
    )
    await kube.bind(ns, name, node, uid=pod["metadata"]["uid"])
    return pod


async def first_node(kube: Kube) -> str:
    nodes: list[str] = sorted(n["metadata"]["name"] for n in await kube.ready_nodes())
    assert nodes
    return nodes[0]


async def test_it_runs_as_cluster_up_started_it(cluster: Cluster) -> None:
    assert cluster.env.get("KCM") == "1"
    pid_file = cluster.dir / "pids" / "kube-controller-manager.pid"
    assert pid_file.read_text().strip().isdigit()
    status = cluster.run_script("cluster-status.sh")
    assert "kube-controller-manager: running" in status.stderr, status.stderr


async def test_garbage_collector_and_namespace_controller(kube: Kube) -> None:
    ns = await namespace(kube)
    owner = await kube.create(
        f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "owner"}, "data": {}}
    )
    dependent = {
        "metadata": {
            "name": "dependent",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                }
            ],
        },
        "data": {},
    }
    await kube.create(f"/api/v1/namespaces/{ns}/configmaps", dependent)
    await kube.delete(f"/api/v1/namespaces/{ns}/configmaps/owner")
    await kube.wait_gone(f"/api/v1/namespaces/{ns}/configmaps/dependent", timeout=60)
    # The serviceaccount controller gives the namespace its default account.
    await kube.wait_for_object(
        f"/api/v1/namespaces/{ns}/serviceaccounts/default", lambda _: True, timeout=60
    )
    await kube.delete(f"/api/v1/namespaces/{ns}")
    await kube.wait_gone(f"/api/v1/namespaces/{ns}", timeout=120)


async def test_disruption_controller_reports_pdb_status(kube: Kube) -> None:
    ns = await namespace(kube)
    node = await first_node(kube)
    for i in range(3):
        await bind_pod(kube, ns, node, f"web-{i}", labels={"app": "web"})
    await kube.create(
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    pdb = await kube.wait_for_object(
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web",
        lambda p: p.get("status", {}).get("currentHealthy") == 3,
        timeout=90,
        what="the disruption controller's PDB status",
    )
    assert pdb["status"]["disruptionsAllowed"] == 1
    assert pdb["status"]["expectedPods"] == 3
    await kube.delete(f"/api/v1/namespaces/{ns}")


async def test_podgroup_protection_keeps_a_group_while_pods_use_it(kube: Kube) -> None:
    ns = await namespace(kube)
    node = await first_node(kube)
    path = await kube.path_for(UPSTREAM, "PodGroup", ns)
    group = await kube.create(
        path,
        {
            "apiVersion": UPSTREAM,
            "kind": "PodGroup",
            "metadata": {"name": "job"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
        },
    )
    assert PROTECTION in group["metadata"].get("finalizers", [])  # the admission plugin
    await bind_pod(kube, ns, node, "job-0", extra_spec={"schedulingGroup": {"podGroupName": "job"}})
    await kube.delete(f"{path}/job")
    kept = await kube.get(f"{path}/job")
    assert kept["metadata"].get("deletionTimestamp"), "still used by job-0: kept"
    await kube.delete(f"/api/v1/namespaces/{ns}/pods/job-0", grace_period_seconds=0)
    await kube.wait_gone(f"{path}/job", timeout=90)  # the controller removed the finalizer
    await kube.delete(f"/api/v1/namespaces/{ns}")


async def test_ephemeral_volume_and_resource_claim_controllers(kube: Kube) -> None:
    ns = await namespace(kube)
    await kube.create(
        f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
        {
            "metadata": {"name": "one-gpu"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
                        ]
                    }
                }
            },
        },
    )
    extra = {
        "volumes": [
            {
                "name": "scratch",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        }
                    }
                },
            }
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
    }
    pod = await kube.create(
        f"/api/v1/namespaces/{ns}/pods",
        pod_manifest("trainer", namespace=ns, scheduler_name="nobody", extra_spec=extra),
    )
    uid = pod["metadata"]["uid"]
    claim = await kube.wait_for_object(
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims/trainer-scratch",
        lambda _: True,
        timeout=60,
        what="the ephemeral-volume controller's claim",
    )
    assert claim["metadata"]["ownerReferences"][0]["uid"] == uid
    pod = await kube.wait_for_object(
        f"/api/v1/namespaces/{ns}/pods/trainer",
        lambda p: bool(p.get("status", {}).get("resourceClaimStatuses")),
        timeout=60,
        what="the resourceclaim controller's claim named in the pod status",
    )
    (status,) = pod["status"]["resourceClaimStatuses"]
    generated = await kube.get(
        f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{status['resourceClaimName']}"
    )
    assert generated["metadata"]["ownerReferences"][0]["uid"] == uid
    assert generated["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    await kube.delete(f"/api/v1/namespaces/{ns}")
