"""What the capacity wait reads (issue 32 item 2): the PodGroup annotation of every dialect,
the pods' Unschedulable condition time, the nodes' creation time."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw, pod_group_from_raw
from gangsched.core.api.capacity_wait import WAIT_FOR_CAPACITY_ANNOTATION, format_duration
from gangsched.core.api.nodes import node_from_raw
from gangsched.core.model import Dialect
from tests.builders import raw_node, raw_pod, raw_pod_group

NO_CLASSES = PriorityResolver()


def annotated(value: Any, dialect: Dialect = Dialect.SIGS) -> dict[str, Any]:
    raw = raw_pod_group("train", 2, dialect=dialect)
    raw["metadata"]["annotations"] = {WAIT_FOR_CAPACITY_ANNOTATION: value}
    return raw


@pytest.mark.parametrize("dialect", [Dialect.SIGS, Dialect.X_K8S, Dialect.UPSTREAM])
def test_every_dialect_reads_the_annotation(dialect: Dialect) -> None:
    group = pod_group_from_raw(annotated("600", dialect), priorities=NO_CLASSES)
    assert group.capacity_wait == 600.0
    plain = pod_group_from_raw(raw_pod_group("train", 2, dialect=dialect), priorities=NO_CLASSES)
    assert plain.capacity_wait is None


def test_zero_means_preempt_at_once() -> None:
    assert pod_group_from_raw(annotated("0"), priorities=NO_CLASSES).capacity_wait == 0.0


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("10m", "is not a whole number of seconds"),
        ("-5", "is not a whole number of seconds"),
        ("", "is not a whole number of seconds"),
        ("604801", "more than the allowed maximum of 604800"),
        (30, "must be a string"),
    ],
)
def test_a_bad_value_is_refused_naming_the_annotation(value: Any, why: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        pod_group_from_raw(annotated(value), priorities=NO_CLASSES)
    problems = sorted({str(p) for p in caught.value.problems})
    assert len(problems) == 1, problems
    assert f"metadata.annotations[{WAIT_FOR_CAPACITY_ANNOTATION}]" in problems[0]
    assert why in problems[0]


def test_the_pods_unschedulable_condition_time_is_read() -> None:
    conditions = [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": "2026-01-31T12:00:00Z",
        },
    ]
    pod = pod_from_raw(raw_pod("p", status={"conditions": conditions}), priorities=NO_CLASSES)
    assert pod.unschedulable_since == 1769860800.0
    # Held before the cycle (not Unschedulable): no autoscaler reacts, no wait starts.
    held = [{**conditions[1], "reason": "NotReadyForScheduling"}]
    pod = pod_from_raw(raw_pod("p", status={"conditions": held}), priorities=NO_CLASSES)
    assert pod.unschedulable_since is None


def test_the_nodes_creation_time_is_read() -> None:
    raw = raw_node("n1")
    assert node_from_raw(raw).created == 0.0
    raw["metadata"]["creationTimestamp"] = "2026-01-31T12:00:00Z"
    assert node_from_raw(raw).created == 1769860800.0


def test_durations_read_as_go_prints_them() -> None:
    assert [format_duration(s) for s in (0, 45, 60, 90, 3600, 5400)] == [
        "0s",
        "45s",
        "1m0s",
        "1m30s",
        "1h0m0s",
        "1h30m0s",
    ]
