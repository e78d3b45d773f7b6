"""The storage objects the volume plugins read, as the informers and simulate build them.

Frozen and hashable: per-node results (a PV's node affinity, a class's allowed topologies, a
CSIStorageCapacity's topology) are cached in the snapshot under the object itself, so a
changed object (new resourceVersion) simply gets a new cache entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.core.labels import LabelSelector, NodeSelectorTerm

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
FILESYSTEM = "Filesystem"
#: The binding mode that makes the scheduler choose the PV or the provisioning node.
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
#: A class with this provisioner (or none) has only pre-created local PVs.
NO_PROVISIONER = "kubernetes.io/no-provisioner"

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    #: None when the claim names no class (the API server's admission applies the default).
    storage_class: str | None = None
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    #: spec.resources.requests.storage in bytes.
    request: int = 0
    selector: LabelSelector | None = None
    volume_name: str = ""
    bind_completed: bool = False
    selected_node: str = ""
    phase: str = "Pending"
    deleting: bool = False
    #: UIDs of the objects owning the claim (a generic ephemeral claim is owned by its pod).
    owner_uids: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_bound(self) -> bool:
        """kube-scheduler's isPVCFullyBound: the PV controller finished binding."""
        return bool(self.volume_name) and self.bind_completed

    @property
    def class_name(self) -> str:
        return self.storage_class or ""


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    storage_class: str = ""
    capacity: int = 0
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    #: Required node affinity terms (ORed); None when the PV can be used on any node.
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    claim_ref: ClaimRef | None = None
    phase: str = "Available"
    deleting: bool = False
    #: spec.csi.driver and volumeHandle (NodeVolumeLimits counts these).
    csi_driver: str = ""
    volume_handle: str = ""

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """component-helpers IsVolumeBoundToClaim: claimRef names the claim (uid if set)."""
        ref = self.claim_ref
        if ref is None or ref.namespace != claim.namespace or ref.name != claim.name:
            return False
        return not ref.uid or ref.uid == claim.uid


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = IMMEDIATE
    #: allowedTopologies as node selector terms (ORed); None when unrestricted.
    allowed_topologies: tuple[NodeSelectorTerm, ...] | None = None
    is_default: bool = False
    resource_version: str = ""

    @property
    def delays_binding(self) -> bool:
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER

    @property
    def can_provision(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER


@dataclass(frozen=True, slots=True)
class CSINode:
    """spec.drivers[]: per driver, allocatable.count (None when the driver sets no limit)."""

    name: str
    limits: tuple[tuple[str, int | None], ...] = ()

    def limit(self, driver: str) -> int | None:
        for name, count in self.limits:
            if name == driver:
                return count
        return None


@dataclass(frozen=True, slots=True)
class CSIDriver:
    name: str
    storage_capacity: bool = False


@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    namespace: str
    name: str
    storage_class: str
    #: None selects no node (the API's nil nodeTopology); an empty selector selects all.
    node_topology: LabelSelector | None = None
    capacity: int | None = None
    maximum_volume_size: int | None = None
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def fits(self, request: int) -> bool:
        """upstream hasEnoughCapacity: maximumVolumeSize when set, else capacity."""
        if self.maximum_volume_size is not None:
            return self.maximum_volume_size >= request
        return self.capacity is not None and self.capacity >= request
