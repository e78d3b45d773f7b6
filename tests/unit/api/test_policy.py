"""Priority resolution (admission semantics) and PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.api import (
    InvalidObject,
    PriorityResolver,
    UnknownPriorityClass,
    compute_disruptions_allowed,
    has_reported_disruptions,
    label_selector_from_raw,
    pdb_from_raw,
    pod_from_raw,
    priority_class_from_raw,
)
from gangsched.core.labels import LabelSelector, Requirement
from gangsched.core.model import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER, Pod, PriorityClass


def raw_class(name: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def raw_pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


# -- PriorityClass ------------------------------------------------------------------------------
def test_priority_class_fields() -> None:
    pc = priority_class_from_raw(
        raw_class("batch", 100, globalDefault=True, preemptionPolicy="Never")
    )
    assert pc == PriorityClass("batch", 100, global_default=True, preemption_policy=PREEMPT_NEVER)
    assert priority_class_from_raw(raw_class("x", -5)).preemption_policy == PREEMPT_LOWER_PRIORITY


def test_priority_class_problems() -> None:
    with pytest.raises(InvalidObject) as caught:
        priority_class_from_raw(raw_class("huge", 2_000_000_000, preemptionPolicy="Maybe"))
    assert [str(p) for p in caught.value.problems] == [
        "PriorityClass huge: value: must be at most 1000000000 (higher values are reserved for "
        "system-* classes), got 2000000000",
        'PriorityClass huge: preemptionPolicy: unknown value "Maybe"; must be one of '
        "PreemptLowerPriority, Never",
    ]
    missing = raw_class("none", 0)
    del missing["value"]
    with pytest.raises(InvalidObject, match="PriorityClass none: value: is required"):
        priority_class_from_raw(missing)
    with pytest.raises(InvalidObject, match='value: must be an integer, got string "10"'):
        priority_class_from_raw(raw_class("str", "10"))


def test_system_classes_may_exceed_the_user_limit() -> None:
    assert priority_class_from_raw(raw_class("system-custom", 2_000_000_000)).value == 2_000_000_000


# -- resolver -----------------------------------------------------------------------------------
def test_resolver_named_default_and_unknown() -> None:
    resolver = PriorityResolver(
        [PriorityClass("low", 10), PriorityClass("default", 50, global_default=True)]
    )
    low = resolver.resolve("low")
    assert low is not None and low.value == 10
    default = resolver.resolve("")
    assert default is not None and default.name == "default"
    with pytest.raises(UnknownPriorityClass):
        resolver.resolve("nope")
    assert PriorityResolver().resolve("") is None


def test_racing_global_defaults_resolve_to_the_lowest() -> None:
    resolver = PriorityResolver(
        [PriorityClass("a", 50, global_default=True), PriorityClass("b", 20, global_default=True)]
    )
    assert resolver.global_default == PriorityClass("b", 20, global_default=True)


def test_pod_without_class_gets_the_global_default() -> None:
    resolver = PriorityResolver(
        [PriorityClass("base", 7, global_default=True, preemption_policy=PREEMPT_NEVER)]
    )
    pod = pod_from_raw(raw_pod(), priorities=resolver)
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (
        7,
        "base",
        PREEMPT_NEVER,
    )


def test_pod_without_class_or_default_has_priority_zero() -> None:
    pod = pod_from_raw(raw_pod(), priorities=PriorityResolver())
    assert (pod.priority, pod.priority_class_name) == (0, "")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"priorityClassName": "polite"}, PREEMPT_NEVER),  # from the class
        (
            {"priorityClassName": "polite", "preemptionPolicy": "PreemptLowerPriority"},
            "PreemptLowerPriority",
        ),
        ({"priorityClassName": "eager", "preemptionPolicy": "Never"}, PREEMPT_NEVER),  # spec wins
        ({"priorityClassName": "eager"}, PREEMPT_LOWER_PRIORITY),
        ({}, PREEMPT_LOWER_PRIORITY),  # no class, no default
    ],
)
def test_preemption_policy_precedence(spec: dict[str, Any], expected: str) -> None:
    resolver = PriorityResolver(
        [PriorityClass("polite", 1, preemption_policy=PREEMPT_NEVER), PriorityClass("eager", 2)]
    )
    assert pod_from_raw(raw_pod(**spec), priorities=resolver).preemption_policy == expected


# -- label selectors ----------------------------------------------------------------------------
def test_label_selector_standalone() -> None:
    selector = label_selector_from_raw(
        {
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "c", "operator": "NotIn", "values": ["x"]}],
        }
    )
    assert selector == LabelSelector(
        match_labels=(("a", "1"), ("b", "2")),
        match_expressions=(Requirement("c", "NotIn", ("x",)),),
    )
    assert label_selector_from_raw(None) is None
    with pytest.raises(InvalidObject) as caught:
        label_selector_from_raw(
            {"matchExpressions": [{"key": "c", "operator": "Exists", "values": ["x"]}]}
        )
    assert str(caught.value.problems[0]) == (
        "selector.matchExpressions[0].values: must be empty for operator Exists"
    )


# -- PodDisruptionBudget --------------------------------------------------------------------------
def raw_pdb(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, **spec},
    }
    if status is not None:
        body["status"] = status
    return body


def healthy(count: int) -> list[Pod]:
    return [Pod("default", f"db-{i}", labels={"app": "db"}, node_name="n1") for i in range(count)]


def test_pdb_reads_reported_status() -> None:
    raw = raw_pdb({"minAvailable": 2}, {"disruptionsAllowed": 1})
    budget = pdb_from_raw(raw)
    assert budget.key == "default/guard"
    assert budget.selector == LabelSelector(match_labels=(("app", "db"),))
    assert budget.disruptions_allowed == 1
    assert has_reported_disruptions(raw)
    assert not has_reported_disruptions(raw_pdb({"minAvailable": 2}))


@pytest.mark.parametrize(
    ("spec", "pods", "allowed"),
    [
        ({"minAvailable": 2}, 3, 1),
        ({"minAvailable": 2}, 2, 0),
        ({"minAvailable": 5}, 3, 0),
        ({"minAvailable": "50%"}, 3, 1),  # ceil(1.5) = 2 must stay
        ({"minAvailable": "50%"}, 4, 2),
        ({"minAvailable": "100%"}, 4, 0),
        ({"maxUnavailable": 1}, 3, 1),
        ({"maxUnavailable": 5}, 3, 3),
        ({"maxUnavailable": "30%"}, 4, 2),  # ceil(1.2) = 2 may go
        ({"maxUnavailable": "0%"}, 4, 0),
        ({"maxUnavailable": 1}, 0, 0),
        ({}, 3, 0),  # neither field: the controller expects no pods
    ],
)
def test_compute_disruptions_allowed(spec: dict[str, Any], pods: int, allowed: int) -> None:
    assert compute_disruptions_allowed(raw_pdb(spec), matching_pods=healthy(pods)) == allowed


def test_null_selector_selects_nothing_and_empty_selects_all() -> None:
    nothing = pdb_from_raw(raw_pdb({"selector": None, "minAvailable": 1}))
    assert not nothing.selector.matches({"app": "db"})
    assert not nothing.selector.matches({})
    everything = pdb_from_raw(raw_pdb({"selector": {}, "minAvailable": 1}))
    assert everything.selector.matches({"anything": "x"})


def test_pdb_problems() -> None:
    raw = raw_pdb({"minAvailable": "half", "maxUnavailable": -1})
    raw["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "Equals"}]}
    with pytest.raises(InvalidObject) as caught:
        pdb_from_raw(raw)
    assert [str(p) for p in caught.value.problems] == [
        "PodDisruptionBudget default/guard: spec.selector.matchExpressions[0].operator: unknown "
        'operator "Equals"; use DoesNotExist, Exists, In, NotIn',
        'PodDisruptionBudget default/guard: spec.minAvailable: "half" must be an integer or a '
        'percentage such as "50%"',
        "PodDisruptionBudget default/guard: spec.maxUnavailable: must not be negative, got -1",
        "PodDisruptionBudget default/guard: spec: minAvailable and maxUnavailable cannot be "
        "both set",
    ]
    with pytest.raises(InvalidObject, match='"150%" must not exceed 100%'):
        pdb_from_raw(raw_pdb({"minAvailable": "150%"}))
