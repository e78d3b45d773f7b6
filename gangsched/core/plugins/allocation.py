"""Shared arithmetic of the resource-based score plugins (one plugin module each).

kube-scheduler scores with "non-zero" requests: a container that requests no CPU or memory
counts as 100m / 200Mi for scoring so that best-effort pods still spread out.
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


def utilisation_after(
    ctx: PodContext, snap: Snapshot, nodes: IndexVector, weights: Mapping[str, float]
) -> tuple[FloatMatrix, npt.NDArray[np.float64], FloatMatrix]:
    """(requested-after-placement, weights, allocatable) over the weighted resources."""
    names = [name for name in weights if name in snap.columns]
    cols = np.array([snap.columns[name] for name in names], dtype=np.intp)
    request = ctx.request[cols].astype(np.float64)
    for i, name in enumerate(names):
        if request[i] == 0 and name == CPU:
            request[i] = DEFAULT_MILLI_CPU
        elif request[i] == 0 and name == MEMORY:
            request[i] = DEFAULT_MEMORY
    alloc = snap.allocatable[np.ix_(nodes, cols)].astype(np.float64)
    used = snap.requested[np.ix_(nodes, cols)].astype(np.float64) + request
    return used, np.array([weights[name] for name in names], dtype=np.float64), alloc


def fractions(used: FloatMatrix, alloc: FloatMatrix) -> FloatMatrix:
    """used / allocatable per resource, 1.0 where the node has none of it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(alloc > 0, used / alloc, 1.0)
    return np.clip(frac, 0.0, 1.0)
