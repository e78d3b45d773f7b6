"""Dynamic Resource Allocation objects (resource.k8s.io/v1) as the allocator reads them.

Only the fields that decide an allocation are kept. Devices carry a `fingerprint`: everything a
selector or a constraint can see of a device (driver, attributes, capacity, taints), interned
to a small integer. Identical GPUs on a thousand nodes share one fingerprint, so a CEL selector
is evaluated once per kind of device rather than once per device, and the allocator's result
for one node stands for every node with the same devices in the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from gangsched.core.labels import NodeSelectorTerm

#: Finalizer the scheduler puts on a claim before writing its allocation (upstream's name).
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
#: Annotation the resourceclaim controller puts on claims it generated from a template.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
#: API limits (k8s.io/api/resource/v1).
ALLOCATION_RESULTS_MAX_SIZE = 32
RESERVED_FOR_MAX_SIZE = 256


class AllocationMode(StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


@dataclass(frozen=True, slots=True)
class Semver:
    """A semantic version attribute (its canonical text; build metadata dropped)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(str(part) for part in self.prerelease)
        return text


#: One device attribute value: bool, int, string or version.
AttributeValue = bool | int | str | Semver


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str  # NoSchedule | NoExecute | None


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(slots=True)
class Device:
    name: str
    #: Fully qualified attribute names ("<domain>/<id>"; unqualified names get the driver's).
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    capacity: dict[str, Fraction] = field(default_factory=dict)
    taints: tuple[DeviceTaint, ...] = ()
    #: Partitionable devices and binding conditions are not supported: such devices are
    #: never allocated (what upstream does with those features off).
    unsupported: str = ""
    fingerprint: int = -1
    #: The `inventory.DeviceKinds` registry `fingerprint` belongs to (0: none yet).
    kinds_token: int = 0


@dataclass(slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str | None = None
    #: nodeSelector terms (ORed); None when the slice is not selector-scoped.
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    devices: list[Device] = field(default_factory=list)
    #: Per-device node selection or shared counters: pools using them are not supported.
    unsupported: str = ""


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """Opaque driver configuration from a DeviceClass or a claim, copied into the allocation
    for the driver (the scheduler never reads it). `parameters` is canonical JSON text so
    that claim specs stay hashable (the allocator's answers are cached by spec)."""

    driver: str
    parameters: str
    #: A claim's config applies to these requests ("<request>" or "<request>/<sub>"); empty:
    #: to all.
    requests: tuple[str, ...] = ()


class ConfigSource(StrEnum):
    FROM_CLASS = "FromClass"
    FROM_CLAIM = "FromClaim"


@dataclass(frozen=True, slots=True)
class AllocatedConfig:
    """One entry of status.allocation.devices.config."""

    source: ConfigSource
    config: DeviceConfig


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    extended_resource_name: str = ""
    uid: str = ""
    config: tuple[DeviceConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """One `exactly` request or one `firstAvailable` alternative."""

    name: str
    class_name: str
    selectors: tuple[str, ...] = ()
    mode: AllocationMode = AllocationMode.EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A claim's request: exactly one of `exactly` or `first_available`."""

    name: str
    exactly: ExactRequest | None = None
    first_available: tuple[ExactRequest, ...] = ()

    @property
    def alternatives(self) -> tuple[ExactRequest, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """All devices of `requests` (every request when empty) share `attribute`'s value."""

    attribute: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()
    config: tuple[DeviceConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One allocated device, as status.allocation.devices.results lists it."""

    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class Allocation:
    results: tuple[DeviceResult, ...]
    #: Where the devices are usable: nodeSelector terms (ORed); None = every node.
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    #: The classes' and the claim's configuration for the drivers (see `results.py`).
    config: tuple[AllocatedConfig, ...] = ()

    def admits(self, node_name: str, labels: dict[str, str]) -> bool:
        if self.node_selector is None:
            return True
        return any(term.matches(node_name, labels) for term in self.node_selector)


@dataclass(frozen=True, slots=True)
class Consumer:
    """An entry of status.reservedFor."""

    resource: str  # pods (or podgroups)
    name: str
    uid: str
    api_group: str = ""


@dataclass(slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    spec: ClaimSpec = field(default_factory=ClaimSpec)
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    #: UID of the pod that owns the claim as controller (generated claims), or "".
    owner_pod_uid: str = ""
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec = field(default_factory=ClaimSpec)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
