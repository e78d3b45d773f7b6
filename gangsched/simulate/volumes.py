"""simulate's stand-in for the PV controller and every provisioner.

A live cluster completes the scheduler's volume decisions asynchronously: the PV controller
binds a claim to the PV whose claimRef the scheduler set, and a provisioner creates a PV for a
claim annotated with the selected node. simulate does both at once, so the next cycle sees the
claims bound, exactly as the live scheduler sees them once its write-backs are confirmed.
"""

from __future__ import annotations

import dataclasses

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import BindVolume, SelectNode
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.volumes.book import volume_book
from gangsched.core.volumes.matching import HOSTNAME_LABEL
from gangsched.core.volumes.model import ClaimRef, PersistentVolume, PersistentVolumeClaim


def carry_out(decision: BindVolume | SelectNode, cluster: ClusterState) -> dict[str, str]:
    """Apply one volume decision; returns what `-o json` reports for the claim."""
    book = volume_book(cluster.snapshot)
    claim = book.claims.get(decision.claim)
    if claim is None:  # pragma: no cover - the cycle only decides claims it has
        return {}
    if isinstance(decision, BindVolume):
        volume = book.volumes[decision.volume]
        _bind(cluster, claim, volume)
        return {"volumeName": volume.name}
    claim = dataclasses.replace(claim, selected_node=decision.node)
    book.upsert_claim(claim)
    _bind(cluster, claim, _provision(cluster, claim, decision.node))
    return {"selectedNode": decision.node}


def _provision(cluster: ClusterState, claim: PersistentVolumeClaim, node: str) -> PersistentVolume:
    """What an external-provisioner creates: a PV of the claim's size and class reachable
    from the selected node (by its hostname label, as CSI topology usually is)."""
    book = volume_book(cluster.snapshot)
    storage_class = book.storage_class(claim)
    node_obj = cluster.nodes.get(node)
    hostname = node_obj.labels.get(HOSTNAME_LABEL) if node_obj is not None else None
    term = (
        NodeSelectorTerm(match_expressions=(Requirement(HOSTNAME_LABEL, "In", (hostname,)),))
        if hostname
        else NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", (node,)),))
    )
    name = f"pvc-{claim.uid}" if claim.uid else f"pvc-{claim.namespace}-{claim.name}"
    provisioner = storage_class.provisioner if storage_class is not None else ""
    volume = PersistentVolume(
        name=name,
        storage_class=storage_class.name if storage_class is not None else "",
        capacity=claim.request,
        access_modes=claim.access_modes,
        volume_mode=claim.volume_mode,
        node_affinity=(term,),
        csi_driver=provisioner,
        volume_handle=name,
    )
    book.upsert_volume(volume)
    return volume


def _bind(cluster: ClusterState, claim: PersistentVolumeClaim, volume: PersistentVolume) -> None:
    book = volume_book(cluster.snapshot)
    book.upsert_volume(
        dataclasses.replace(
            volume,
            claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid),
            phase="Bound",
        )
    )
    book.upsert_claim(
        dataclasses.replace(claim, volume_name=volume.name, bind_completed=True, phase="Bound")
    )
