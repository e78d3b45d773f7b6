"""Everything read from one input (a set of manifests, or one informer resync), in model form."""

from __future__ import annotations

from dataclasses import dataclass, field

from gangsched.core.api.network_topology import NetworkTopology
from gangsched.core.api.priority import PriorityResolver
from gangsched.core.composite.model import CompositePodGroup
from gangsched.core.dra.model import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from gangsched.core.model import DisruptionBudget, Node, Pod, PodGroup, PriorityClass
from gangsched.core.volumes.book import VolumeBook


@dataclass(slots=True)
class Inventory:
    """The cluster state a scheduling run starts from, in input order (runs are reproducible).

    Names are unique per kind (the loader rejects duplicates); PodGroups are unique per
    GroupRef, so two dialects may each define a group with the same namespace and name.
    """

    #: The scheduler the input was read for: its pending pods are the ones a run places.
    scheduler_name: str = "gangsched"
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    pod_groups: list[PodGroup] = field(default_factory=list)
    #: scheduling.k8s.io/v1alpha3 CompositePodGroups (the inner levels of PodGroup trees).
    composite_pod_groups: list[CompositePodGroup] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    budgets: list[DisruptionBudget] = field(default_factory=list)
    #: Namespace name -> labels (with kubernetes.io/metadata.name), declared or referenced.
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    #: PVCs, PVs, StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities.
    volumes: VolumeBook = field(default_factory=VolumeBook)
    #: Dynamic Resource Allocation (resource.k8s.io/v1).
    device_classes: list[DeviceClass] = field(default_factory=list)
    resource_slices: list[ResourceSlice] = field(default_factory=list)
    resource_claims: list[ResourceClaim] = field(default_factory=list)
    claim_templates: list[ResourceClaimTemplate] = field(default_factory=list)
    #: Koordinator's ClusterNetworkTopology layers; None when the input defines none.
    network_topology: NetworkTopology | None = None

    @property
    def priorities(self) -> PriorityResolver:
        return PriorityResolver(self.priority_classes)
