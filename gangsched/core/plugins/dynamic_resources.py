"""DynamicResources: the pod's resource claims can be allocated (or are usable) on the node.

Claims already allocated (by an earlier cycle, or by another member of this gang in this
cycle) pin the pod to their allocation's nodeSelector; the others must be allocatable together
from the node's devices as they are now (see `gangsched.core.dra`). The per-node answers come
from the cluster's DRA state, cached by node device signature, so a 1,000-node filter costs a
few allocator runs and a dictionary lookup per node.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.dra.claims import ClaimProblem
from gangsched.core.dra.model import ResourceClaim
from gangsched.core.dra.state import DraState, Verdict
from gangsched.core.framework import PodContext
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

NO_DRA = "resource claims cannot be allocated: the scheduler has no DRA state"


class DynamicResources:
    name = "DynamicResources"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return bool(ctx.pod.claims)

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        state = _state(snap)
        claims = self._claims(ctx, state)
        if state is None or isinstance(claims, str):
            return np.zeros_like(candidates)
        return state.feasible_nodes(
            claims, nodes=snap.nodes, generation=snap.node_generation, candidates=candidates
        )

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        state = _state(snap)
        claims = self._claims(ctx, state)
        if state is None:
            return [(NO_DRA, Code.UNRESOLVABLE)]
        if isinstance(claims, str):
            return [(claims, Code.UNRESOLVABLE)]
        verdict: Verdict = state.verdict(
            claims, nodes=snap.nodes, generation=snap.node_generation, node=node
        )
        if verdict.ok:
            return []
        return [(verdict.reason, Code.UNSCHEDULABLE if verdict.resolvable else Code.UNRESOLVABLE)]

    @staticmethod
    def _claims(ctx: PodContext, state: DraState | None) -> list[ResourceClaim] | str:
        """The pod's claims, resolved once per attempt; the problem's text if unusable."""
        if state is None:
            return NO_DRA
        key = ("dra-claims", id(state))
        cached = ctx.extra.get(key)
        if cached is None:
            try:
                claims = state.pod_claims(ctx.pod)
                state.check_classes(c for c in claims if state.allocation_of(c) is None)
                cached = claims
            except ClaimProblem as problem:
                cached = str(problem)
            ctx.extra[key] = cached
        return cached  # type: ignore[return-value]


def _state(snap: Snapshot) -> DraState | None:
    """The snapshot's DRA state; None where the cluster has no DRA support."""
    return snap.extensions.get(DraState)


#: Every DeviceClass is also reachable as this extended resource (KEP-5004, GA in 1.37).
DEVICE_CLASS_RESOURCE = "deviceclass.resource.kubernetes.io/"


class DraExtendedResources:
    """Extended resources backed by DRA (a DeviceClass's `extendedResourceName`, or
    `deviceclass.resource.kubernetes.io/<class>`) are satisfied by a claim the scheduler
    creates for the pod; gangsched does not do that yet. Where no node advertises the
    resource itself (a device plugin), such a pod is refused with that reason rather than
    left with a misleading "Insufficient example.com/gpu"."""

    name = "DynamicResourcesExtendedResources"

    def pre_filter(self, ctx: PodContext, snap: Snapshot) -> str | None:
        requests = ctx.pod.requests
        if not requests:
            return None
        state = _state(snap)
        mapped = (
            {
                c.extended_resource_name: c.name
                for c in state.classes.values()
                if c.extended_resource_name
            }
            if state is not None
            else {}
        )
        for resource in sorted(requests):
            device_class = mapped.get(resource)
            if device_class is None and resource.startswith(DEVICE_CLASS_RESOURCE):
                device_class = resource.removeprefix(DEVICE_CLASS_RESOURCE)
            if device_class is None:
                continue
            column = snap.columns.get(resource)
            if column is not None and bool((snap.allocatable[:, column] > 0).any()):
                continue  # a device plugin serves it on some node: NodeResourcesFit decides
            return (
                f"gangsched does not support extended resources backed by DRA yet "
                f"({resource}, DeviceClass {device_class})"
            )
        return None
