"""Volcano's PodGroup dialect (scheduling.volcano.sh/v1beta1) and its pod annotations."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw, pod_group_from_raw
from gangsched.core.api.volcano import volcano_queue
from gangsched.core.model import PREEMPT_NEVER, Dialect, GroupRef, PriorityClass

CLASSES = PriorityResolver(
    [PriorityClass("high", 1000), PriorityClass("polite", 500, preemption_policy=PREEMPT_NEVER)]
)


def volcano(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "lws-0-abc", "namespace": "ml", "uid": "u1"},
        "spec": spec,
    }


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        pod_group_from_raw(raw, priorities=CLASSES)
    return [str(problem) for problem in caught.value.problems]


def test_what_leaderworkerset_writes() -> None:
    """LWS sets minMember (the group size) and minResources (leader + workers)."""
    raw = volcano({"minMember": 3, "minResources": {"cpu": "3", "memory": "3Gi"}})
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert group.ref == GroupRef(Dialect.VOLCANO, "ml", "lws-0-abc")
    assert group.min_member == 3
    assert group.min_resources == {"cpu": 3000, "memory": 3 * 1024**3}
    assert group.priority is None
    assert group.min_task_members == {}


def test_full_spec() -> None:
    raw = volcano(
        {
            "minMember": 4,
            "minTaskMember": {"ps": 1, "worker": 3, "idle": 0},
            "queue": "research",
            "priorityClassName": "polite",
        }
    )
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert group.min_task_members == {"ps": 1, "worker": 3}  # 0 asks for nothing
    assert (group.priority, group.priority_class_name, group.preemption_policy) == (
        500,
        "polite",
        PREEMPT_NEVER,
    )
    assert volcano_queue(raw["spec"]) == "research"


def test_min_member_zero_is_a_group_of_any_size() -> None:
    assert pod_group_from_raw(volcano({"minMember": 0}), priorities=CLASSES).min_member == 1
    assert pod_group_from_raw(volcano({}), priorities=CLASSES).min_member == 1


def test_problems_name_the_field() -> None:
    raw = volcano(
        {
            "minMember": -2,
            "minTaskMember": {"worker": -1, "ps": "one"},
            "priorityClassName": "missing",
            "queue": 7,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    )
    problems = problems_of(raw)
    assert problems[:3] == [
        "PodGroup ml/lws-0-abc: spec.minMember: must not be negative, got -2",
        "PodGroup ml/lws-0-abc: spec.minTaskMember.worker: must not be negative, got -1",
        'PodGroup ml/lws-0-abc: spec.minTaskMember.ps: must be an integer, got string "one"',
    ]
    assert problems[3].startswith("PodGroup ml/lws-0-abc: spec.queue: must be a string")
    assert problems[4].startswith("PodGroup ml/lws-0-abc: spec.priorityClassName: ")
    assert "missing" in problems[4]
    assert problems[5].startswith(
        "PodGroup ml/lws-0-abc: spec.networkTopology: Volcano network-topology placement"
    )
    assert len(problems) == 6


def test_default_queue_is_reported_like_any_other() -> None:
    assert volcano_queue({"queue": "default"}) == "default"
    assert volcano_queue({}) == ""


def raw_pod(annotations: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "lws-0",
            "namespace": "ml",
            "annotations": annotations,
            "labels": labels or {},
        },
        "spec": {"schedulerName": "gangsched", "containers": [{"name": "c"}]},
    }


@pytest.mark.parametrize(
    "key", ["scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name"]
)
def test_pod_joins_by_annotation(key: str) -> None:
    raw = raw_pod({key: "lws-0-abc", "volcano.sh/task-spec": "worker"})
    pod = pod_from_raw(raw, priorities=CLASSES)
    assert pod.group == GroupRef(Dialect.VOLCANO, "ml", "lws-0-abc")
    assert pod.task == "worker"


def test_kube_annotation_wins_over_volcano_one_and_labels_over_both() -> None:
    both = {"scheduling.k8s.io/group-name": "a", "scheduling.volcano.sh/group-name": "b"}
    assert pod_from_raw(raw_pod(both), priorities=CLASSES).group == GroupRef(
        Dialect.VOLCANO, "ml", "a"
    )
    labelled = raw_pod(both, {"scheduling.x-k8s.io/pod-group": "c"})
    assert pod_from_raw(labelled, priorities=CLASSES).group == GroupRef(Dialect.X_K8S, "ml", "c")
