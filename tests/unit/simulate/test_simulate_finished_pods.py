"""`gangsched simulate` with finished pods in the input: they count for nothing toward
minMember and hold nothing (kube-scheduler's informer never delivers terminal pods), while
the PodGroup summary still shows them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gangsched.cli import main

MANIFEST = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2", memory: 8Gi, pods: "10"}}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: job, namespace: default}
spec: {minMember: 2}
---
# Ran to completion on n1: holds no CPU any more, and is no member that counts.
apiVersion: v1
kind: Pod
metadata:
  name: job-0
  namespace: default
  labels: {scheduling.x-k8s.io/pod-group: job}
spec:
  schedulerName: gangsched
  nodeName: n1
  containers: [{name: main, resources: {requests: {cpu: "2"}}}]
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata:
  name: job-1
  namespace: default
  labels: {scheduling.x-k8s.io/pod-group: job}
spec:
  schedulerName: gangsched
  containers: [{name: main, resources: {requests: {cpu: "1"}}}]
"""

SECOND_MEMBER = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: job-2
  namespace: default
  labels: {scheduling.x-k8s.io/pod-group: job}
spec:
  schedulerName: gangsched
  containers: [{name: main, resources: {requests: {cpu: "1"}}}]
"""


def simulate(capsys: pytest.CaptureFixture[str], path: Path) -> dict:  # type: ignore[type-arg]
    code = main(["simulate", str(path), "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


def test_a_finished_member_does_not_let_the_gang_start_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "finished.yaml"
    path.write_text(textwrap.dedent(MANIFEST))
    result = simulate(capsys, path)
    assert result["bound"] == {}
    # Held for its members (issue 19 item 5 moves such pods to a "waiting" map).
    held = {**result["unschedulable"], **result.get("waiting", {})}
    assert "waiting for its members: minMember 2" in held["default/job-1"]
    group = result["podGroups"]["default/job"]
    assert group["minMember"] == 2


def test_a_replacement_completes_the_gang_on_the_capacity_the_finished_pod_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "finished.yaml"
    path.write_text(textwrap.dedent(MANIFEST) + textwrap.dedent(SECOND_MEMBER))
    result = simulate(capsys, path)
    assert result["bound"] == {"default/job-1": "n1", "default/job-2": "n1"}
    assert result["preempted"] == {}
