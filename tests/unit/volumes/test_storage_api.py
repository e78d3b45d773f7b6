"""Storage objects from raw JSON: the fields the plugins read, and clear problems."""

from __future__ import annotations

import pytest

from gangsched.core.api import InvalidObject
from gangsched.core.api.pods import pod_from_raw
from gangsched.core.api.priority import PriorityResolver
from gangsched.core.api.storage import (
    csi_driver_from_raw,
    csi_node_from_raw,
    csi_storage_capacity_from_raw,
    persistent_volume_claim_from_raw,
    persistent_volume_from_raw,
    storage_class_from_raw,
)
from gangsched.core.model import PodVolumeClaim
from tests.builders import GIB


def test_claim_fields() -> None:
    claim = persistent_volume_claim_from_raw(
        {
            "metadata": {
                "name": "data",
                "namespace": "ml",
                "uid": "u1",
                "resourceVersion": "7",
                "annotations": {
                    "volume.kubernetes.io/selected-node": "n1",
                    "pv.kubernetes.io/bind-completed": "yes",
                },
                "ownerReferences": [{"kind": "Pod", "name": "w", "uid": "pod-uid"}],
            },
            "spec": {
                "accessModes": ["ReadWriteOncePod"],
                "storageClassName": "fast",
                "volumeName": "pv1",
                "resources": {"requests": {"storage": "20Gi"}},
                "selector": {"matchLabels": {"tier": "gold"}},
            },
            "status": {"phase": "Bound"},
        }
    )
    assert claim.key == "ml/data" and claim.request == 20 * GIB
    assert claim.is_bound and claim.selected_node == "n1" and claim.storage_class == "fast"
    assert claim.owner_uids == frozenset({"pod-uid"}) and claim.resource_version == "7"
    assert claim.selector is not None and claim.selector.matches({"tier": "gold"})


def test_claim_without_class_name_is_not_the_empty_class() -> None:
    raw = {
        "metadata": {"name": "a"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    assert persistent_volume_claim_from_raw(raw).storage_class is None
    raw["spec"]["storageClassName"] = ""  # type: ignore[index]
    assert persistent_volume_claim_from_raw(raw).storage_class == ""


def test_claim_problems_name_the_object_and_field() -> None:
    with pytest.raises(InvalidObject) as error:
        persistent_volume_claim_from_raw(
            {
                "metadata": {"name": "a", "namespace": "ml"},
                "spec": {
                    "accessModes": ["RWO"],
                    "resources": {"requests": {"storage": "lots"}},
                    "volumeMode": "Disk",
                },
            }
        )
    text = str(error.value)
    assert 'PersistentVolumeClaim ml/a: spec.accessModes[0]: unknown access mode "RWO"' in text
    assert 'spec.resources.requests.storage: "lots" is not a valid quantity' in text
    assert 'spec.volumeMode: unknown value "Disk"' in text


def test_volume_fields() -> None:
    volume = persistent_volume_from_raw(
        {
            "metadata": {"name": "pv1", "labels": {"topology.kubernetes.io/zone": "a"}},
            "spec": {
                "capacity": {"storage": "50Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "claimRef": {"namespace": "ml", "name": "data", "uid": "u1"},
                "csi": {"driver": "ebs.csi", "volumeHandle": "vol-1"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["n2"],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    assert volume.capacity == 50 * GIB and volume.claim_ref is not None
    assert volume.claim_ref.key == "ml/data" and volume.phase == "Bound"
    assert volume.csi_driver == "ebs.csi" and volume.volume_handle == "vol-1"
    assert volume.node_affinity is not None
    assert volume.node_affinity[0].matches("n2", {"kubernetes.io/hostname": "n2"})


def test_volume_problems() -> None:
    with pytest.raises(InvalidObject) as error:
        persistent_volume_from_raw(
            {
                "metadata": {"name": "pv1"},
                "spec": {
                    "accessModes": [],
                    "nodeAffinity": {"required": {"nodeSelectorTerms": []}},
                },
                "status": {"phase": "Gone"},
            }
        )
    text = str(error.value)
    assert "PersistentVolume pv1: spec.capacity.storage: is required" in text
    assert "spec.accessModes: at least one access mode is required" in text
    assert "spec.nodeAffinity.required.nodeSelectorTerms: must have at least one term" in text
    assert 'status.phase: unknown value "Gone"' in text


def test_storage_class() -> None:
    storage_class = storage_class_from_raw(
        {
            "metadata": {
                "name": "zonal",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "ebs.csi",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["a"]}]}
            ],
        }
    )
    assert storage_class.delays_binding and storage_class.can_provision and storage_class.is_default
    assert storage_class.allowed_topologies is not None
    assert storage_class.allowed_topologies[0].matches("x", {"topology.kubernetes.io/zone": "a"})
    with pytest.raises(
        InvalidObject, match='StorageClass bad: volumeBindingMode: unknown value "Later"'
    ):
        storage_class_from_raw(
            {"metadata": {"name": "bad"}, "provisioner": "x", "volumeBindingMode": "Later"}
        )
    with pytest.raises(InvalidObject, match="StorageClass bad: provisioner: is required"):
        storage_class_from_raw({"metadata": {"name": "bad"}})


def test_csi_objects() -> None:
    node = csi_node_from_raw(
        {
            "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "ebs.csi", "allocatable": {"count": 25}}, {"name": "x"}]},
        }
    )
    assert node.limit("ebs.csi") == 25 and node.limit("x") is None
    driver = csi_driver_from_raw({"metadata": {"name": "lvm"}, "spec": {"storageCapacity": True}})
    assert driver.storage_capacity
    capacity = csi_storage_capacity_from_raw(
        {
            "metadata": {"name": "c", "namespace": "kube-system"},
            "storageClassName": "lvm",
            "capacity": "100Gi",
            "nodeTopology": {"matchLabels": {"zone": "a"}},
        }
    )
    assert capacity.fits(100 * GIB) and not capacity.fits(101 * GIB)
    with pytest.raises(InvalidObject, match=r"CSINode n1: spec\.drivers\[0\]\.allocatable\.count"):
        csi_node_from_raw(
            {
                "metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]},
            }
        )
    with pytest.raises(InvalidObject, match="CSIStorageCapacity kube-system/c: storageClassName"):
        csi_storage_capacity_from_raw({"metadata": {"name": "c", "namespace": "kube-system"}})


def test_pod_volumes() -> None:
    pod = pod_from_raw(
        {
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {
                "containers": [{"name": "c"}],
                "volumes": [
                    {
                        "name": "data",
                        "persistentVolumeClaim": {"claimName": "d1", "readOnly": True},
                    },
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "cfg", "configMap": {"name": "x"}},
                ],
            },
        },
        priorities=PriorityResolver([]),
    )
    assert pod.volume_claims == (
        PodVolumeClaim(volume="data", claim="d1", read_only=True),
        PodVolumeClaim(volume="scratch", claim="w-scratch", ephemeral=True),
    )
    with pytest.raises(
        InvalidObject, match=r"spec\.volumes\[0\]\.persistentVolumeClaim\.claimName: is required"
    ):
        pod_from_raw(
            {
                "metadata": {"name": "w"},
                "spec": {
                    "containers": [{"name": "c"}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {}}],
                },
            },
            priorities=PriorityResolver([]),
        )
