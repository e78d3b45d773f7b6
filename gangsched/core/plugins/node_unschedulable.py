"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint."""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import PodContext
from gangsched.core.model import NodeConstraints, Taint
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
#: The mask depends on nodes only; one cache entry serves every pod.
_ANY_POD = NodeConstraints()


class NodeUnschedulable:
    name = "NodeUnschedulable"
    node_static = True  # the verdict reads only the pod's spec and the node

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return not any(t.tolerates(UNSCHEDULABLE_TAINT) for t in ctx.pod.constraints.tolerations)

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        def compute() -> BoolVector:
            return np.array([not node.unschedulable for node in snap.nodes], dtype=np.bool_)

        schedulable: BoolVector = snap.cached_mask(self.name, _ANY_POD, compute)
        return candidates & schedulable

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNRESOLVABLE)]

    def uniform_reason(self, ctx: PodContext, snap: Snapshot) -> tuple[str, Code]:
        return REASON, Code.UNRESOLVABLE
