"""The test-side CSI provisioner (tests/e2e/csi_provisioner.py) with the real PV controller.

The test plays the scheduler (it writes `volume.kubernetes.io/selected-node`, as kube-scheduler's
VolumeBinding does); kube-controller-manager's persistent-volume controller hands the claim to
the provisioner, which creates a PV pinned to that node, and the PV controller binds the claim
for real. A provisioner told to fail removes `selected-node`, as external-provisioner does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .csi_provisioner import SELECTED_NODE, STORAGE_PROVISIONER, CsiProvisioner
from .harness import eventually
from .k8s import JSON, Kube, unique_name, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


@pytest.fixture
async def provisioner(kube: Kube) -> AsyncIterator[CsiProvisioner]:
    async with CsiProvisioner(kube, driver=f"{unique_name('csi')}.gangsched.test") as running:
        yield running


def claim(name: str, storage_class: str, size: str = "2Gi") -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


async def setup(kube: Kube, provisioner: CsiProvisioner) -> tuple[str, str, list[str]]:
    namespace = unique_name("csi")
    await kube.create_namespace(namespace, {})
    storage_class = unique_name("wffc")
    await kube.create(CLASSES, provisioner.storage_class(storage_class))
    nodes = sorted(n["metadata"]["name"] for n in await kube.ready_nodes())
    assert len(nodes) >= 2, nodes
    return namespace, storage_class, nodes


async def select_node(kube: Kube, path: str, node: str) -> None:
    await kube.patch(path, {"metadata": {"annotations": {SELECTED_NODE: node}}})


async def test_provisions_on_the_selected_node_and_the_pv_controller_binds(
    kube: Kube, provisioner: CsiProvisioner
) -> None:
    namespace, storage_class, nodes = await setup(kube, provisioner)
    base = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    created = await kube.create(base, claim("data", storage_class))
    path = f"{base}/data"
    # WaitForFirstConsumer: nothing happens until a node is selected.
    pending = await kube.get(path)
    assert pending["status"].get("phase") == "Pending" and not pending["spec"].get("volumeName")
    assert provisioner.provisioned == {}

    await select_node(kube, path, nodes[1])
    bound = await kube.wait_for_object(
        path,
        lambda c: c.get("status", {}).get("phase") == "Bound",
        timeout=60,
        what="the claim Bound by the PV controller",
    )
    uid = created["metadata"]["uid"]
    annotations = bound["metadata"]["annotations"]
    # The PV controller handed it to this driver and completed the binding itself.
    assert annotations[STORAGE_PROVISIONER] == provisioner.driver
    assert annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert bound["spec"]["volumeName"] == f"pvc-{uid}"
    assert bound["status"]["capacity"]["storage"] == "2Gi"
    volume = await kube.get(f"/api/v1/persistentvolumes/pvc-{uid}")
    assert volume["status"]["phase"] == "Bound"
    assert volume["spec"]["claimRef"]["uid"] == uid
    terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes[1]]}
            ]
        }
    ]
    # The provisioner records what it did after the API server answered it, so the cluster
    # can show the result before the record is there: wait for the records too.
    await eventually(lambda: provisioner.provisioned, timeout=30, what="the provision recorded")
    assert provisioner.provisioned == {f"{namespace}/data": nodes[1]}

    # Deleting the claim releases the volume (pvc-protection lets it go: no pod uses it)
    # and the provisioner deletes it, as reclaimPolicy Delete asks.
    await kube.delete(path)
    await kube.wait_gone(path, timeout=60)
    await kube.wait_gone(f"/api/v1/persistentvolumes/pvc-{uid}", timeout=60)
    await eventually(lambda: provisioner.reclaimed, timeout=30, what="the reclaim recorded")
    assert provisioner.reclaimed == [f"pvc-{uid}"]


async def test_a_failing_provisioner_removes_selected_node_and_provisions_elsewhere(
    kube: Kube, provisioner: CsiProvisioner
) -> None:
    namespace, storage_class, nodes = await setup(kube, provisioner)
    base = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    created = await kube.create(base, claim("scratch", storage_class))
    path = f"{base}/scratch"
    provisioner.fail_nodes = {nodes[0]}
    await select_node(kube, path, nodes[0])
    await kube.wait_for_object(
        path,
        lambda c: SELECTED_NODE not in (c["metadata"].get("annotations") or {}),
        timeout=60,
        what="selected-node removed by the failing provisioner",
    )
    await eventually(lambda: provisioner.failures, timeout=30, what="the failure recorded")
    assert provisioner.failures == [(f"{namespace}/scratch", nodes[0])]
    assert provisioner.provisioned == {}
    uid = created["metadata"]["uid"]
    assert await kube.get_or_none(f"/api/v1/persistentvolumes/pvc-{uid}") is None

    async def failed_event() -> bool:
        events = await kube.get(
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            fieldSelector="reason=ProvisioningFailed",
        )
        return any(e["regarding"]["name"] == "scratch" for e in events["items"])

    await wait_for(failed_event, timeout=60, what="a ProvisioningFailed event on the claim")

    # The scheduler's retry on another node succeeds.
    await select_node(kube, path, nodes[1])
    bound = await kube.wait_for_object(
        path,
        lambda c: c.get("status", {}).get("phase") == "Bound",
        timeout=60,
        what="the claim Bound after the retry",
    )
    assert bound["spec"]["volumeName"] == f"pvc-{uid}"
    await eventually(lambda: provisioner.provisioned, timeout=30, what="the provision recorded")
    assert provisioner.provisioned == {f"{namespace}/scratch": nodes[1]}
    await kube.delete(f"/api/v1/namespaces/{namespace}")
