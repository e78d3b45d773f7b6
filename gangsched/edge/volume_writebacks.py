"""Volume write-backs for the pre-bind stage: kube-scheduler's VolumeBinding PreBind, per gang.

- `ClaimRefWrite` (a static PV chosen): set the PV's `spec.claimRef` to the claim, guarded by
  the PV's resourceVersion so a PV that changed since the cycle (taken by someone else) is
  refused with 409 instead of overwritten. The PV controller then binds the claim.
- `SelectedNodeWrite` (dynamic provisioning): annotate the claim with
  `volume.kubernetes.io/selected-node`; the provisioner creates a PV for that node and the PV
  controller binds it. A provisioner that cannot provision removes the annotation: failure.

Both are confirmed when the claim is fully bound (`spec.volumeName` and the
`pv.kubernetes.io/bind-completed` annotation, as kube-scheduler's checkBindings), read from
the informer caches. Undo takes back what the PV controller has not acted on yet: a claimRef
on a PV whose claim is still unbound, a selected-node on a claim still unbound.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import BindVolume, SelectNode
from gangsched.core.volumes.book import volume_book
from gangsched.core.volumes.model import ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE
from gangsched.edge.kube import Kube, KubeError
from gangsched.edge.prebind import CONFIRMED, PENDING, Check, WriteBack, failed


def claim_path(key: str) -> str:
    namespace, _, name = key.partition("/")
    return f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"


def volume_path(name: str) -> str:
    return f"/api/v1/persistentvolumes/{name}"


@dataclass
class ClaimRefWrite:
    decision: BindVolume
    cluster: ClusterState

    @property
    def target(self) -> str:
        return f"PersistentVolume {self.decision.volume} (claim {self.decision.claim})"

    @property
    def plugin(self) -> str:
        return "VolumeBinding"

    def forget(self) -> None:
        volume_book(self.cluster.snapshot).forget(self.decision.claim)

    async def write(self, kube: Kube) -> None:
        d = self.decision
        book = volume_book(self.cluster.snapshot)
        book.seen_claim_ref.pop(d.volume, None)
        volume = book.volumes.get(d.volume)
        if volume is not None and volume.claim_ref is not None and volume.claim_ref.key == d.claim:
            book.seen_claim_ref[d.volume] = d.claim
            return  # written before (a retry, or before a restart)
        namespace, _, name = d.claim.partition("/")
        metadata: dict[str, object] = {"annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}}
        if d.volume_resource_version:
            metadata["resourceVersion"] = d.volume_resource_version
        await kube.patch(
            volume_path(d.volume),
            {
                "metadata": metadata,
                "spec": {
                    "claimRef": {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "namespace": namespace,
                        "name": name,
                        "uid": d.claim_uid,
                    }
                },
            },
        )

    def check(self) -> Check:
        book = volume_book(self.cluster.snapshot)
        claim = book.claims.get(self.decision.claim)
        if claim is None or claim.uid != self.decision.claim_uid:
            return failed(f"PersistentVolumeClaim {self.decision.claim} was deleted")
        if claim.is_bound:
            if claim.volume_name != self.decision.volume:
                return failed(
                    f"PersistentVolumeClaim {claim.key} was bound to {claim.volume_name}, "
                    f"not {self.decision.volume}"
                )
            return CONFIRMED
        volume = book.volumes.get(self.decision.volume)
        if volume is None:
            return failed(f"PersistentVolume {self.decision.volume} was deleted")
        seen = book.seen_claim_ref.get(volume.name) == claim.key
        if volume.claim_ref is not None and volume.claim_ref.key == claim.key:
            pass
        elif seen:
            return failed(f"PersistentVolume {volume.name}: ClaimRef got reset")
        elif volume.claim_ref is not None:
            return failed(f"PersistentVolume {volume.name} was taken by {volume.claim_ref.key}")
        return PENDING

    async def undo(self, kube: Kube) -> None:
        book = volume_book(self.cluster.snapshot)
        book.forget(self.decision.claim)
        claim = book.claims.get(self.decision.claim)
        volume = book.volumes.get(self.decision.volume)
        if claim is not None and claim.is_bound:
            return  # the PV controller finished: the claim keeps its volume
        if (
            volume is None
            or volume.claim_ref is None
            or volume.claim_ref.key != self.decision.claim
        ):
            return
        body: dict[str, object] = {"spec": {"claimRef": None}}
        if volume.resource_version:
            body["metadata"] = {"resourceVersion": volume.resource_version}
        # Refused when changed meanwhile (bound, or someone else's): the PV controller's.
        with contextlib.suppress(KubeError):
            await kube.patch(volume_path(volume.name), body)


@dataclass
class SelectedNodeWrite:
    decision: SelectNode
    cluster: ClusterState

    @property
    def target(self) -> str:
        return f"PersistentVolumeClaim {self.decision.claim} (provisioning on {self.decision.node})"

    @property
    def plugin(self) -> str:
        return "VolumeBinding"

    def forget(self) -> None:
        volume_book(self.cluster.snapshot).forget(self.decision.claim)

    async def write(self, kube: Kube) -> None:
        book = volume_book(self.cluster.snapshot)
        book.seen_selected_node.pop(self.decision.claim, None)
        claim = book.claims.get(self.decision.claim)
        if claim is not None and claim.selected_node == self.decision.node:
            book.seen_selected_node[claim.key] = claim.selected_node
            return
        await kube.patch(
            claim_path(self.decision.claim),
            {
                "metadata": {
                    "uid": self.decision.claim_uid,
                    "annotations": {ANN_SELECTED_NODE: self.decision.node},
                }
            },
        )

    def check(self) -> Check:
        book = volume_book(self.cluster.snapshot)
        claim = book.claims.get(self.decision.claim)
        if claim is None or claim.uid != self.decision.claim_uid:
            return failed(f"PersistentVolumeClaim {self.decision.claim} was deleted")
        if claim.is_bound:
            return CONFIRMED
        seen = book.seen_selected_node.get(claim.key) == self.decision.node
        if claim.selected_node == self.decision.node:
            pass
        elif seen:  # set by us, then removed or changed: the provisioner gave up
            return failed(f"provisioning failed for PVC {claim.name}")
        elif claim.selected_node:
            return failed(
                f"PersistentVolumeClaim {claim.key} is being provisioned on "
                f"{claim.selected_node}, not {self.decision.node}"
            )
        return PENDING

    async def undo(self, kube: Kube) -> None:
        book = volume_book(self.cluster.snapshot)
        book.forget(self.decision.claim)
        claim = book.claims.get(self.decision.claim)
        if claim is None or claim.is_bound or claim.selected_node != self.decision.node:
            return
        with contextlib.suppress(KubeError):  # refused when bound or changed meanwhile
            await kube.patch(
                claim_path(claim.key),
                {
                    "metadata": {
                        "uid": claim.uid,
                        "resourceVersion": claim.resource_version,
                        "annotations": {ANN_SELECTED_NODE: None},
                    }
                },
            )


def volume_write_backs(
    decisions: list[BindVolume | SelectNode], cluster: ClusterState
) -> list[WriteBack]:
    """One write-back per claim (members sharing a claim share its write)."""
    out: list[WriteBack] = []
    seen: set[str] = set()
    for decision in decisions:
        if decision.claim in seen:
            continue
        seen.add(decision.claim)
        if isinstance(decision, BindVolume):
            out.append(ClaimRefWrite(decision, cluster))
        else:
            out.append(SelectedNodeWrite(decision, cluster))
    return out
