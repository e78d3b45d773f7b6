"""InterPodAffinity (placeholder until implemented): rejects nothing."""

from __future__ import annotations

from gangsched.core.framework import PodContext
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code


class InterPodAffinity:
    name = "InterPodAffinity"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return False

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        return candidates

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return []
