"""NodeVolumeLimits: a CSI driver attaches at most CSINode `allocatable.count` volumes per node.

kube-scheduler's CSI limits plugin: per driver, the unique volumes (driver and volume handle)
of the pods on the node plus the new pod's must stay within the count its CSINode reports.
A bound claim counts through its PV's `spec.csi`; an unbound one through its class's
provisioner, as a volume of its own. Pods placed earlier in the cycle (other gang members)
are on their nodes already, so the gang's own volumes count too. Unschedulable, not
unresolvable: evicting pods detaches their volumes.
"""

from __future__ import annotations

from gangsched.core.framework import PodContext
from gangsched.core.model import Pod
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code
from gangsched.core.volumes.binding import pod_claims
from gangsched.core.volumes.book import ClaimSet, VolumeBook, claim_key, volume_book
from gangsched.core.volumes.model import PersistentVolumeClaim

REASON = "node(s) exceed max volume count"
_VOLUMES = "volumes.attachable"


def attachable(book: VolumeBook, claim: PersistentVolumeClaim) -> tuple[str, str] | None:
    """(driver, unique volume id) the claim attaches on a node, or None (not CSI)."""
    if claim.is_bound:
        volume = book.volumes.get(claim.volume_name)
        if volume is None or not volume.csi_driver:
            return None
        return volume.csi_driver, volume.volume_handle or volume.name
    storage_class = book.storage_class(claim)
    if storage_class is None or not storage_class.can_provision:
        return None
    return storage_class.provisioner, claim.key


def pod_volumes(book: VolumeBook, pod: Pod) -> set[tuple[str, str]]:
    out = set()
    for volume in pod.volume_claims:
        claim = book.claims.get(claim_key(pod, volume))
        if claim is not None:
            unique = attachable(book, claim)
            if unique is not None:
                out.add(unique)
    return out


def _new_volumes(ctx: PodContext, snap: Snapshot) -> set[tuple[str, str]]:
    cached = ctx.extra.get(_VOLUMES)
    if cached is None:
        claims = pod_claims(ctx, snap)
        found: set[tuple[str, str]] = set()
        if isinstance(claims, ClaimSet):
            for claim in claims.claims:
                unique = attachable(volume_book(snap), claim)
                if unique is not None:
                    found.add(unique)
        ctx.extra[_VOLUMES] = cached = found
    assert isinstance(cached, set)
    return cached


def _exceeds(ctx: PodContext, snap: Snapshot, node: int) -> bool:
    book = volume_book(snap)
    csi_node = book.csi_nodes.get(snap.nodes[node].name)
    if csi_node is None:
        return False
    new = _new_volumes(ctx, snap)
    drivers = {driver for driver, _ in new}
    limits = {driver: csi_node.limit(driver) for driver in drivers}
    if all(limit is None for limit in limits.values()):
        return False
    in_use: set[tuple[str, str]] = set()
    for pod in snap.node_pods[node].values():
        if pod.volume_claims and pod.key != ctx.pod.key:
            in_use |= pod_volumes(book, pod)
    total = in_use | new
    for driver, limit in limits.items():
        if limit is not None and sum(1 for d, _ in total if d == driver) > limit:
            return True
    return False


class NodeVolumeLimits:
    name = "NodeVolumeLimits"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return (
            bool(ctx.pod.volume_claims)
            and bool(volume_book(snap).csi_nodes)
            and bool(_new_volumes(ctx, snap))
        )

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        out = candidates.copy()
        book = volume_book(snap)
        for name in book.csi_nodes:
            index = snap.index.get(name)
            if index is not None and out[index] and _exceeds(ctx, snap, index):
                out[index] = False
        return out

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNSCHEDULABLE)]
