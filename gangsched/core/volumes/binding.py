"""VolumeBinding: the pod's PVCs must exist, be bound or bindable on the node.

kube-scheduler's plugin in two halves. PreFilter (node-independent, `pre_filter`): every
claim exists and is not being deleted, a generic ephemeral claim is owned by its pod, and no
claim is unbound with Immediate binding. Filter (per node): a bound claim's PV must admit the
node; an unbound WaitForFirstConsumer claim needs a static PV that fits on the node or, when
its class provisions, a node the class's topology and storage capacity allow. A claim decided
earlier (by another member of the gang, or a bind in flight) is held to that decision.
Every volume failure is UnschedulableAndUnresolvable, as upstream: evicting pods frees no PV.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gangsched.core.framework import PodContext
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code
from gangsched.core.volumes.book import ClaimSet, VolumeBook, volume_book
from gangsched.core.volumes.matching import selector_mask, terms_mask, topology_mask
from gangsched.core.volumes.model import PersistentVolumeClaim, StorageClass
from gangsched.core.volumes.static_index import Shape

BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

_CLAIMS = "volumes.claims"
_MASKS = "volumes.masks"


def pod_claims(ctx: PodContext, snap: Snapshot) -> ClaimSet | str | None:
    """The pod's classified claims (or the PreFilter message), once per attempt."""
    if not ctx.pod.volume_claims:
        return None
    if _CLAIMS not in ctx.extra:
        ctx.extra[_CLAIMS] = volume_book(snap).classify(ctx.pod)
    cached = ctx.extra[_CLAIMS]
    assert isinstance(cached, ClaimSet | str)
    return cached


class VolumeBinding:
    name = "VolumeBinding"

    def pre_filter(self, ctx: PodContext, snap: Snapshot) -> str | None:
        claims = pod_claims(ctx, snap)
        return claims if isinstance(claims, str) else None

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        claims = pod_claims(ctx, snap)
        return isinstance(claims, ClaimSet) and bool(claims.bound or claims.delayed)

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        out = candidates.copy()
        for _, mask in self._masks(ctx, snap):
            out &= mask
        claims = pod_claims(ctx, snap)
        if isinstance(claims, ClaimSet):
            undecided = _undecided(snap, claims)
            if len(undecided) > 1:
                out &= _joint_mask(snap, undecided)
        return out

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        reasons = []
        for reason, mask in self._masks(ctx, snap):
            if not mask[node] and reason not in reasons:
                reasons.append(reason)
        if not reasons:
            reasons.append(BIND_CONFLICT)  # the pod's own claims compete for the node's PVs
        return [(reason, Code.UNRESOLVABLE) for reason in reasons]

    def _masks(self, ctx: PodContext, snap: Snapshot) -> list[tuple[str, BoolVector]]:
        cached = ctx.extra.get(_MASKS)
        if cached is not None:
            assert isinstance(cached, list)
            return cached
        claims = pod_claims(ctx, snap)
        masks: list[tuple[str, BoolVector]] = []
        if isinstance(claims, ClaimSet):
            for _, volume in claims.bound:
                if volume is None:
                    masks.append((PV_NOT_EXIST, np.zeros(len(snap), dtype=np.bool_)))
                else:
                    masks.append((NODE_CONFLICT, terms_mask(snap, volume.node_affinity)))
            for claim, storage_class in claims.delayed:
                masks.extend(_delayed_masks(snap, claim, storage_class))
        ctx.extra[_MASKS] = masks
        return masks


def _one_node(snap: Snapshot, name: str) -> BoolVector:
    mask = np.zeros(len(snap), dtype=np.bool_)
    index = snap.index.get(name)
    if index is not None:
        mask[index] = True
    return mask


def _delayed_masks(
    snap: Snapshot, claim: PersistentVolumeClaim, storage_class: StorageClass
) -> list[tuple[str, BoolVector]]:
    book = volume_book(snap)
    earlier = book.decision_of(claim.key)
    if earlier is not None:
        kind, value = earlier
        if kind == "volume":
            volume = book.volumes.get(value)
            if volume is None:
                return [(BIND_CONFLICT, np.zeros(len(snap), dtype=np.bool_))]
            return [(BIND_CONFLICT, terms_mask(snap, volume.node_affinity))]
        return [(BIND_CONFLICT, _one_node(snap, value))]
    topology = topology_mask(snap, storage_class)
    capacity = capacity_mask(book, snap, claim, storage_class)
    if claim.selected_node:
        # Provisioning was asked for on that node (by us, earlier): only there.
        selected = _one_node(snap, claim.selected_node)
        return [(BIND_CONFLICT, selected & topology), (NOT_ENOUGH_SPACE, ~topology | capacity)]
    static = book.static_index(snap).claim_mask(
        snap, claim, storage_class, book.assumed_volume.get(claim.key)
    )
    return [(BIND_CONFLICT, static | topology), (NOT_ENOUGH_SPACE, static | ~topology | capacity)]


def capacity_mask(
    book: VolumeBook, snap: Snapshot, claim: PersistentVolumeClaim, storage_class: StorageClass
) -> BoolVector:
    """Nodes with enough storage capacity, for drivers that publish it (a CSIStorageCapacity
    of the claim's class with room, whose nodeTopology selects the node); all otherwise."""
    driver = book.drivers.get(storage_class.provisioner)
    if driver is None or not driver.storage_capacity:
        return np.ones(len(snap), dtype=np.bool_)
    mask = np.zeros(len(snap), dtype=np.bool_)
    for capacity in book.capacities.values():
        if capacity.storage_class != storage_class.name or not capacity.fits(claim.request):
            continue
        if capacity.node_topology is not None:
            mask |= selector_mask(snap, capacity.node_topology)
    return mask


def _undecided(
    snap: Snapshot, claims: ClaimSet
) -> list[tuple[PersistentVolumeClaim, StorageClass]]:
    """Delayed claims the pod itself will decide (smallest request first, as Reserve)."""
    book = volume_book(snap)
    return sorted(
        (
            (claim, sc)
            for claim, sc in claims.delayed
            if book.decision_of(claim.key) is None and not claim.selected_node
        ),
        key=lambda c: c[0].request,
    )


def _joint_mask(
    snap: Snapshot, undecided: list[tuple[PersistentVolumeClaim, StorageClass]]
) -> BoolVector:
    """Nodes where Reserve's choice succeeds for all the pod's undecided claims together:
    smallest claim first, each taking the smallest free PV of a fitting shape on the node
    (no other claim of the pod can then take it), else provisioning. Per-claim masks miss
    that two claims may want the same PV; this replays the choice on every node at once."""
    book = volume_book(snap)
    index = book.static_index(snap)
    size = len(snap)
    remaining: dict[Shape, npt.NDArray[np.int32]] = {}
    ok: BoolVector = np.ones(size, dtype=np.bool_)
    for claim, storage_class in undecided:
        dynamic = topology_mask(snap, storage_class) & capacity_mask(
            book, snap, claim, storage_class
        )
        prebound = index.prebound_to(claim)
        if prebound is not None:
            ok &= terms_mask(snap, prebound.node_affinity) | dynamic
            continue
        need: BoolVector = np.ones(size, dtype=np.bool_)
        for shape in index.fitting(claim, storage_class.name):
            if shape not in remaining:
                remaining[shape] = index.free[shape].copy()
            take = need & (remaining[shape] > 0)
            remaining[shape] -= take
            need &= ~take
        ok &= ~need | dynamic
    return ok
