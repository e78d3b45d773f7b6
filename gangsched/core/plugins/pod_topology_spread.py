"""PodTopologySpread (placeholder until implemented): rejects nothing, scores evenly."""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code


class PodTopologySpread:
    name = "PodTopologySpread"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return False

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        return candidates

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return []


class PodTopologySpreadScore:
    name = "PodTopologySpreadScore"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return False

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        return np.zeros(len(nodes))
