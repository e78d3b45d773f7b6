"""MostAllocated: bin packing. Suits gangs: filling nodes keeps whole nodes free for the next
large gang instead of leaving every node a little used."""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.plugins.allocation import ResourceScore, utilisation_after
from gangsched.core.snapshot import Snapshot


class MostAllocated(ResourceScore):
    name = "MostAllocated"

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        frac, weights = utilisation_after(ctx, snap, nodes, self.weights)
        if not weights.sum():
            return np.zeros(len(nodes))
        result: FloatVector = (np.nan_to_num(frac) @ weights) * (100.0 / weights.sum())
        return result
