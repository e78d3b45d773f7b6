"""simulate on constrained gangs: the sigs and upstream dialects, and the podGroups topology."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from gangsched.cli import main

RACK = "topology.example.com/rack"
CONTAINERS = '[{name: c, resources: {requests: {cpu: "2"}}}]'


def simulate(tmp_path: Path, text: str) -> tuple[int, dict[str, Any] | str]:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", str(path), "-o", "json"])
    return code, (json.loads(out.getvalue()) if code == 0 else err.getvalue())


def nodes(layout: dict[str, str]) -> str:
    return "".join(
        "---\napiVersion: v1\nkind: Node\n"
        f"metadata: {{name: {name}, labels: {{{RACK}: {rack}}}}}\n"
        'status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}\n'
        for name, rack in layout.items()
    )


def members(group: str, count: int, link: str) -> str:
    return "".join(
        "---\napiVersion: v1\nkind: Pod\n"
        f"metadata: {{name: {group}-{i}{link}}}\n"
        f"spec: {{schedulerName: gangsched, containers: {CONTAINERS}"
        + (f", schedulingGroup: {{podGroupName: {group}}}" if not link else "")
        + "}\n"
        for i in range(count)
    )


LAYOUT = {"a1": "ra", "a2": "ra", "b1": "rb", "b2": "rb", "b3": "rb"}


def test_sigs_required_rack(tmp_path: Path) -> None:
    code, result = simulate(
        tmp_path,
        nodes(LAYOUT)
        + f"""\
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {{name: train}}
spec: {{minMember: 6, topology: {{required: {RACK}}}}}
"""
        + members("train", 6, ", labels: {pod-group.scheduling.sigs.k8s.io: train}"),
    )
    assert code == 0, result
    assert isinstance(result, dict)
    assert {result["bound"][f"default/train-{i}"][0] for i in range(6)} == {"b"}
    assert result["podGroups"]["default/train"]["topology"] == {"key": RACK, "value": "rb"}


def test_upstream_gang_too_big_for_any_rack(tmp_path: Path) -> None:
    code, result = simulate(
        tmp_path,
        nodes(LAYOUT)
        + f"""\
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: train}}
spec:
  schedulingPolicy: {{gang: {{minCount: 7}}}}
  schedulingConstraints: {{topology: [{{key: {RACK}}}]}}
"""
        + members("train", 7, ""),
    )
    assert code == 0, result
    assert isinstance(result, dict)
    assert not result["bound"]
    group = result["podGroups"]["default/train"]
    assert group["topology"] == {"key": RACK, "value": None}
    assert (
        "2 racks too small (at most 6 of the 7 pod(s) needed fit by free capacity: "
        f"{RACK}=ra, {RACK}=rb)"
    ) in group["message"]


def test_unconstrained_groups_have_no_topology_entry(tmp_path: Path) -> None:
    code, result = simulate(
        tmp_path,
        nodes(LAYOUT)
        + """\
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: free}
spec: {minMember: 2}
"""
        + members("free", 2, ", labels: {pod-group.scheduling.sigs.k8s.io: free}"),
    )
    assert code == 0, result
    assert isinstance(result, dict)
    assert "topology" not in result["podGroups"]["default/free"]


def test_malformed_constraint_fails_the_run_naming_the_field(tmp_path: Path) -> None:
    code, result = simulate(
        tmp_path,
        nodes(LAYOUT)
        + """\
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
  schedulingConstraints: {topology: [{key: a}, {key: b}]}
""",
    )
    assert code != 0
    assert "spec.schedulingConstraints.topology: must have at most 1 item, got 2" in str(result)
    assert "Traceback" not in str(result)
