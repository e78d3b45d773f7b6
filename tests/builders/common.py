"""What every builder shares: the scheduler names, the unit convention (quantities as in a
manifest, converted with the production parser) and the PodGroup apiVersion per dialect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.model import (
    Dialect,
)
from gangsched.core.quantity import to_milli, to_units

SCHEDULER = "gangsched"
OTHER_SCHEDULER = "default-scheduler"
JSON = dict[str, Any]
Quantity = str | int | float
#: For asserting on model values, which are in bytes: `claim.request == 20 * GIB`.
GIB = 1024**3

#: apiVersion of a PodGroup object per dialect (Koordinator gangs live on pod annotations,
#: or use a scheduling.sigs.k8s.io PodGroup).
POD_GROUP_API_VERSIONS: dict[Dialect, str] = {
    Dialect.SIGS: "scheduling.sigs.k8s.io/v1alpha1",
    Dialect.X_K8S: "scheduling.x-k8s.io/v1alpha1",
    Dialect.UPSTREAM: "scheduling.k8s.io/v1alpha3",
}


# ================================================================================ quantities
def resources(
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    extra: Mapping[str, Quantity] | None = None,
) -> dict[str, int]:
    """A model resource list (millicores, whole units) from manifest quantities."""
    out: dict[str, int] = {}
    if cpu is not None:
        out["cpu"] = to_milli(cpu)
    if memory is not None:
        out["memory"] = to_units(memory)
    for name, value in (extra or {}).items():
        out[name] = to_units(value)
    return out


def manifest_resources(
    cpu: Quantity | None, memory: Quantity | None, extra: Mapping[str, Quantity] | None
) -> dict[str, str]:
    out = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {name: str(value) for name, value in out.items() if value is not None}
