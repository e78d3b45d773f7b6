"""Koordinator's gang API: annotations on PodGroups and pods, and the lightweight labels."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw, pod_group_from_raw
from gangsched.core.model import Dialect, GangMode, GroupRef, MatchPolicy

NO_CLASSES = PriorityResolver()
PREFIX = "gang.scheduling.koordinator.sh"


def raw_pod(labels: dict[str, str] | None = None, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "w-0",
            "namespace": "ml",
            "labels": labels or {},
            "annotations": {key.replace("_", "-"): value for key, value in annotations.items()},
        },
        "spec": {"containers": [{"name": "main"}]},
    }


def koord(**annotations: str) -> dict[str, str]:
    return {f"{PREFIX}/{key.replace('_', '-')}": value for key, value in annotations.items()}


def raw_group(annotations: dict[str, str], min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "b", "namespace": "ml", "annotations": annotations},
        "spec": {"minMember": min_member},
    }


def pod_problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        pod_from_raw(raw, priorities=NO_CLASSES)
    return [str(p) for p in caught.value.problems]


def group_problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        pod_group_from_raw(raw, priorities=NO_CLASSES)
    return [str(p) for p in caught.value.problems]


def pod_with(annotations: dict[str, str], labels: dict[str, str] | None = None) -> Any:
    raw = raw_pod(labels)
    raw["metadata"]["annotations"] = annotations
    return pod_from_raw(raw, priorities=NO_CLASSES)


# -- pods of annotation gangs -------------------------------------------------------------------
def test_annotation_gang_reads_every_key() -> None:
    pod = pod_with(
        koord(
            name="g",
            min_available="2",
            total_number="4",
            mode="NonStrict",
            match_policy="only-waiting",
            groups='["ml/g", "ml/h"]',
        )
    )
    assert pod.group == GroupRef(Dialect.KOORDINATOR, "ml", "g")
    spec = pod.gang_annotations
    assert spec is not None
    assert (spec.min_available, spec.total_number, spec.mode, spec.match_policy) == (
        2,
        4,
        GangMode.NON_STRICT,
        MatchPolicy.ONLY_WAITING,
    )
    assert spec.gang_group == (
        GroupRef(Dialect.KOORDINATOR, "ml", "g"),
        GroupRef(Dialect.KOORDINATOR, "ml", "h"),
    )


def test_lightweight_labels_define_an_annotation_gang() -> None:
    labels = {
        "pod-group.scheduling.sigs.k8s.io/name": "lw",
        "pod-group.scheduling.sigs.k8s.io/min-available": "3",
    }
    pod = pod_with({}, labels)
    assert pod.group == GroupRef(Dialect.KOORDINATOR, "ml", "lw")
    assert pod.annotation_min_available == 3


def test_lightweight_size_wins_over_the_annotation_and_sigs_label_over_both() -> None:
    labels = {"pod-group.scheduling.sigs.k8s.io/min-available": "3"}
    pod = pod_with(koord(name="g", min_available="5"), labels)
    assert (pod.group, pod.annotation_min_available) == (
        GroupRef(Dialect.KOORDINATOR, "ml", "g"),
        3,
    )
    labels = {
        "pod-group.scheduling.sigs.k8s.io": "pg",
        "pod-group.scheduling.sigs.k8s.io/name": "lw",
    }
    assert pod_with({}, labels).group == GroupRef(Dialect.SIGS, "ml", "pg")
    # The lightweight name label comes before the gang annotation, as in Koordinator.
    labels = {"pod-group.scheduling.sigs.k8s.io/name": "lw"}
    assert pod_with(koord(name="g"), labels).group == GroupRef(Dialect.KOORDINATOR, "ml", "lw")


def test_match_policy_alias_is_read_when_the_main_key_is_absent() -> None:
    alias = {"pod-group.scheduling.sigs.k8s.io/match-policy": "waiting-and-running"}
    pod = pod_with({**koord(name="g", min_available="2"), **alias})
    assert pod.gang_annotations is not None
    assert pod.gang_annotations.match_policy is MatchPolicy.WAITING_AND_RUNNING
    both = {**koord(name="g", min_available="2", match_policy="only-waiting"), **alias}
    spec = pod_with(both).gang_annotations
    assert spec is not None and spec.match_policy is MatchPolicy.ONLY_WAITING


def test_total_number_zero_or_empty_is_unset() -> None:
    for raw in ("", "0"):
        spec = pod_with(koord(name="g", min_available="2", total_number=raw)).gang_annotations
        assert spec is not None and spec.total_number is None


def test_values_koordinator_would_silently_replace_are_refused() -> None:
    raw = raw_pod()
    raw["metadata"]["annotations"] = koord(
        name="g",
        min_available="3",
        total_number="2",
        mode="Lenient",
        match_policy="sometimes",
        groups="ml/a,ml/b",
    )
    key = "metadata.annotations[gang.scheduling.koordinator.sh/{}]"
    assert pod_problems(raw) == [
        f"Pod ml/w-0: {key.format('total-number')}: must be at least min-available (3), got 2",
        f'Pod ml/w-0: {key.format("mode")}: unknown mode "Lenient"; use Strict or NonStrict',
        f'Pod ml/w-0: {key.format("match-policy")}: unknown match policy "sometimes"; use '
        "once-satisfied, only-waiting, waiting-and-running",
        f'Pod ml/w-0: {key.format("groups")}: "ml/a,ml/b" must be a JSON list of '
        '"namespace/name" strings, e.g. ["default/a", "default/b"]',
    ]


def test_bad_lightweight_size_names_the_label() -> None:
    raw = raw_pod(
        {
            "pod-group.scheduling.sigs.k8s.io/name": "lw",
            "pod-group.scheduling.sigs.k8s.io/min-available": "many",
        }
    )
    assert pod_problems(raw) == [
        "Pod ml/w-0: metadata.labels[pod-group.scheduling.sigs.k8s.io/min-available]: "
        '"many" must be a whole number of pods'
    ]


def test_bad_alias_match_policy_names_the_alias() -> None:
    raw = raw_pod()
    raw["metadata"]["annotations"] = {
        **koord(name="g", min_available="1"),
        "pod-group.scheduling.sigs.k8s.io/match-policy": "Once",
    }
    assert pod_problems(raw) == [
        "Pod ml/w-0: metadata.annotations[pod-group.scheduling.sigs.k8s.io/match-policy]: "
        'unknown match policy "Once"; use once-satisfied, only-waiting, waiting-and-running'
    ]


# -- PodGroups ----------------------------------------------------------------------------------
def test_pod_group_annotations() -> None:
    group = pod_group_from_raw(
        raw_group(koord(total_number="5", mode="NonStrict", match_policy="once-satisfied")),
        priorities=NO_CLASSES,
    )
    assert (group.total_number, group.gang_mode, group.match_policy) == (
        5,
        GangMode.NON_STRICT,
        MatchPolicy.ONCE_SATISFIED,
    )
    plain = pod_group_from_raw(raw_group({}), priorities=NO_CLASSES)
    assert (plain.total_number, plain.gang_mode, plain.match_policy) == (
        None,
        GangMode.STRICT,
        None,
    )


def test_pod_group_total_below_min_member_is_refused() -> None:
    assert group_problems(raw_group(koord(total_number="1"), min_member=2)) == [
        "PodGroup ml/b: metadata.annotations[gang.scheduling.koordinator.sh/total-number]: "
        "must be at least spec.minMember (2), got 1"
    ]
    assert group_problems(raw_group(koord(total_number="-3"))) == [
        "PodGroup ml/b: metadata.annotations[gang.scheduling.koordinator.sh/total-number]: "
        "must be at least 1, got -3"
    ]
