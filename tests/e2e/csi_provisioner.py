"""A test-side CSI provisioner: plays external-provisioner for one driver name.

The local control plane has kube-controller-manager's persistent-volume controller but no CSI
driver. This stands in for the driver's external-provisioner sidecar so that dynamic
provisioning with `WaitForFirstConsumer` runs end to end against the real PV controller:

1. a scheduler (gangsched, or a test) writes `volume.kubernetes.io/selected-node` on a
   pending PVC of a StorageClass whose provisioner is this driver;
2. the PV controller sees it and hands the claim to the external provisioner by setting
   `volume.kubernetes.io/storage-provisioner: <driver>` on the PVC;
3. this provisioner creates a PersistentVolume for the claim: `pvc-<claim uid>`, the
   claim's size, access modes and volume mode, the class's reclaim policy, a CSI source of this
   driver, `spec.nodeAffinity` pinning it to the selected node (label `topology_key`) and
   `spec.claimRef` naming the claim with its uid;
4. the PV controller binds the claim to it for real (`spec.volumeName`,
   `pv.kubernetes.io/bind-completed`, phase Bound): nothing here writes the claim's binding.

Told to fail (`fail_nodes`, `fail_all`), it does what external-provisioner does when
provisioning on the selected node fails: removes `selected-node` from the claim (the signal
that makes a scheduler reschedule: kube-scheduler's VolumeBinding unreserves) and posts a
`ProvisioningFailed` warning event on it. Like external-provisioner it deletes the volumes it
provisioned once they are Released and their reclaim policy is Delete.

Polling (every `interval` seconds) rather than a watch keeps it small; usage:

    async with CsiProvisioner(kube, driver="csi.gangsched.test") as provisioner:
        wffc = provisioner.storage_class("wffc")
        await kube.create("/apis/storage.k8s.io/v1/storageclasses", wffc)
        ...
        provisioner.fail_nodes = {"kwok-node-1"}   # provisioning on that node now fails
        provisioner.provisioned                    # {"ns/pvc": "node"} so far
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .k8s import JSON, Kube, KubeError

SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
PVCS = "/api/v1/persistentvolumeclaims"
PVS = "/api/v1/persistentvolumes"


@dataclass
class CsiProvisioner:
    kube: Kube
    driver: str = "csi.gangsched.test"
    #: The node label the provisioned volumes' node affinity uses (CSI drivers publish their
    #: own topology key; the hostname label works on every kwok node).
    topology_key: str = "kubernetes.io/hostname"
    interval: float = 0.2
    #: Provisioning on these nodes fails (selected-node is removed from the claim).
    fail_nodes: set[str] = field(default_factory=set)
    #: Every provisioning fails.
    fail_all: bool = False
    #: "namespace/claim" -> node, for every volume provisioned.
    provisioned: dict[str, str] = field(default_factory=dict)
    #: ("namespace/claim", node) for every failed attempt, in order.
    failures: list[tuple[str, str]] = field(default_factory=list)
    #: Names of the PersistentVolumes deleted after their claim went (reclaim policy Delete).
    reclaimed: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _errors: list[BaseException] = field(default_factory=list)

    # ------------------------------------------------------------------ objects for tests
    def storage_class(
        self,
        name: str,
        *,
        binding_mode: str = "WaitForFirstConsumer",
        reclaim_policy: str = "Delete",
        allowed_nodes: list[str] | None = None,
    ) -> JSON:
        """A StorageClass provisioned by this driver (optionally `allowedTopologies`
        restricted to some nodes by `topology_key`)."""
        body: JSON = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": self.driver,
            "volumeBindingMode": binding_mode,
            "reclaimPolicy": reclaim_policy,
        }
        if allowed_nodes is not None:
            body["allowedTopologies"] = [
                {"matchLabelExpressions": [{"key": self.topology_key, "values": allowed_nodes}]}
            ]
        return body

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> CsiProvisioner:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop polling; raise what went wrong in the loop, if anything did."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._errors:
            raise AssertionError(f"the CSI provisioner failed: {self._errors[0]!r}")

    async def _run(self) -> None:
        while True:
            try:
                await self.sync_once()
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                if exc.status >= 500 or exc.status == 429:  # API server busy: next round
                    await asyncio.sleep(self.interval)
                    continue
                self._errors.append(exc)
                return
            except Exception as exc:  # reported by stop(), never silently lost
                self._errors.append(exc)
                return
            await asyncio.sleep(self.interval)

    # ------------------------------------------------------------------ one round
    async def sync_once(self) -> None:
        claims = (await self.kube.get(PVCS))["items"]
        volumes = (await self.kube.get(PVS))["items"]
        mine = {v["metadata"]["name"]: v for v in volumes if self._provisioned_by_me(v)}
        for claim in claims:
            if self._wants_provisioning(claim):
                await self._provision(claim, mine)
        for volume in mine.values():
            await self._reclaim(volume)

    def _provisioned_by_me(self, volume: Mapping[str, Any]) -> bool:
        annotations = volume["metadata"].get("annotations") or {}
        return bool(annotations.get(PROVISIONED_BY) == self.driver)

    def _wants_provisioning(self, claim: Mapping[str, Any]) -> bool:
        """Handed to this driver by the PV controller, a node selected, not bound yet."""
        meta, spec = claim["metadata"], claim.get("spec") or {}
        annotations = meta.get("annotations") or {}
        handed = self.driver in (
            annotations.get(STORAGE_PROVISIONER),
            annotations.get(BETA_STORAGE_PROVISIONER),
        )
        return (
            handed
            and bool(annotations.get(SELECTED_NODE))
            and not spec.get("volumeName")
            and meta.get("deletionTimestamp") is None
            and (claim.get("status") or {}).get("phase", "Pending") == "Pending"
        )

    async def _provision(self, claim: Mapping[str, Any], mine: dict[str, JSON]) -> None:
        meta, spec = claim["metadata"], claim.get("spec") or {}
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        key = f"{namespace}/{name}"
        node = meta["annotations"][SELECTED_NODE]
        pv_name = f"pvc-{uid}"
        if pv_name in mine:
            return  # provisioned already; the PV controller has not bound it yet
        if self.fail_all or node in self.fail_nodes:
            await self._fail(claim, node, "provisioning on this node is failing (told to)")
            return
        class_name = spec.get("storageClassName") or ""
        storage_class = await self.kube.get_or_none(
            f"/apis/storage.k8s.io/v1/storageclasses/{class_name}"
        )
        if storage_class is None:
            await self._fail(claim, node, f'storageclass "{class_name}" not found')
            return
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        volume: JSON = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv_name, "annotations": {PROVISIONED_BY: self.driver}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                "storageClassName": class_name,
                "csi": {"driver": self.driver, "volumeHandle": pv_name},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": namespace,
                    "name": name,
                    "uid": uid,
                },
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": self.topology_key, "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
        try:
            await self.kube.create(PVS, volume)
        except KubeError as exc:
            if exc.status != 409:  # 409: created in an earlier round
                raise
        self.provisioned[key] = node

    async def _fail(self, claim: Mapping[str, Any], node: str, why: str) -> None:
        """external-provisioner's reschedule: drop selected-node, say why on the claim."""
        meta = claim["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        path = f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}"
        try:
            await self.kube.patch(
                path,
                {
                    "metadata": {
                        "resourceVersion": meta["resourceVersion"],
                        "annotations": {SELECTED_NODE: None},
                    }
                },
            )
        except KubeError as exc:
            if exc.status in (404, 409):  # gone or changed: looked at again next round
                return
            raise
        self.failures.append((key, node))
        now = datetime.now(UTC)
        await self.kube.create(
            f"/apis/events.k8s.io/v1/namespaces/{meta['namespace']}/events",
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{time.time_ns():x}"},
                "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "reportingController": self.driver,
                "reportingInstance": f"{self.driver}-test-provisioner",
                "action": "Provisioning",
                "reason": "ProvisioningFailed",
                "type": "Warning",
                "note": f"failed to provision volume on node {node}: {why}",
                "regarding": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        )

    async def _reclaim(self, volume: Mapping[str, Any]) -> None:
        spec, status = volume.get("spec") or {}, volume.get("status") or {}
        if status.get("phase") != "Released":
            return
        if spec.get("persistentVolumeReclaimPolicy", "Delete") != "Delete":
            return
        name = volume["metadata"]["name"]
        await self.kube.delete(f"{PVS}/{name}")
        self.reclaimed.append(name)
