"""Storage objects from raw JSON: PVCs, PVs, StorageClasses, CSINodes, CSIDrivers and
CSIStorageCapacities, validated the way the API server would (a bad quantity, an unknown
access mode or binding mode is a problem naming the object and field, never a silent default).
"""

from __future__ import annotations

from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.api.selectors import read_label_selector, read_node_selector_term
from gangsched.core.api.storage_types import (
    RawCSIDriver,
    RawCSINode,
    RawCSIStorageCapacity,
    RawPersistentVolume,
    RawPersistentVolumeClaim,
    RawStorageClass,
)
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.volumes.model import (
    ANN_BIND_COMPLETED,
    ANN_DEFAULT_CLASS,
    ANN_SELECTED_NODE,
    FILESYSTEM,
    IMMEDIATE,
    WAIT_FOR_FIRST_CONSUMER,
    ClaimRef,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
VOLUME_MODES = (FILESYSTEM, "Block")
BINDING_MODES = (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER)
PVC_PHASES = ("Pending", "Bound", "Lost")
PV_PHASES = ("Pending", "Available", "Bound", "Released", "Failed")
STORAGE = "storage"


def _access_modes(r: Reader, raw: Any, field: str) -> frozenset[str]:
    modes = r.strings(raw, field)
    for index, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            r.add(
                item(field, index),
                f"unknown access mode {show(mode)}; must be one of {', '.join(ACCESS_MODES)}",
            )
    return frozenset(m for m in modes if m in ACCESS_MODES)


def _storage(r: Reader, raw: Any, field: str) -> int | None:
    if raw is None:
        return None
    return r.quantity(raw, field, resource=STORAGE)


def persistent_volume_claim_from_raw(
    raw: RawPersistentVolumeClaim | dict[str, Any],
) -> PersistentVolumeClaim:
    r = Reader.for_object("PersistentVolumeClaim", raw, namespaced=True)
    meta = r.metadata
    spec = r.mapping(r.raw.get("spec"), "spec")
    status = r.mapping(r.raw.get("status"), "status")
    annotations = r.string_map(meta.get("annotations"), "metadata.annotations")
    storage_class: str | None = None
    if spec.get("storageClassName") is not None:
        storage_class = r.string(spec.get("storageClassName"), "spec.storageClassName")
    modes_field = "spec.accessModes"
    modes = _access_modes(r, spec.get("accessModes"), modes_field)
    if r.raw and not r.strings(spec.get("accessModes"), modes_field):
        r.add(modes_field, "at least one access mode is required")
    resources = r.mapping(spec.get("resources"), "spec.resources")
    requests = r.mapping(resources.get("requests"), "spec.resources.requests")
    request = _storage(r, requests.get(STORAGE), "spec.resources.requests.storage")
    if requests.get(STORAGE) is None and r.raw:
        r.add("spec.resources.requests.storage", "is required")
    claim = PersistentVolumeClaim(
        namespace=r.namespace,
        name=r.name,
        uid=r.string(meta.get("uid"), "metadata.uid"),
        resource_version=r.string(meta.get("resourceVersion"), "metadata.resourceVersion"),
        storage_class=storage_class,
        access_modes=modes,
        volume_mode=r.choice(spec.get("volumeMode"), "spec.volumeMode", VOLUME_MODES, FILESYSTEM),
        request=request or 0,
        selector=read_label_selector(r, spec.get("selector"), "spec.selector"),
        volume_name=r.string(spec.get("volumeName"), "spec.volumeName"),
        bind_completed=ANN_BIND_COMPLETED in annotations,
        selected_node=annotations.get(ANN_SELECTED_NODE, ""),
        phase=r.choice(status.get("phase"), "status.phase", PVC_PHASES, "Pending"),
        deleting=meta.get("deletionTimestamp") is not None,
        owner_uids=_owner_uids(r, meta.get("ownerReferences")),
    )
    r.done()
    return claim


def _owner_uids(r: Reader, raw: Any) -> frozenset[str]:
    uids = set()
    for index, entry in enumerate(r.items(raw, "metadata.ownerReferences")):
        body = r.mapping(entry, item("metadata.ownerReferences", index))
        uid = r.string(body.get("uid"), child(item("metadata.ownerReferences", index), "uid"))
        if uid:
            uids.add(uid)
    return frozenset(uids)


def persistent_volume_from_raw(raw: RawPersistentVolume | dict[str, Any]) -> PersistentVolume:
    r = Reader.for_object("PersistentVolume", raw, namespaced=False)
    meta = r.metadata
    spec = r.mapping(r.raw.get("spec"), "spec")
    status = r.mapping(r.raw.get("status"), "status")
    labels = r.string_map(meta.get("labels"), "metadata.labels")
    capacity_map = r.mapping(spec.get("capacity"), "spec.capacity")
    capacity = _storage(r, capacity_map.get(STORAGE), "spec.capacity.storage")
    if capacity is None and r.raw:
        r.add("spec.capacity.storage", "is required")
    modes_field = "spec.accessModes"
    modes = _access_modes(r, spec.get("accessModes"), modes_field)
    if r.raw and not r.strings(spec.get("accessModes"), modes_field):
        r.add(modes_field, "at least one access mode is required")
    claim_ref = None
    if spec.get("claimRef") is not None:
        ref = r.mapping(spec.get("claimRef"), "spec.claimRef")
        ref_name = r.string(ref.get("name"), "spec.claimRef.name")
        if not ref_name:
            r.add("spec.claimRef.name", "is required")
        else:
            claim_ref = ClaimRef(
                namespace=r.string(ref.get("namespace"), "spec.claimRef.namespace") or "default",
                name=ref_name,
                uid=r.string(ref.get("uid"), "spec.claimRef.uid"),
            )
    affinity = None
    if spec.get("nodeAffinity") is not None:
        body = r.mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
        required = r.mapping(body.get("required"), "spec.nodeAffinity.required")
        if body.get("required") is not None:
            terms_field = "spec.nodeAffinity.required.nodeSelectorTerms"
            raw_terms = r.items(required.get("nodeSelectorTerms"), terms_field)
            if not raw_terms:
                r.add(terms_field, "must have at least one term")
            affinity = tuple(
                read_node_selector_term(r, term, item(terms_field, index))
                for index, term in enumerate(raw_terms)
            )
    csi = r.mapping(spec.get("csi"), "spec.csi")
    default_phase = "Bound" if claim_ref is not None and claim_ref.uid else "Available"
    volume = PersistentVolume(
        name=r.name,
        uid=r.string(meta.get("uid"), "metadata.uid"),
        resource_version=r.string(meta.get("resourceVersion"), "metadata.resourceVersion"),
        labels=tuple(sorted(labels.items())),
        storage_class=r.string(spec.get("storageClassName"), "spec.storageClassName"),
        capacity=capacity or 0,
        access_modes=modes,
        volume_mode=r.choice(spec.get("volumeMode"), "spec.volumeMode", VOLUME_MODES, FILESYSTEM),
        node_affinity=affinity,
        claim_ref=claim_ref,
        phase=r.choice(status.get("phase"), "status.phase", PV_PHASES, default_phase),
        deleting=meta.get("deletionTimestamp") is not None,
        csi_driver=r.string(csi.get("driver"), "spec.csi.driver"),
        volume_handle=r.string(csi.get("volumeHandle"), "spec.csi.volumeHandle"),
    )
    r.done()
    return volume


def storage_class_from_raw(raw: RawStorageClass | dict[str, Any]) -> StorageClass:
    r = Reader.for_object("StorageClass", raw, namespaced=False)
    annotations = r.string_map(r.metadata.get("annotations"), "metadata.annotations")
    provisioner = r.string(r.raw.get("provisioner"), "provisioner")
    if not provisioner and r.raw:
        r.add("provisioner", "is required")
    topologies = None
    if r.raw.get("allowedTopologies") is not None:
        topologies = tuple(
            _topology_term(r, term, item("allowedTopologies", index))
            for index, term in enumerate(
                r.items(r.raw.get("allowedTopologies"), "allowedTopologies")
            )
        )
        if not topologies:
            topologies = None  # an empty list means no restriction
    storage_class = StorageClass(
        name=r.name,
        provisioner=provisioner,
        binding_mode=r.choice(
            r.raw.get("volumeBindingMode"), "volumeBindingMode", BINDING_MODES, IMMEDIATE
        ),
        allowed_topologies=topologies,
        is_default=annotations.get(ANN_DEFAULT_CLASS) == "true",
        resource_version=r.string(r.metadata.get("resourceVersion"), "metadata.resourceVersion"),
    )
    r.done()
    return storage_class


def _topology_term(r: Reader, raw: Any, field: str) -> NodeSelectorTerm:
    """A TopologySelectorTerm: every key must have one of its values (an In requirement)."""
    body = r.mapping(raw, field)
    requirements = []
    expr_field = child(field, "matchLabelExpressions")
    for index, entry in enumerate(r.items(body.get("matchLabelExpressions"), expr_field)):
        entry_field = item(expr_field, index)
        expr = r.mapping(entry, entry_field)
        key = r.string(expr.get("key"), child(entry_field, "key"))
        values = r.strings(expr.get("values"), child(entry_field, "values"))
        if not key:
            r.add(child(entry_field, "key"), "is required")
        elif not values:
            r.add(child(entry_field, "values"), "must be non-empty")
        else:
            requirements.append(Requirement(key, "In", values))
    return NodeSelectorTerm(match_expressions=tuple(requirements))


def csi_node_from_raw(raw: RawCSINode | dict[str, Any]) -> CSINode:
    r = Reader.for_object("CSINode", raw, namespaced=False)
    spec = r.mapping(r.raw.get("spec"), "spec")
    limits = []
    for index, entry in enumerate(r.items(spec.get("drivers"), "spec.drivers")):
        field = item("spec.drivers", index)
        body = r.mapping(entry, field)
        name = r.string(body.get("name"), child(field, "name"))
        if not name:
            r.add(child(field, "name"), "is required")
            continue
        allocatable = r.mapping(body.get("allocatable"), child(field, "allocatable"))
        count = r.integer(
            allocatable.get("count"), child(child(field, "allocatable"), "count"), minimum=0
        )
        limits.append((name, count))
    node = CSINode(name=r.name, limits=tuple(limits))
    r.done()
    return node


def csi_driver_from_raw(raw: RawCSIDriver | dict[str, Any]) -> CSIDriver:
    r = Reader.for_object("CSIDriver", raw, namespaced=False)
    spec = r.mapping(r.raw.get("spec"), "spec")
    driver = CSIDriver(
        name=r.name,
        storage_capacity=r.boolean(spec.get("storageCapacity"), "spec.storageCapacity"),
    )
    r.done()
    return driver


def csi_storage_capacity_from_raw(
    raw: RawCSIStorageCapacity | dict[str, Any],
) -> CSIStorageCapacity:
    r = Reader.for_object("CSIStorageCapacity", raw, namespaced=True)
    storage_class = r.string(r.raw.get("storageClassName"), "storageClassName")
    if not storage_class and r.raw:
        r.add("storageClassName", "is required")
    capacity = CSIStorageCapacity(
        namespace=r.namespace,
        name=r.name,
        storage_class=storage_class,
        node_topology=read_label_selector(r, r.raw.get("nodeTopology"), "nodeTopology"),
        capacity=_storage(r, r.raw.get("capacity"), "capacity"),
        maximum_volume_size=_storage(r, r.raw.get("maximumVolumeSize"), "maximumVolumeSize"),
        resource_version=r.string(r.metadata.get("resourceVersion"), "metadata.resourceVersion"),
    )
    r.done()
    return capacity
