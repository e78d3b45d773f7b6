"""A test-side dynamic provisioner: plays a CSI driver's external-provisioner on the local
control plane (no CSI driver runs on kwok nodes).

It polls the PVCs of its StorageClass that carry `volume.kubernetes.io/selected-node` and
creates, for each, a PV of the claim's size with node affinity to the selected node's
hostname and a claimRef (with uid) to the claim, as external-provisioner does; the real PV
controller in kube-controller-manager then binds the claim. Told to fail, it does what
external-provisioner does on a provisioning failure that needs another node: it removes the
selected-node annotation (and counts the attempt).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from .k8s import JSON, Kube, KubeError

SELECTED_NODE = "volume.kubernetes.io/selected-node"


@dataclass
class Provisioner:
    kube: Kube
    namespace: str
    storage_class: str
    driver: str
    fail: bool = False
    #: Claims provisioned (claim name -> node) and failed attempts (claim name -> count).
    provisioned: dict[str, str] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Provisioner:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                claims = await self.kube.get(
                    f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims"
                )
                for claim in claims["items"]:
                    await self._handle(claim)
            except Exception as exc:  # cancellation (a BaseException) still ends it
                # One failed request (a slow API server) must not end the provisioner
                # silently: the test would then wait for a volume that never comes.
                print(f"test provisioner: {exc!r}; retrying")
            await asyncio.sleep(0.2)

    async def _handle(self, claim: JSON) -> None:
        meta, spec = claim["metadata"], claim["spec"]
        node = (meta.get("annotations") or {}).get(SELECTED_NODE)
        if spec.get("storageClassName") != self.storage_class or not node:
            return
        if spec.get("volumeName") or meta["name"] in self.provisioned:
            return
        path = f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims/{meta['name']}"
        if self.fail:
            self.failures[meta["name"]] = self.failures.get(meta["name"], 0) + 1
            with contextlib.suppress(KubeError):
                await self.kube.patch(path, {"metadata": {"annotations": {SELECTED_NODE: None}}})
            return
        size = spec["resources"]["requests"]["storage"]
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"pvc-{meta['uid']}",
                "annotations": {"pv.kubernetes.io/provisioned-by": self.driver},
            },
            "spec": {
                "capacity": {"storage": size},
                "accessModes": spec["accessModes"],
                "storageClassName": self.storage_class,
                "persistentVolumeReclaimPolicy": "Delete",
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": self.namespace,
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "csi": {"driver": self.driver, "volumeHandle": f"vol-{meta['uid']}"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": [node],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        }
        try:
            await self.kube.create("/api/v1/persistentvolumes", volume)
        except KubeError as exc:
            if exc.status != 409:
                raise
        self.provisioned[meta["name"]] = node
