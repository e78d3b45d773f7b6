"""NodeOS: a pod that names its OS (spec.os.name) goes only to nodes of that OS.

kube-scheduler has no such filter: it binds a `spec.os.name: windows` pod to a Linux node,
whose kubelet then rejects it at admission (PodOSNotSupported) and the pod fails for good --
for a gang, a member lost after the gang was placed. The kubelet compares spec.os.name with
its own OS, which it publishes as the node label `kubernetes.io/os`; so nodes whose label
names another OS are filtered out, and nodes without the label are left to the other
filters (nothing says they would refuse the pod).
"""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import PodContext
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

OS_LABEL = "kubernetes.io/os"
REASON = "node(s) didn't match the Pod's OS (spec.os.name)"


class NodeOS:
    name = "NodeOS"
    node_static = True  # the verdict reads only the pod's spec and the node

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return bool(ctx.pod.os_name)

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        wanted = ctx.pod.os_name

        def compute() -> BoolVector:
            return np.fromiter(
                (node.labels.get(OS_LABEL, wanted) == wanted for node in snap.nodes),
                dtype=np.bool_,
                count=len(snap),
            )

        mask: BoolVector = snap.cached_mask(self.name, wanted, compute)
        return candidates & mask

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNRESOLVABLE)]

    def uniform_reason(self, ctx: PodContext, snap: Snapshot) -> tuple[str, Code]:
        return REASON, Code.UNRESOLVABLE
