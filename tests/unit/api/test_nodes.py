"""node_from_raw and namespace_from_raw."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.api import InvalidObject, namespace_from_raw, node_from_raw
from gangsched.core.model import Taint

GI = 1024**3


def raw_node(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {},
        "status": status,
    }


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        node_from_raw(raw)
    return [str(problem) for problem in caught.value.problems]


def test_allocatable_units() -> None:
    node = node_from_raw(
        raw_node(
            allocatable={
                "cpu": "3500m",
                "memory": "8Gi",
                "ephemeral-storage": "100G",
                "pods": "32",
                "nvidia.com/gpu": 4,
                "hugepages-2Mi": "1Gi",
            }
        )
    )
    assert node.name == "n1"
    assert node.labels == {"kubernetes.io/hostname": "n1"}
    assert node.allocatable == {
        "cpu": 3500,
        "memory": 8 * GI,
        "ephemeral-storage": 100 * 10**9,
        "pods": 32,
        "nvidia.com/gpu": 4,
        "hugepages-2Mi": GI,
    }
    assert node.taints == ()
    assert not node.unschedulable


def test_pods_default_to_110() -> None:
    assert node_from_raw(raw_node(allocatable={"cpu": "4"})).allocatable["pods"] == 110


def test_capacity_stands_in_for_missing_allocatable() -> None:
    node = node_from_raw(raw_node(capacity={"cpu": "2", "memory": "1Gi"}))
    assert node.allocatable == {"cpu": 2000, "memory": GI, "pods": 110}


def test_allocatable_preferred_over_capacity() -> None:
    node = node_from_raw(raw_node(capacity={"cpu": "4"}, allocatable={"cpu": "3800m"}))
    assert node.allocatable["cpu"] == 3800


def test_taints_and_unschedulable() -> None:
    raw = raw_node(allocatable={"cpu": "1"})
    raw["spec"] = {
        "unschedulable": True,
        "taints": [
            {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        ],
    }
    node = node_from_raw(raw)
    assert node.unschedulable
    assert node.taints == (
        Taint("dedicated", "ml", "NoSchedule"),
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
    )


def test_problems_are_collected() -> None:
    raw = raw_node(allocatable={"cpu": "four", "memory": "-1Gi"})
    raw["spec"] = {"unschedulable": "yes", "taints": [{"effect": "Sometimes"}]}
    assert problems_of(raw) == [
        'Node n1: status.allocatable.cpu: "four" is not a valid quantity '
        "(e.g. 500m, 2, 1.5Gi, 1e3)",
        'Node n1: status.allocatable.memory: "-1Gi" must not be negative',
        "Node n1: spec.taints[0].key: is required",
        'Node n1: spec.taints[0].effect: unknown effect "Sometimes"; must be one of NoSchedule, '
        "PreferNoSchedule, NoExecute",
        'Node n1: spec.unschedulable: must be true or false, got string "yes"',
    ]


def test_missing_name() -> None:
    raw = raw_node()
    del raw["metadata"]["name"]
    assert problems_of(raw) == ["Node <unnamed>: metadata.name: is required"]


def test_namespace_labels_include_the_name_label() -> None:
    name, labels = namespace_from_raw(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-a", "labels": {"t": "a"}},
        }
    )
    assert name == "team-a"
    assert labels == {"t": "a", "kubernetes.io/metadata.name": "team-a"}
