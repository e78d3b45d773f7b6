"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule ones lower
the score (fewest intolerable taints scores 100)."""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.model import Node, Taint, Toleration
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

_HARD_EFFECTS = ("NoSchedule", "NoExecute")


def first_untolerated(node: Node, tolerations: tuple[Toleration, ...]) -> Taint | None:
    for taint in node.taints:
        if taint.effect in _HARD_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


class TaintToleration:
    name = "TaintToleration"
    node_static = True  # the verdict reads only the pod's spec and the node

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return True

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        tolerations = ctx.pod.constraints.tolerations

        def compute() -> BoolVector:
            return np.fromiter(
                (first_untolerated(node, tolerations) is None for node in snap.nodes),
                dtype=np.bool_,
                count=len(snap),
            )

        mask: BoolVector = snap.cached_mask(self.name, _tolerations_key(ctx), compute)
        return candidates & mask

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        taint = first_untolerated(snap.nodes[node], ctx.pod.constraints.tolerations)
        if taint is None:
            return []
        return [
            (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}", Code.UNRESOLVABLE)
        ]


class PreferNoScheduleTaints:
    name = "TaintTolerationScore"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return True

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        tolerations = ctx.pod.constraints.tolerations

        def compute() -> FloatVector:
            return np.array(
                [
                    sum(
                        1
                        for taint in node.taints
                        if taint.effect == "PreferNoSchedule"
                        and not any(t.tolerates(taint) for t in tolerations)
                    )
                    for node in snap.nodes
                ],
                dtype=np.float64,
            )

        counts: FloatVector = snap.cached_mask(self.name, _tolerations_key(ctx), compute)[nodes]
        worst = counts.max() if len(counts) else 0.0
        if worst <= 0:
            return np.full(len(nodes), 100.0)
        return 100.0 - counts * (100.0 / worst)


def _tolerations_key(ctx: PodContext) -> tuple[Toleration, ...]:
    """Taint results depend on tolerations only; key the cache on them alone."""
    return ctx.pod.constraints.tolerations
