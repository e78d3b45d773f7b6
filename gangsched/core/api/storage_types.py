"""The shapes of the raw storage objects the volume plugins read (core/v1 and storage.k8s.io/v1).

As in `types.py`: only the fields gangsched looks at, `total=False`, checked by the converters.
"""

from __future__ import annotations

from typing import TypedDict

from gangsched.core.api.types import (
    ObjectMeta,
    Quantity,
    RawLabelSelector,
    RawNodeSelectorTerm,
    RawObject,
    RawResourceList,
)


class RawOwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class RawStorageMeta(ObjectMeta, total=False):
    ownerReferences: list[RawOwnerReference]


class RawVolumeResources(TypedDict, total=False):
    requests: RawResourceList


class RawPVCSpec(TypedDict, total=False):
    accessModes: list[str]
    storageClassName: str
    volumeMode: str
    volumeName: str
    selector: RawLabelSelector
    resources: RawVolumeResources


class RawPVCStatus(TypedDict, total=False):
    phase: str


class RawPersistentVolumeClaim(RawObject, total=False):
    spec: RawPVCSpec
    status: RawPVCStatus


class RawObjectReference(TypedDict, total=False):
    kind: str
    namespace: str
    name: str
    uid: str
    apiVersion: str
    resourceVersion: str


class RawVolumeNodeAffinity(TypedDict, total=False):
    required: dict[str, list[RawNodeSelectorTerm]]


class RawCSIVolumeSource(TypedDict, total=False):
    driver: str
    volumeHandle: str


class RawPVSpec(TypedDict, total=False):
    capacity: dict[str, Quantity]
    accessModes: list[str]
    storageClassName: str
    volumeMode: str
    claimRef: RawObjectReference
    nodeAffinity: RawVolumeNodeAffinity
    csi: RawCSIVolumeSource


class RawPVStatus(TypedDict, total=False):
    phase: str


class RawPersistentVolume(RawObject, total=False):
    spec: RawPVSpec
    status: RawPVStatus


class RawTopologySelectorRequirement(TypedDict, total=False):
    key: str
    values: list[str]


class RawTopologySelectorTerm(TypedDict, total=False):
    matchLabelExpressions: list[RawTopologySelectorRequirement]


class RawStorageClass(RawObject, total=False):
    provisioner: str
    volumeBindingMode: str
    allowedTopologies: list[RawTopologySelectorTerm]


class RawVolumeNodeResources(TypedDict, total=False):
    count: int


class RawCSINodeDriver(TypedDict, total=False):
    name: str
    nodeID: str
    allocatable: RawVolumeNodeResources


class RawCSINode(RawObject, total=False):
    spec: dict[str, list[RawCSINodeDriver]]


class RawCSIDriverSpec(TypedDict, total=False):
    storageCapacity: bool


class RawCSIDriver(RawObject, total=False):
    spec: RawCSIDriverSpec


class RawCSIStorageCapacity(RawObject, total=False):
    storageClassName: str
    nodeTopology: RawLabelSelector
    capacity: Quantity
    maximumVolumeSize: Quantity
