"""pod_from_raw: what kube-scheduler would derive from a pod after defaulting and admission
(identity, priority, group, scheduling gates, OS; requests and placement have their own files)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw
from gangsched.core.model import (
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    Dialect,
    GroupRef,
    PriorityClass,
)
from tests.unit.api.pod_json import NO_CLASSES, problems_of, raw_pod


# -- basics -------------------------------------------------------------------------------------
def test_defaults_for_a_minimal_pod() -> None:
    pod = pod_from_raw(raw_pod(), priorities=NO_CLASSES)
    assert (pod.namespace, pod.name) == ("default", "web-1")
    assert pod.scheduler_name == "default-scheduler"
    assert pod.phase == "Pending"
    assert pod.priority == 0
    assert pod.preemption_policy == PREEMPT_LOWER_PRIORITY
    assert pod.requests == {}
    assert pod.group is None
    assert pod.node_name is None
    assert pod.created == 0.0
    assert not pod.terminating


def test_namespace_defaults_to_default() -> None:
    raw = raw_pod()
    del raw["metadata"]["namespace"]
    assert pod_from_raw(raw, priorities=NO_CLASSES).namespace == "default"


def test_metadata_and_status_fields() -> None:
    raw = raw_pod(schedulerName="gangsched")
    raw["metadata"].update(
        uid="u-1",
        labels={"app": "web"},
        creationTimestamp="2026-01-01T00:00:01Z",
        deletionTimestamp="2026-01-01T00:10:00Z",
    )
    raw["status"] = {"phase": "Running", "nominatedNodeName": "n2"}
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.uid == "u-1"
    assert pod.labels == {"app": "web"}
    assert pod.scheduler_name == "gangsched"
    assert pod.created == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC).timestamp()
    assert pod.terminating
    assert pod.deleting_at == datetime(2026, 1, 1, 0, 10, 0, tzinfo=UTC).timestamp()
    assert pod.phase == "Running"
    assert pod.nominated_node_name == "n2"


def test_unquoted_yaml_timestamp_is_accepted() -> None:
    raw = raw_pod()
    raw["metadata"]["creationTimestamp"] = datetime(2026, 1, 1, tzinfo=UTC)
    assert (
        pod_from_raw(raw, priorities=NO_CLASSES).created
        == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    )


def test_node_name_binds_the_pod_and_is_not_a_constraint() -> None:
    pod = pod_from_raw(raw_pod(nodeName="n1"), priorities=NO_CLASSES)
    assert pod.node_name == "n1"
    assert pod.is_bound
    assert pod.constraints.node_name is None


# -- priority -----------------------------------------------------------------------------------
CLASSES = PriorityResolver(
    [
        PriorityClass("high", 1000),
        PriorityClass("gentle", 500, preemption_policy=PREEMPT_NEVER),
    ]
)


def test_priority_from_class_name() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="high"), priorities=CLASSES)
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (
        1000,
        "high",
        PREEMPT_LOWER_PRIORITY,
    )


def test_explicit_priority_wins_over_the_class() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="high", priority=7), priorities=CLASSES)
    assert pod.priority == 7


def test_explicit_priority_tolerates_a_deleted_class() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="gone", priority=7), priorities=CLASSES)
    assert (pod.priority, pod.priority_class_name) == (7, "gone")


def test_unknown_class_is_an_error() -> None:
    assert problems_of(raw_pod(priorityClassName="nope"), CLASSES) == [
        'Pod default/web-1: spec.priorityClassName: no PriorityClass with name "nope" was found'
    ]


def test_system_classes_always_exist() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="system-node-critical"), priorities=NO_CLASSES)
    assert pod.priority == 2_000_001_000


def test_group_label_sigs() -> None:
    raw = raw_pod()
    raw["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "train"}
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.group == GroupRef(Dialect.SIGS, "default", "train")
    assert pod.annotation_min_available is None


def test_group_label_x_k8s() -> None:
    raw = raw_pod()
    raw["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "train"}
    assert pod_from_raw(raw, priorities=NO_CLASSES).group == GroupRef(
        Dialect.X_K8S, "default", "train"
    )


def test_group_upstream_scheduling_group() -> None:
    raw = raw_pod(schedulingGroup={"podGroupName": "train"})
    assert pod_from_raw(raw, priorities=NO_CLASSES).group == GroupRef(
        Dialect.UPSTREAM, "default", "train"
    )


def test_group_koordinator_annotations() -> None:
    raw = raw_pod()
    raw["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": "gang-a",
        "gang.scheduling.koordinator.sh/min-available": "3",
    }
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.group == GroupRef(Dialect.KOORDINATOR, "default", "gang-a")
    assert pod.annotation_min_available == 3


def test_sigs_label_wins_over_koordinator_annotation() -> None:
    raw = raw_pod()
    raw["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "pg"}
    raw["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": "gang-a",
        "gang.scheduling.koordinator.sh/min-available": "3",
    }
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.group == GroupRef(Dialect.SIGS, "default", "pg")
    assert pod.annotation_min_available is None


def test_bad_koordinator_min_available() -> None:
    raw = raw_pod()
    raw["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": "gang-a",
        "gang.scheduling.koordinator.sh/min-available": "three",
    }
    assert problems_of(raw) == [
        "Pod default/web-1: metadata.annotations[gang.scheduling.koordinator.sh/min-available]: "
        '"three" must be a whole number of pods'
    ]


def test_bad_phase_and_preemption_policy() -> None:
    raw = raw_pod(preemptionPolicy="Sometimes")
    raw["status"] = {"phase": "Sleeping"}
    assert problems_of(raw) == [
        'Pod default/web-1: spec.preemptionPolicy: unknown value "Sometimes"; must be one of '
        "PreemptLowerPriority, Never",
        'Pod default/web-1: status.phase: unknown value "Sleeping"; must be one of Pending, '
        "Running, Succeeded, Failed, Unknown",
    ]


def test_not_a_mapping() -> None:
    with pytest.raises(InvalidObject, match="must be a mapping"):
        pod_from_raw(["not", "a", "pod"], priorities=NO_CLASSES)  # type: ignore[arg-type]


# -- scheduling gates ---------------------------------------------------------------------------
def test_scheduling_gates_are_read_in_order() -> None:
    gates = [{"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/quota"}]
    pod = pod_from_raw(raw_pod(schedulingGates=gates), priorities=NO_CLASSES)
    assert pod.scheduling_gates == ("kueue.x-k8s.io/admission", "example.com/quota")
    assert pod.is_gated
    assert not pod_from_raw(raw_pod(), priorities=NO_CLASSES).is_gated


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        ({"schedulingGates": [{}]}, "spec.schedulingGates[0].name", "is required"),
        (
            {"schedulingGates": [{"name": "a"}, {"name": "a"}]},
            "spec.schedulingGates[1].name",
            'duplicate gate "a"',
        ),
        (
            {"schedulingGates": [{"name": "a"}], "nodeName": "n1"},
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ),
        ({"schedulingGates": "a"}, "spec.schedulingGates", "must be a list"),
    ],
)
def test_bad_gates_name_the_field(spec: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        pod_from_raw(raw_pod(**spec), priorities=NO_CLASSES)
    text = str(caught.value)
    assert field in text and problem in text, text


# -- OS ----------------------------------------------------------------------------------------
def test_os_name_is_read_and_checked() -> None:
    assert pod_from_raw(raw_pod(os={"name": "windows"}), priorities=NO_CLASSES).os_name == "windows"
    assert pod_from_raw(raw_pod(), priorities=NO_CLASSES).os_name == ""
    with pytest.raises(InvalidObject) as caught:
        pod_from_raw(raw_pod(os={"name": "plan9"}), priorities=NO_CLASSES)
    assert 'spec.os.name: must be linux or windows, got "plan9"' in str(caught.value)
