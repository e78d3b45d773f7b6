"""LeastAllocated (default): prefer the emptiest nodes, spreading load."""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.plugins.allocation import ResourceScore, utilisation_after
from gangsched.core.snapshot import Snapshot


class LeastAllocated(ResourceScore):
    name = "LeastAllocated"

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        frac, weights = utilisation_after(ctx, snap, nodes, self.weights)
        if not weights.sum():
            return np.zeros(len(nodes))
        free = 1.0 - frac
        free[np.isnan(free)] = 0.0  # np.nan_to_num's answer (frac is finite or NaN), cheaper
        result: FloatVector = (free @ weights) * (100.0 / weights.sum())
        return result
