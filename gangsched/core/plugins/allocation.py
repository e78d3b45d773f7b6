"""Shared arithmetic of the resource-based score plugins (one plugin module each).

kube-scheduler scores with "non-zero" requests: a container that requests no CPU or memory
counts as 100m / 200Mi for scoring so that best-effort pods still spread out.

Least/most-allocated and balanced allocation all start from the same matrix (each node's
utilisation after placing the pod); it is computed once per pod attempt and shared through
the PodContext, because on thousands of nodes this matrix is most of a cycle's cost.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from gangsched.core.framework import IndexVector, PodContext
from gangsched.core.resources import CPU, MEMORY
from gangsched.core.snapshot import Snapshot

DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
FloatMatrix = npt.NDArray[np.float64]
FloatVector = npt.NDArray[np.float64]


class ResourceScore:
    """Base of the resource-based score plugins: they differ only in how a node's
    utilisation after placement turns into a score."""

    name = ""

    def __init__(self, weights: Mapping[str, float]) -> None:
        self.weights = dict(weights)

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return True


def utilisation_after(
    ctx: PodContext, snap: Snapshot, nodes: IndexVector, weights: Mapping[str, float]
) -> tuple[FloatMatrix, FloatVector]:
    """(fraction of each weighted resource used after placing the pod, weights), per node.

    Fractions are clipped to [0, 1]. A node with none of a resource gets NaN there: each
    plugin scores that resource 0 on that node, as upstream does.
    """
    key = ("utilisation", tuple(weights.items()))
    cached = ctx.extra.get(key)
    if isinstance(cached, tuple) and cached[0] is nodes:
        return cached[1], cached[2]
    # As upstream: extended resources count only for pods that request them.
    names = [
        name
        for name in weights
        if name in snap.columns and (name in (CPU, MEMORY) or ctx.request[snap.columns[name]])
    ]
    cols = np.array([snap.columns[name] for name in names], dtype=np.intp)
    request = ctx.request[cols].astype(np.float64)
    for i, name in enumerate(names):
        if request[i] == 0 and name == CPU:
            request[i] = DEFAULT_MILLI_CPU
        elif request[i] == 0 and name == MEMORY:
            request[i] = DEFAULT_MEMORY
    inverse = snap.inverse_allocatable()
    if len(nodes) == len(snap):  # every node feasible (common): skip the row gather
        rows_used, rows_inverse = snap.requested[:, cols], inverse[:, cols]
    else:
        rows_used, rows_inverse = snap.requested[nodes][:, cols], inverse[nodes][:, cols]
    frac = np.minimum((rows_used + request) * rows_inverse, 1.0)
    frac[rows_inverse == 0] = np.nan
    weight_vector = np.array([weights[name] for name in names], dtype=np.float64)
    ctx.extra[key] = (nodes, frac, weight_vector)
    return frac, weight_vector
