"""BalancedAllocation: prefer nodes whose resources are used in equal proportion, so that CPU
is not exhausted on a node whose memory sits idle. Score = (1 - std of fractions) * 100."""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.plugins.allocation import ResourceScore, utilisation_after
from gangsched.core.snapshot import Snapshot


class BalancedAllocation(ResourceScore):
    name = "BalancedAllocation"

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        frac, weights = utilisation_after(ctx, snap, nodes, self.weights)
        frac = np.where(np.isnan(frac), 0.0, frac)  # as np.nan_to_num: frac is never infinite
        if len(weights) < 2:
            return np.full(len(nodes), 100.0)
        if frac.shape[1] == 2:  # the common case: the std of two values is half their gap
            spread = np.abs(frac[:, 0] - frac[:, 1]) * 0.5
        else:
            centred = frac - frac.mean(axis=1, keepdims=True)
            spread = np.sqrt((centred * centred).mean(axis=1))
        result: FloatVector = (1.0 - spread) * 100.0
        return result
