"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms score.

Both depend only on node labels and the pod's NodeConstraints, so the per-node results are
cached in the snapshot and shared by every gang member with the same spec.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.labels import any_term_matches
from gangsched.core.model import Node, NodeConstraints
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

REASON = "node(s) didn't match Pod's node affinity/selector"


def admits(constraints: NodeConstraints, node: Node) -> bool:
    """nodeSelector AND (any required term), as the API defines them."""
    for key, value in constraints.node_selector:
        if node.labels.get(key) != value:
            return False
    if constraints.required_terms is None:
        return True
    return any_term_matches(constraints.required_terms, node.name, node.labels)


class NodeAffinity:
    name = "NodeAffinity"
    node_static = True  # the verdict reads only the pod's spec and the node

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        c = ctx.pod.constraints
        return bool(c.node_selector) or c.required_terms is not None

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        constraints = ctx.pod.constraints

        def compute() -> BoolVector:
            return np.fromiter(
                (admits(constraints, node) for node in snap.nodes), dtype=np.bool_, count=len(snap)
            )

        mask: BoolVector = snap.cached_mask(self.name, constraints, compute)
        return candidates & mask

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNRESOLVABLE)]

    def uniform_reason(self, ctx: PodContext, snap: Snapshot) -> tuple[str, Code]:
        return REASON, Code.UNRESOLVABLE


class PreferredNodeAffinity:
    """Sum of the weights of matching preferred terms, normalised to 0..100 (max = 100)."""

    name = "NodeAffinityScore"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return bool(ctx.pod.constraints.preferred_terms)

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        constraints = ctx.pod.constraints

        def compute() -> FloatVector:
            return np.array(
                [
                    sum(
                        p.weight
                        for p in constraints.preferred_terms
                        if p.term.matches(node.name, node.labels)
                    )
                    for node in snap.nodes
                ],
                dtype=np.float64,
            )

        raw: FloatVector = snap.cached_mask(self.name, constraints, compute)[nodes]
        top = raw.max() if len(raw) else 0.0
        return raw * (100.0 / top) if top > 0 else np.zeros(len(nodes))
