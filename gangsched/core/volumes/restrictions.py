"""VolumeRestrictions: a ReadWriteOncePod claim serves one pod in the whole cluster.

kube-scheduler counts the scheduled (and assumed) pods using any of the pod's
ReadWriteOncePod claims; if there is one, every node is Unschedulable. Not unresolvable:
preempting the pod that holds the claim frees it. Members of one gang placed earlier in the
same cycle count too, so two members never share such a claim.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import PodContext
from gangsched.core.model import Pod
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code
from gangsched.core.volumes.binding import pod_claims
from gangsched.core.volumes.book import ClaimSet, volume_book
from gangsched.core.volumes.model import READ_WRITE_ONCE_POD

#: kube-scheduler 1.37's wording (older releases said "node has pod using
#: PersistentVolumeClaim with the same name and ReadWriteOncePod access mode").
REASON = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


def is_placed(snap: Snapshot, pod: Pod) -> bool:
    """On a node in the snapshot: bound, or assumed in this cycle (and not removed by a
    preemption dry run)."""
    node = volume_book(snap).placing.get(pod.key)
    if node is None:
        node = snap.node_of(pod)
    return node is not None and pod.key in snap.node_pods[node]


def _conflicts(ctx: PodContext, snap: Snapshot) -> bool:
    claims = pod_claims(ctx, snap)
    if not isinstance(claims, ClaimSet):
        return False
    for claim in claims.claims:
        if READ_WRITE_ONCE_POD not in claim.access_modes:
            continue
        for key, user in volume_book(snap).users.get(claim.key, {}).items():
            if key != ctx.pod.key and is_placed(snap, user):
                return True
    return False


class VolumeRestrictions:
    name = "VolumeRestrictions"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        claims = pod_claims(ctx, snap)
        return isinstance(claims, ClaimSet) and any(
            READ_WRITE_ONCE_POD in claim.access_modes for claim in claims.claims
        )

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        if _conflicts(ctx, snap):
            return np.zeros(len(snap), dtype=np.bool_)
        return candidates

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNSCHEDULABLE)]
