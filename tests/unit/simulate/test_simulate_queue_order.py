"""`gangsched simulate` orders each dialect as its owner does (issue 19 item 2).

The same cluster, one 4-CPU node: a PodGroup created first, then a 2-CPU lone pod, then the
group's three 1-CPU pods; only one of the two fits. kube-scheduler (upstream
`scheduling.k8s.io` group; podgroup_test.go "pod group interleaving with an individual pod")
goes by the pods' own times, so the lone pod wins; scheduler-plugins (`scheduling.x-k8s.io`)
and Koordinator (`scheduling.sigs.k8s.io`) go by the PodGroup's creation time, so the group
wins.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangsched.cli import main

LABELS = {
    "scheduling.x-k8s.io": "scheduling.x-k8s.io/pod-group",
    "scheduling.sigs.k8s.io": "pod-group.scheduling.sigs.k8s.io",
}


def stamp(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}Z"


def pod_group(api: str) -> dict[str, Any]:
    meta = {"name": "pg1", "namespace": "default", "creationTimestamp": stamp(1)}
    if api == "scheduling.k8s.io":
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 3}}, "priority": 100}
        return {"apiVersion": f"{api}/v1alpha3", "kind": "PodGroup", "metadata": meta, "spec": spec}
    return {
        "apiVersion": f"{api}/v1alpha1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": 3},
    }


def pod(name: str, cpu: str, second: int, api: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "creationTimestamp": stamp(second),
    }
    spec: dict[str, Any] = {
        "schedulerName": "gangsched",
        "priority": 100,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if api == "scheduling.k8s.io":
        spec["schedulingGroup"] = {"podGroupName": "pg1"}
    elif api is not None:
        meta["labels"] = {LABELS[api]: "pg1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def scenario(api: str) -> list[dict[str, Any]]:
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "32"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node"},
            "status": {"capacity": alloc, "allocatable": alloc},
        },
        pod_group(api),
        pod("blocker", "2", 2),
        *(pod(f"p{i}", "1", 2 + i, api) for i in (1, 2, 3)),
    ]


def simulate(capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str) -> dict[str, Any]:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(scenario(api)))
    code = main(["simulate", str(path), "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


def test_upstream_group_yields_to_a_lone_pod_created_before_its_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = simulate(capsys, tmp_path, "scheduling.k8s.io")
    assert result["bound"] == {"default/blocker": "node"}
    assert sorted(result["unschedulable"]) == ["default/p1", "default/p2", "default/p3"]
    assert [s["gang"] for s in result["timeline"]][:2] == ["default/blocker", "default/pg1"]


@pytest.mark.parametrize("api", ["scheduling.x-k8s.io", "scheduling.sigs.k8s.io"])
def test_peer_groups_go_by_their_pod_groups_creation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str
) -> None:
    result = simulate(capsys, tmp_path, api)
    assert sorted(result["bound"]) == ["default/p1", "default/p2", "default/p3"]
    assert list(result["unschedulable"]) == ["default/blocker"]
    assert result["timeline"][0]["gang"] == "default/pg1"
