"""LeastAllocated (default): prefer the emptiest nodes, spreading load."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.plugins.allocation import fractions, utilisation_after
from gangsched.core.snapshot import Snapshot


class LeastAllocated:
    name = "LeastAllocated"

    def __init__(self, weights: Mapping[str, float]) -> None:
        self.weights = dict(weights)

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return True

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        used, weights, alloc = utilisation_after(ctx, snap, nodes, self.weights)
        if not weights.sum():
            return np.zeros(len(nodes))
        free = 1.0 - fractions(used, alloc)
        result: FloatVector = (free @ weights) * (100.0 / weights.sum())
        return result
