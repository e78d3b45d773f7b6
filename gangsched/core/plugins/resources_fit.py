"""NodeResourcesFit: the pod's requests fit beside what the node already runs.

One vectorised comparison over every node, restricted to the resource columns the pod asks
for. Capacity reserved for nominated pods that outrank this pod counts as used.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import PodContext
from gangsched.core.resources import PODS
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code


class ResourcesFit:
    name = "NodeResourcesFit"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return True

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        cols = np.flatnonzero(ctx.request)
        rows = np.flatnonzero(candidates)
        if rows.size * 4 < len(candidates):
            # Few candidates (a topology domain's nodes come first): compare their rows only,
            # not every node's (preemption's dry runs in a rack run this thousands of times).
            need = snap.requested[rows][:, cols] + ctx.request[cols]
            if ctx.reserved is not None:
                need = need + ctx.reserved[rows][:, cols]
            room = snap.allocatable[rows][:, cols]
            passed: BoolVector = np.zeros(len(candidates), dtype=np.bool_)
            passed[rows[np.all(need <= room, axis=1)]] = True
            return passed
        need = snap.requested[:, cols] + ctx.request[cols]
        if ctx.reserved is not None:
            need = need + ctx.reserved[:, cols]
        fits: BoolVector = np.all(need <= snap.allocatable[:, cols], axis=1)
        return candidates & fits

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        reasons: list[tuple[str, Code]] = []
        used = snap.requested[node]
        if ctx.reserved is not None:
            used = used + ctx.reserved[node]
        for name, col in snap.columns.items():
            want = int(ctx.request[col])
            if not want or used[col] + want <= snap.allocatable[node, col]:
                continue
            reason = "Too many pods" if name == PODS else f"Insufficient {name}"
            # No eviction helps when the node could not hold the pod even empty.
            code = Code.UNRESOLVABLE if want > snap.allocatable[node, col] else Code.UNSCHEDULABLE
            reasons.append((reason, code))
        return reasons
