"""The filter that confines a constrained gang's members to the domain under evaluation.

It plugs into the framework like every other filter (first, so the others look at the
domain's nodes only), which keeps the whole gang cycle (bounded search, volumes, DRA, the
nominated node) unchanged inside a domain.
"""

from __future__ import annotations

from collections.abc import Mapping

from gangsched.core.framework import Framework, PodContext
from gangsched.core.model import GroupRef
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

NAME = "TopologyDomain"


class DomainFilter:
    """Members of the constrained PodGroups pass only on nodes of their group's domain."""

    name = NAME

    def __init__(self, masks: Mapping[GroupRef, BoolVector], names: Mapping[GroupRef, str]):
        self.masks = masks
        self.names = names

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return ctx.pod.group in self.masks

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        assert ctx.pod.group is not None
        result: BoolVector = candidates & self.masks[ctx.pod.group]
        return result

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [self.uniform_reason(ctx, snap)]

    def uniform_reason(self, ctx: PodContext, snap: Snapshot) -> tuple[str, Code]:
        assert ctx.pod.group is not None
        reason = f"node(s) outside the topology domain {self.names[ctx.pod.group]}"
        return reason, Code.UNRESOLVABLE


def confined(
    framework: Framework, masks: Mapping[GroupRef, BoolVector], names: Mapping[GroupRef, str]
) -> Framework:
    """`framework` with the members of the groups in `masks` kept to their domains."""
    return Framework(
        filters=[DomainFilter(masks, names), *framework.filters],
        scores=framework.scores,
        pre_filters=framework.pre_filters,
    )


def is_domain_reason(reason: str) -> bool:
    return reason.startswith("node(s) outside the topology domain")
