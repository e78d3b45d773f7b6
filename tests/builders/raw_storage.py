"""Raw JSON of storage and claims: StorageClasses, PVCs, PVs, ResourceClaims, and the pod
volume and resourceClaims entries that use them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tests.builders.common import JSON, Quantity


def raw_storage_class(
    name: str,
    *,
    provisioner: str = "example.com/csi",
    binding_mode: str = "WaitForFirstConsumer",
    allowed_topologies: Sequence[Mapping[str, Sequence[str]]] = (),
) -> JSON:
    """`allowed_topologies`: one {label key: values} mapping per topology term."""
    body: JSON = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "provisioner": provisioner,
        "volumeBindingMode": binding_mode,
    }
    if allowed_topologies:
        body["allowedTopologies"] = [
            {
                "matchLabelExpressions": [
                    {"key": key, "values": list(values)} for key, values in term.items()
                ]
            }
            for term in allowed_topologies
        ]
    return body


def raw_pvc(
    name: str,
    *,
    namespace: str = "default",
    storage: Quantity = "1Gi",
    storage_class: str | None = "standard",
    volume_name: str | None = None,
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    phase: str | None = None,
) -> JSON:
    """A claim; with `volume_name` it is bound (phase Bound unless given)."""
    spec: JSON = {
        "accessModes": list(access_modes),
        "resources": {"requests": {"storage": str(storage)}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name is not None:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": spec,
        "status": {"phase": phase or ("Bound" if volume_name else "Pending")},
    }


def raw_pv(
    name: str,
    *,
    storage: Quantity = "1Gi",
    storage_class: str | None = "standard",
    node_affinity: Mapping[str, Sequence[str]] | None = None,
    claim: tuple[str, str] | None = None,
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    phase: str | None = None,
) -> JSON:
    """A volume; `node_affinity` {label key: values} pins it (a local volume), `claim`
    (namespace, name) pre-binds it."""
    spec: JSON = {
        "capacity": {"storage": str(storage)},
        "accessModes": list(access_modes),
        "persistentVolumeReclaimPolicy": "Delete",
        "csi": {"driver": "example.com/csi", "volumeHandle": name},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if node_affinity:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": key, "operator": "In", "values": list(values)}
                            for key, values in node_affinity.items()
                        ]
                    }
                ]
            }
        }
    if claim is not None:
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim[0],
            "name": claim[1],
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": phase or ("Bound" if claim else "Available")},
    }


def pod_volume(claim: str, *, name: str | None = None) -> JSON:
    """A pod spec `volumes` entry using a PersistentVolumeClaim: raw_pod(volumes=[...])."""
    return {"name": name or claim, "persistentVolumeClaim": {"claimName": claim}}


def raw_resource_claim(
    name: str,
    *,
    namespace: str = "default",
    device_class: str = "gpu.example.com",
    count: int = 1,
    api_version: str = "resource.k8s.io/v1",
) -> JSON:
    """A ResourceClaim asking for `count` devices of one DeviceClass (exact request)."""
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "req-0",
                        "exactly": {
                            "deviceClassName": device_class,
                            "allocationMode": "ExactCount",
                            "count": count,
                        },
                    }
                ]
            }
        },
    }


def pod_claim(claim: str, *, name: str | None = None) -> JSON:
    """A pod spec `resourceClaims` entry: raw_pod(resourceClaims=[pod_claim("c")])."""
    return {"name": name or claim, "resourceClaimName": claim}
