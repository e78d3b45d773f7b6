"""Model objects of Dynamic Resource Allocation: a GPU DeviceClass, node-local GPU slices,
claim specs and claims, and pods using them."""

from __future__ import annotations

from fractions import Fraction

from gangsched.core.dra.model import (
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    ExactRequest,
    MatchAttribute,
    ResourceClaim,
    ResourceSlice,
)
from gangsched.core.model import (
    Pod,
    PodClaim,
)
from tests.builders.common import GIB

GPU_DRIVER = "gpu.example.com"
GPU_CLASS = "gpu.example.com"
NVLINK = f"{GPU_DRIVER}/nvlinkDomain"


def gpu_class(name: str = GPU_CLASS, *selectors: str) -> DeviceClass:
    return DeviceClass(name=name, selectors=(f'device.driver == "{GPU_DRIVER}"', *selectors))


def gpu_slice(
    node_name: str, gpus: int = 8, *, domains: int = 2, model: str = "A100", memory_gib: int = 40
) -> ResourceSlice:
    """`gpus` GPUs on one node in `domains` NVLink domains of equal size."""
    per_domain = max(1, gpus // max(domains, 1))
    return ResourceSlice(
        name=f"{node_name}-{GPU_DRIVER}",
        driver=GPU_DRIVER,
        pool=node_name,
        generation=1,
        slice_count=1,
        node_name=node_name,
        devices=[
            Device(
                name=f"gpu-{i}",
                attributes={
                    f"{GPU_DRIVER}/model": model,
                    NVLINK: f"{node_name}-nvl{i // per_domain}",
                    f"{GPU_DRIVER}/index": i,
                },
                capacity={f"{GPU_DRIVER}/memory": Fraction(memory_gib * GIB)},
            )
            for i in range(gpus)
        ],
    )


def gpu_claim_spec(
    count: int, *, selectors: tuple[str, ...] = (), same_domain: bool = False
) -> ClaimSpec:
    request = DeviceRequest(
        name="gpus",
        exactly=ExactRequest(name="gpus", class_name=GPU_CLASS, selectors=selectors, count=count),
    )
    constraints = (MatchAttribute(attribute=NVLINK),) if same_domain else ()
    return ClaimSpec(requests=(request,), constraints=constraints)


def resource_claim(name: str, spec: ClaimSpec, *, namespace: str = "default") -> ResourceClaim:
    return ResourceClaim(namespace=namespace, name=name, uid=f"uid-claim-{name}", spec=spec)


def with_resource_claims(p: Pod, *claim_names: str) -> Pod:
    """The pod uses the named ResourceClaims (spec.resourceClaims[].resourceClaimName)."""
    p.claims = tuple(PodClaim(name=f"c{i}", claim_name=n) for i, n in enumerate(claim_names))
    return p
