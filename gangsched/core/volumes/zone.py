"""VolumeZone: a bound PV labelled with zones or regions is usable only on nodes there.

kube-scheduler's plugin: the PV's `topology.kubernetes.io/{zone,region}` labels (and their
deprecated `failure-domain.beta.kubernetes.io` twins) hold a `__`-separated set of values;
a node with none of these labels passes, a node with some must carry a listed value for every
key the PV names. Node affinity of the PV is VolumeBinding's business, not this plugin's.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import PodContext
from gangsched.core.model import Node
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code
from gangsched.core.volumes.binding import pod_claims
from gangsched.core.volumes.book import ClaimSet

REASON = "node(s) had no available volume zone"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
TOPOLOGY_KEYS = (ZONE, REGION, BETA_ZONE, BETA_REGION)
_TWIN = {ZONE: BETA_ZONE, BETA_ZONE: ZONE, REGION: BETA_REGION, BETA_REGION: REGION}


def _constraints(ctx: PodContext, snap: Snapshot) -> tuple[tuple[str, frozenset[str]], ...]:
    claims = pod_claims(ctx, snap)
    if not isinstance(claims, ClaimSet):
        return ()
    out = set()
    for _, volume in claims.bound:
        if volume is None:
            continue
        for key, value in volume.labels:
            if key in TOPOLOGY_KEYS:
                out.add((key, frozenset(value.split("__"))))
    return tuple(sorted(out, key=lambda c: (c[0], sorted(c[1]))))


def _admits(constraints: tuple[tuple[str, frozenset[str]], ...], node: Node) -> bool:
    present = {key: node.labels[key] for key in TOPOLOGY_KEYS if key in node.labels}
    if not present:
        return True
    for key, values in constraints:
        value = present.get(key, present.get(_TWIN[key]))
        if value is None or value not in values:
            return False
    return True


class VolumeZone:
    name = "VolumeZone"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return bool(ctx.pod.volume_claims) and bool(_constraints(ctx, snap))

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        constraints = _constraints(ctx, snap)

        def compute() -> BoolVector:
            return np.fromiter(
                (_admits(constraints, node) for node in snap.nodes),
                dtype=np.bool_,
                count=len(snap),
            )

        mask: BoolVector = snap.cached_mask(self.name, constraints, compute)
        return candidates & mask

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNRESOLVABLE)]
