"""NodeName: a pod that names a node (spec.nodeName set before scheduling) may go only there."""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import PodContext
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = "NodeName"
    node_static = True  # the verdict reads only the pod's spec and the node

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return ctx.pod.constraints.node_name is not None

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        mask = np.zeros(len(snap), dtype=np.bool_)
        index = snap.index.get(ctx.pod.constraints.node_name or "")
        if index is not None:
            mask[index] = True
        return candidates & mask

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNRESOLVABLE)]

    def uniform_reason(self, ctx: PodContext, snap: Snapshot) -> tuple[str, Code]:
        return REASON, Code.UNRESOLVABLE
