"""`gangsched simulate` on kube-scheduler's own cases where members beyond the quorum must
preempt (test/integration/scheduler/preemption/podgroup/podgrouppreemption_test.go and
test/integration/scheduler/podgroup/podgroup_test.go, v1.37.1), under both strategies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangsched.cli import main

BOTH = pytest.mark.parametrize("strategy", ["kep", "mincost"])


def node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "4Gi", "pods": "32"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def pod_group(name: str, priority: int, min_count: int | None) -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": policy, "priority": priority},
    }


def pod(
    name: str, priority: int, *, group: str | None = None, node_name: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "gangsched",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def simulate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: list[dict[str, Any]], strategy: str
) -> dict[str, Any]:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["simulate", str(path), "-o", "json", "--preemption", strategy])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


@BOTH
@pytest.mark.parametrize("min_count", [2, None], ids=["gang", "basic"])
def test_binding_first_before_preemption(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, strategy: str, min_count: int | None
) -> None:
    """ "Binding first before preemption for gang policy / basic policy": room for one new
    member; it is bound first, then the other preempts low-1 (events Bind:high-1,
    PodGroupPostFilter:pg1, Bind:high-2)."""
    docs = [
        node("node1", "4"),
        pod_group("pg1", 100, min_count),
        pod("pg-pod-1", 100, group="pg1", node_name="node1"),
        pod("pg-pod-2", 100, group="pg1", node_name="node1"),
        pod("low-1", 10, node_name="node1"),
        pod("high-1", 100, group="pg1"),
        pod("high-2", 100, group="pg1"),
    ]
    result = simulate(capsys, tmp_path, docs, strategy)
    assert result["bound"] == {"default/high-1": "node1", "default/high-2": "node1"}
    assert list(result["preempted"]) == ["default/low-1"]
    assert result["nominated"] == {"default/high-2": "node1"}
    steps = [
        (s["result"], sorted(s.get("bound", {})), s.get("preempted", []))
        for s in result["timeline"]
    ]
    assert steps == [
        ("scheduled", ["default/high-1"], []),
        ("waiting_on_preemption", [], ["default/low-1"]),
        ("scheduled", ["default/high-2"], []),
    ]
    message = result["preempted"]["default/low-1"]
    assert "preemptor: default/pg1, triggerpod: default/high-2" in message


@BOTH
def test_partial_preemption_with_basic_policy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, strategy: str
) -> None:
    """ "Partial Preemption with basic policy": two of three fit, the third preempts one pod."""
    docs = [
        node("node1", "2"),
        node("node2", "2"),
        pod_group("pg1", 100, None),
        pod("low-1", 10, node_name="node1"),
        pod("very-low-1", 5, node_name="node2"),
        *(pod(f"high-{i}", 100, group="pg1") for i in (1, 2, 3)),
    ]
    result = simulate(capsys, tmp_path, docs, strategy)
    assert sorted(result["bound"]) == ["default/high-1", "default/high-2", "default/high-3"]
    assert len(result["preempted"]) == 1
    if strategy == "mincost":
        assert list(result["preempted"]) == ["default/very-low-1"]  # the cheaper victim
    assert result["unschedulable"] == {}


@BOTH
def test_extra_member_never_preempts_its_equals(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, strategy: str
) -> None:
    """ "minCount is scheduled, but one pod from a gang remain unschedulable until the
    blocked resources are released": the blocker has the gang's priority, so the fourth
    member waits instead of preempting it."""
    docs = [
        node("node1", "4"),
        pod("small-blocker", 100, node_name="node1"),
        pod_group("pg1", 100, 3),
        *(pod(f"p{i}", 100, group="pg1") for i in (1, 2, 3, 4)),
    ]
    result = simulate(capsys, tmp_path, docs, strategy)
    assert len(result["bound"]) == 3
    assert result["preempted"] == {}
    [(left, reason)] = result["unschedulable"].items()
    assert left.startswith("default/p")
    assert "preemption cannot help: no lower-priority victims" in reason or (
        "Insufficient cpu" in reason
    )
    assert result["podGroups"]["default/pg1"]["scheduled"] == 3
