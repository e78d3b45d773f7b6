"""Which ResourceClaims a pod uses, and whether they can be used at all.

Checked before any node is looked at: a claim not generated yet, missing, being deleted,
generated for another pod, fully reserved, or asking for a DeviceClass that does not exist
makes the pod unschedulable on every node (kube-scheduler's DynamicResources PreFilter says
the same), so no allocator run is spent on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gangsched.core.dra.model import (
    RESERVED_FOR_MAX_SIZE,
    Consumer,
    DeviceClass,
    ResourceClaim,
)
from gangsched.core.model import Pod


class ClaimProblem(Exception):
    """The pod's claims cannot be used as they are (missing, not generated yet, being
    deleted, not the pod's, fully reserved): no node can help."""


def pod_claims(
    pod: Pod,
    *,
    claims: Mapping[str, ResourceClaim],
    consumers: Callable[[ResourceClaim], list[Consumer]],
) -> list[ResourceClaim]:
    """The ResourceClaims the pod uses; ClaimProblem when one is unusable. `consumers`
    gives a claim's reservedFor as the running cycle sees it."""
    out = []
    for pod_claim in pod.claims:
        name = pod_claim.resolved_name
        if name is None:
            raise ClaimProblem(
                f'pod {pod.key}: ResourceClaim for pod claim "{pod_claim.name}" '
                f'(template "{pod_claim.template_name}") not created yet'
            )
        if not name:
            continue  # the resourceclaim controller decided none is needed
        claim = claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            raise ClaimProblem(f'resourceclaim "{name}" not found')
        if claim.deleting:
            raise ClaimProblem(f'resourceclaim "{name}" is being deleted')
        if (
            pod_claim.template_name
            and claim.owner_pod_uid
            and pod.uid
            and claim.owner_pod_uid != pod.uid
        ):
            raise ClaimProblem(
                f"ResourceClaim {claim.key} was not created for pod {pod.key} (pod is not owner)"
            )
        reserved = consumers(claim)
        if len(reserved) >= RESERVED_FOR_MAX_SIZE and not reserves(reserved, pod):
            raise ClaimProblem(
                f'resourceclaim "{name}" is reserved for {RESERVED_FOR_MAX_SIZE} consumers already'
            )
        out.append(claim)
    return out


def check_classes(claims: Iterable[ResourceClaim], classes: Mapping[str, DeviceClass]) -> None:
    """ClaimProblem when a request names a DeviceClass that does not exist."""
    for claim in claims:
        for request in claim.spec.requests:
            for alt in request.alternatives:
                if alt.class_name not in classes:
                    raise ClaimProblem(
                        f"claim {claim.key} request {request.name}: "
                        f"device class {alt.class_name} does not exist"
                    )


def reserves(consumers: Iterable[Consumer], pod: Pod) -> bool:
    """Whether `pod` is among a claim's consumers (reservedFor)."""
    return any(
        c.resource == "pods" and c.name == pod.name and (not c.uid or c.uid == pod.uid)
        for c in consumers
    )
