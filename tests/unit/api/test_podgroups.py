"""pod_group_from_raw across the sigs, x-k8s, upstream and Koordinator dialects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_group_from_raw
from gangsched.core.model import (
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    Dialect,
    DisruptionMode,
    GroupRef,
    PriorityClass,
)

CLASSES = PriorityResolver(
    [PriorityClass("high", 1000), PriorityClass("polite", 500, preemption_policy=PREEMPT_NEVER)]
)
WITH_DEFAULT = PriorityResolver([PriorityClass("base", 5, global_default=True)])
GROUPS = "gang.scheduling.koordinator.sh/groups"


def raw_group(api_version: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml", **metadata},
        "spec": spec,
    }


def sigs(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return raw_group("scheduling.sigs.k8s.io/v1alpha1", spec, **metadata)


def upstream(spec: dict[str, Any], version: str = "v1alpha3") -> dict[str, Any]:
    return raw_group(f"scheduling.k8s.io/{version}", spec)


def problems_of(raw: dict[str, Any], priorities: PriorityResolver = CLASSES) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        pod_group_from_raw(raw, priorities=priorities)
    return [str(problem) for problem in caught.value.problems]


# -- scheduling.sigs.k8s.io ---------------------------------------------------------------------
def test_sigs_full_spec() -> None:
    raw = sigs(
        {
            "minMember": 3,
            "minResources": {"cpu": "6", "memory": "12Gi", "nvidia.com/gpu": 3},
            "scheduleTimeoutSeconds": 300,
            "priorityClassName": "polite",
            "disruptionMode": "All",
        },
        uid="uid-1",
        creationTimestamp="2026-01-01T00:00:00Z",
    )
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert group.ref == GroupRef(Dialect.SIGS, "ml", "train")
    assert group.min_member == 3
    assert group.min_resources == {"cpu": 6000, "memory": 12 * 1024**3, "nvidia.com/gpu": 3}
    assert group.schedule_timeout_seconds == 300
    assert (group.priority_class_name, group.priority, group.preemption_policy) == (
        "polite",
        500,
        PREEMPT_NEVER,
    )
    assert group.disruption_mode is DisruptionMode.ALL
    assert group.gang_group == ()
    assert group.uid == "uid-1"
    assert group.created == 1767225600.0


def test_sigs_without_class_has_no_priority_even_with_a_global_default() -> None:
    group = pod_group_from_raw(sigs({"minMember": 2}), priorities=WITH_DEFAULT)
    assert group.priority is None
    assert group.preemption_policy is None
    assert group.disruption_mode is DisruptionMode.SINGLE


def test_sigs_problems_are_collected() -> None:
    raw = sigs(
        {
            "minMember": 0,
            "minResources": {"cpu": "lots"},
            "scheduleTimeoutSeconds": -5,
            "priorityClassName": "nope",
            "disruptionMode": "Whole",
        }
    )
    assert problems_of(raw) == [
        "PodGroup ml/train: spec.minMember: must be at least 1, got 0",
        'PodGroup ml/train: spec.minResources.cpu: "lots" is not a valid quantity '
        "(e.g. 500m, 2, 1.5Gi, 1e3)",
        "PodGroup ml/train: spec.scheduleTimeoutSeconds: must be at least 1, got -5",
        'PodGroup ml/train: spec.priorityClassName: no PriorityClass with name "nope" was found',
        'PodGroup ml/train: spec.disruptionMode: unknown disruptionMode "Whole"; use Single or All',
    ]


def test_sigs_min_member_is_required() -> None:
    assert problems_of(sigs({})) == ["PodGroup ml/train: spec.minMember: is required"]


def test_missing_name() -> None:
    raw = sigs({"minMember": 1})
    del raw["metadata"]["name"]
    assert problems_of(raw) == ["PodGroup ml/<unnamed>: metadata.name: is required"]


# -- Koordinator GangGroup ------------------------------------------------------------------------
def test_koordinator_gang_group_annotation() -> None:
    annotation = json.dumps(["ml/train", "ml/eval", "other/prep"])
    group = pod_group_from_raw(
        sigs({"minMember": 1}, annotations={GROUPS: annotation}), priorities=CLASSES
    )
    assert group.gang_group == (
        GroupRef(Dialect.SIGS, "ml", "train"),
        GroupRef(Dialect.SIGS, "ml", "eval"),
        GroupRef(Dialect.SIGS, "other", "prep"),
    )


def test_koordinator_gang_group_includes_self_and_dedupes() -> None:
    annotation = json.dumps(["ml/eval", "ml/eval"])
    group = pod_group_from_raw(
        sigs({"minMember": 1}, annotations={GROUPS: annotation}), priorities=CLASSES
    )
    assert group.gang_group == (
        GroupRef(Dialect.SIGS, "ml", "eval"),
        GroupRef(Dialect.SIGS, "ml", "train"),
    )


def test_koordinator_gang_group_of_only_itself_bundles_nothing() -> None:
    group = pod_group_from_raw(
        sigs({"minMember": 1}, annotations={GROUPS: '["ml/train"]'}), priorities=CLASSES
    )
    assert group.gang_group == ()


def test_seed_gang_group_example() -> None:
    annotation = '["default/gang-example1", "default/gang-example2"]'
    raw = sigs({"minMember": 2}, annotations={GROUPS: annotation})
    raw["metadata"].update(name="gang-example2", namespace="default")
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert [ref.key for ref in group.gang_group] == [
        "default/gang-example1",
        "default/gang-example2",
    ]


def test_bad_gang_group_annotation() -> None:
    bad_json = sigs({"minMember": 1}, annotations={GROUPS: "[ml/a"})
    assert problems_of(bad_json) == [
        f"PodGroup ml/train: metadata.annotations[{GROUPS}]: "
        '"[ml/a" must be a JSON list of "namespace/name" strings, e.g. ["default/a", "default/b"]'
    ]
    bad_entry = sigs({"minMember": 1}, annotations={GROUPS: '["a/b/c", 3]'})
    found = problems_of(bad_entry)
    assert len(found) == 2
    assert 'a/b/c" is not a valid "namespace/name"' in found[0]


# -- scheduling.x-k8s.io --------------------------------------------------------------------------
def test_x_k8s() -> None:
    raw = raw_group(
        "scheduling.x-k8s.io/v1alpha1",
        {"minMember": 4, "minResources": {"cpu": "1"}, "scheduleTimeoutSeconds": 60},
    )
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert group.ref == GroupRef(Dialect.X_K8S, "ml", "train")
    assert (group.min_member, group.min_resources, group.schedule_timeout_seconds) == (
        4,
        {"cpu": 1000},
        60,
    )
    assert group.priority is None


def test_x_k8s_min_member_is_optional() -> None:
    group = pod_group_from_raw(raw_group("scheduling.x-k8s.io/v1alpha1", {}), priorities=CLASSES)
    assert group.min_member == 1


def test_x_k8s_bad_min_member() -> None:
    raw = raw_group("scheduling.x-k8s.io/v1alpha1", {"minMember": -1})
    assert problems_of(raw) == ["PodGroup ml/train: spec.minMember: must be at least 1, got -1"]


# -- scheduling.k8s.io (upstream) ------------------------------------------------------------
def test_upstream_gang_v1alpha3() -> None:
    raw = upstream(
        {
            "schedulingPolicy": {"gang": {"minCount": 8}},
            "disruptionMode": {"all": {}},
            "priorityClassName": "high",
            "preemptionPolicy": "Never",
        }
    )
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert group.ref == GroupRef(Dialect.UPSTREAM, "ml", "train")
    assert group.min_member == 8
    assert group.disruption_mode is DisruptionMode.ALL
    assert (group.priority_class_name, group.priority, group.preemption_policy) == (
        "high",
        1000,
        PREEMPT_NEVER,
    )


def test_upstream_basic_is_a_group_of_one() -> None:
    raw = upstream({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"single": {}}})
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert group.min_member == 1
    assert group.disruption_mode is DisruptionMode.SINGLE


def test_upstream_v1alpha2_string_disruption_mode() -> None:
    raw = upstream(
        {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup"}, "v1alpha2"
    )
    assert pod_group_from_raw(raw, priorities=CLASSES).disruption_mode is DisruptionMode.ALL
    raw["spec"]["disruptionMode"] = "Pod"
    assert pod_group_from_raw(raw, priorities=CLASSES).disruption_mode is DisruptionMode.SINGLE


def test_upstream_v1beta1_is_read_like_v1alpha3() -> None:
    raw = upstream(
        {"schedulingPolicy": {"gang": {"minCount": 3}}, "disruptionMode": {"all": {}}}, "v1beta1"
    )
    raw["metadata"]["generation"] = 4
    group = pod_group_from_raw(raw, priorities=CLASSES)
    assert (group.min_member, group.disruption_mode, group.generation) == (
        3,
        DisruptionMode.ALL,
        4,
    )


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3"])
@pytest.mark.parametrize(
    ("mode", "detail"),
    [
        ("PodGroup", " (the v1alpha2 strings Pod and PodGroup are gone since v1alpha3)"),
        ("Pod", " (the v1alpha2 strings Pod and PodGroup are gone since v1alpha3)"),
        ({}, ""),
        ({"single": {}, "all": {}}, ""),
        ({"single": None}, ""),
    ],
)
def test_upstream_union_only_since_v1alpha3(version: str, mode: Any, detail: str) -> None:
    raw = upstream({"schedulingPolicy": {"basic": {}}, "disruptionMode": mode}, version)
    assert problems_of(raw) == [
        f"PodGroup ml/train: spec.disruptionMode: unknown disruptionMode "
        f"{json.dumps(mode)}; set exactly one of single: {{}} or all: {{}}{detail}"
    ]


def test_upstream_union_members_are_empty_structs() -> None:
    raw = upstream({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": True}}, "v1beta1")
    assert problems_of(raw) == [
        "PodGroup ml/train: spec.disruptionMode.all: must be a mapping, got boolean"
    ]


def test_upstream_v1alpha2_takes_only_strings() -> None:
    raw = upstream({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}}, "v1alpha2")
    assert problems_of(raw) == [
        'PodGroup ml/train: spec.disruptionMode: unknown disruptionMode {"all": {}}; v1alpha2 '
        "uses Pod or PodGroup"
    ]


def test_upstream_version_without_pod_groups() -> None:
    raw = upstream({"schedulingPolicy": {"basic": {}}}, "v1")
    assert problems_of(raw) == [
        'PodGroup ml/train: apiVersion: "scheduling.k8s.io/v1" does not serve PodGroups; use '
        "scheduling.k8s.io/v1beta1 (Kubernetes 1.37+), v1alpha3 (1.37+) or v1alpha2 (1.36)"
    ]


def test_upstream_priority_follows_admission() -> None:
    # No class: the global default, else zero; the preemption policy comes with the class.
    no_class = upstream({"schedulingPolicy": {"basic": {}}})
    group = pod_group_from_raw(no_class, priorities=WITH_DEFAULT)
    assert (group.priority_class_name, group.priority) == ("base", 5)
    assert group.preemption_policy == PREEMPT_LOWER_PRIORITY
    group = pod_group_from_raw(no_class, priorities=PriorityResolver())
    assert (group.priority_class_name, group.priority, group.preemption_policy) == ("", 0, None)
    # An explicit priority (set by admission on a live cluster) is trusted.
    explicit = upstream(
        {"schedulingPolicy": {"basic": {}}, "priority": 42, "priorityClassName": "x"}
    )
    assert pod_group_from_raw(explicit, priorities=CLASSES).priority == 42


def test_upstream_problems() -> None:
    raw = upstream(
        {
            "schedulingPolicy": {"gang": {"minCount": 0}},
            "disruptionMode": {"some": {}},
            "priorityClassName": "nope",
            "preemptionPolicy": "Always",
        }
    )
    assert problems_of(raw) == [
        "PodGroup ml/train: spec.schedulingPolicy.gang.minCount: must be at least 1, got 0",
        'PodGroup ml/train: spec.disruptionMode: unknown disruptionMode {"some": {}}; set exactly '
        "one of single: {} or all: {}",
        'PodGroup ml/train: spec.priorityClassName: no PriorityClass with name "nope" was found',
        'PodGroup ml/train: spec.preemptionPolicy: unknown value "Always"; must be one of '
        "PreemptLowerPriority, Never",
    ]


def test_upstream_scheduling_policy_shape() -> None:
    assert problems_of(upstream({})) == [
        "PodGroup ml/train: spec.schedulingPolicy: is required (basic: {} or gang: {minCount: N})"
    ]
    both = upstream({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}})
    assert problems_of(both) == [
        "PodGroup ml/train: spec.schedulingPolicy: must set exactly one of basic and gang, not both"
    ]
    missing = upstream({"schedulingPolicy": {"gang": {}}})
    assert problems_of(missing) == [
        "PodGroup ml/train: spec.schedulingPolicy.gang.minCount: is required"
    ]
    bad_mode = upstream({"schedulingPolicy": {"basic": {}}, "disruptionMode": "Everything"})
    assert "unknown disruptionMode" in problems_of(bad_mode)[0]


def test_unknown_api_group() -> None:
    raw = raw_group("scheduling.example.com/v1", {"minMember": 1})
    assert problems_of(raw) == [
        'PodGroup ml/train: apiVersion: "scheduling.example.com/v1" is not a PodGroup API '
        "group; use one of scheduling.sigs.k8s.io, scheduling.x-k8s.io, scheduling.k8s.io, "
        "scheduling.volcano.sh"
    ]
