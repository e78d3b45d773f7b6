"""The shortcuts of pod conversion give the models and problems of the full reading (issue 30).

A relist converts every pod before the first bind, so pod_from_raw shares what the pods of a
workload repeat (tolerations, container resources, creation times) and skips absent sections.
A shortcut taken wrongly would change a model or hide a problem without failing anything
else. These tests convert each pod twice: as the API server sends it, where the shortcuts
apply, and with the sections the shortcuts read handed over as read-only mappings and tuples,
which the converters accept but no shortcut does (they take exact dicts and lists only), so
the full field-by-field reading runs. Both must give equal models, or the same problems.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw
from gangsched.core.model import PriorityClass, Toleration

ROOT = Path(__file__).resolve().parents[3]
PRIORITIES = PriorityResolver(
    [PriorityClass(name=n, value=v) for n, v in (("high", 1000), ("ha-normal", 10), ("low", 1))]
)
GI = 1024**3

#: A pod as a real API server lists it for bench workload (a): defaulted tolerations,
#: managedFields, one container with requests.
LISTED: dict[str, Any] = {
    "metadata": {
        "name": "g0-0",
        "namespace": "default",
        "uid": "378a2eeb",
        "resourceVersion": "221",
        "generation": 1,
        "creationTimestamp": "2026-11-28T01:51:15Z",
        "labels": {"bench": "gang", "pod-group.scheduling.sigs.k8s.io": "g0"},
        "managedFields": [{"manager": "bench", "operation": "Update", "fieldsV1": {}}],
    },
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "pause",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "imagePullPolicy": "Always",
            }
        ],
        "restartPolicy": "Always",
        "schedulerName": "gangsched",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
    },
    "status": {"phase": "Pending", "qosClass": "Burstable"},
}


def full_reading(raw: Any) -> Any:
    """`raw` with what the shortcuts read as read-only mappings and tuples (see the module
    docstring); everything else as it was."""
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    for section, fields in (
        ("metadata", ("labels", "annotations")),
        ("spec", ("nodeSelector", "tolerations", "containers")),
    ):
        body = out.get(section)
        if not isinstance(body, dict):
            continue
        body = dict(body)
        for name in fields:
            body[name] = _read_only(body.get(name))
        out[section] = body
    return out


def _read_only(value: Any) -> Any:
    """One level down too: a toleration or container is read as a mapping either way."""
    if isinstance(value, dict):
        return MappingProxyType(value)
    if isinstance(value, list):
        return tuple(MappingProxyType(v) if isinstance(v, dict) else v for v in value)
    return value


def outcome(raw: Any) -> object:
    """The model's fields (a mapping's entries in order), or the problems as messages with
    their field paths. Pods compare by identity."""
    try:
        pod = pod_from_raw(raw, priorities=PRIORITIES)
    except InvalidObject as error:
        return [str(problem) for problem in error.problems]
    values = ((field.name, getattr(pod, field.name)) for field in dataclasses.fields(pod))
    return tuple((name, list(v.items()) if isinstance(v, dict) else v) for name, v in values)


def assert_same_either_way(raw: Any) -> None:
    expected = outcome(full_reading(raw))
    assert outcome(raw) == expected
    assert outcome(raw) == expected  # the second time from what the first one remembered


def test_a_listed_pod_converts_to_its_known_model() -> None:
    pod = pod_from_raw(LISTED, priorities=PRIORITIES)
    assert pod.requests == {"cpu": 1000, "memory": GI}
    assert pod.constraints.tolerations == (
        Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
        Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute"),
    )
    assert pod.labels == {"bench": "gang", "pod-group.scheduling.sigs.k8s.io": "g0"}
    assert pod.created == datetime(2026, 11, 28, 1, 51, 15, tzinfo=UTC).timestamp()
    assert pod.group is not None and pod.group.name == "g0"
    assert pod.affinity == pod.anti_affinity == ()
    assert pod.spread == ()
    assert pod.constraints.required_terms is None
    assert_same_either_way(LISTED)


def test_what_one_pod_left_behind_hides_no_problem_of_the_next() -> None:
    """Values that compare equal in a key (300, 300.0, True) read differently."""
    pod_from_raw(LISTED, priorities=PRIORITIES)
    spec = LISTED["spec"]
    for toleration_seconds in (True, "300", 300.5, [300]):
        tolerations = [dict(spec["tolerations"][0], tolerationSeconds=toleration_seconds)]
        raw = {**LISTED, "spec": {**spec, "tolerations": tolerations}}
        problems = outcome(raw)
        assert isinstance(problems, list) and len(problems) == 1
        assert "spec.tolerations[0].tolerationSeconds" in problems[0]
        assert_same_either_way(raw)
    over_limit = [
        {"name": "main", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}}
    ]
    raw = {**LISTED, "spec": {**spec, "containers": over_limit}}
    assert outcome(raw) == [
        "Pod default/g0-0: spec.containers[0].resources.requests.cpu: must be less than or "
        "equal to the cpu limit"
    ]
    assert_same_either_way(raw)


def manifests() -> list[dict[str, Any]]:
    """Every Pod in the repository's examples and fixtures."""
    found = []
    for path in sorted([*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/fixtures/**/*.yaml")]):
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue  # deliberately broken fixtures
        found += [d for d in documents if isinstance(d, dict) and d.get("kind") == "Pod"]
    return found


def test_the_repository_pods_convert_the_same_either_way() -> None:
    pods = manifests()
    assert len(pods) > 20
    for raw in pods:
        assert_same_either_way(raw)


# -- a variety of raw pods, valid and not -------------------------------------------------------
TEXT = st.sampled_from(["a", "gpu", "node.kubernetes.io/not-ready"])
EFFECT = st.sampled_from(["", "NoExecute", "NoSchedule", "PreferNoSchedule"])
toleration = st.fixed_dictionaries(
    {"key": TEXT, "operator": st.just("Exists")},
    optional={"effect": EFFECT, "tolerationSeconds": st.sampled_from([300, 0, -5, 2**40])},
) | st.fixed_dictionaries(
    {"key": TEXT},
    optional={"operator": st.just("Equal"), "value": TEXT | st.just(""), "effect": EFFECT},
)
NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi"])
resources = st.fixed_dictionaries(
    {},
    optional={
        # every request at most every limit
        "requests": st.dictionaries(NAMES, st.sampled_from(["1", "500m", "0", "2"]), max_size=3),
        "limits": st.dictionaries(NAMES, st.sampled_from(["2", "3Gi"]), max_size=3),
    },
)
container = st.fixed_dictionaries(
    {"image": st.just("busybox")},
    optional={
        "name": st.sampled_from(["main", "side"]),
        "resources": resources,
        "ports": st.just([{"containerPort": 80, "hostPort": 8080}]),
    },
)
string_map = st.dictionaries(TEXT, TEXT | st.just(""), max_size=3)
TIME = st.sampled_from(["2026-01-31T12:00:00Z", "2026-01-31T12:00:00", " 2026-01-31 "])
AFFINITY: dict[str, Any] = {"podAffinity": None, "podAntiAffinity": {}, "nodeAffinity": None}
#: Wrong types among right ones, as hand-written YAML has them; several compare equal to
#: right values (1 == 1.0 == True) and must still read differently.
ODD_VALUES: list[Any] = [None, 1, 1.0, True, 0, 300.5, [], {}, "", "soon", "-1", "1Gi"]
ODD = st.sampled_from(ODD_VALUES)


@st.composite
def valid_pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": draw(st.lists(container, min_size=1, max_size=2)),
        "tolerations": draw(st.lists(toleration, max_size=3) | st.none()),
        "nodeSelector": draw(string_map | st.none()),
        "affinity": draw(st.just(AFFINITY) | st.none()),
    }
    if draw(st.booleans()):
        spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "2"}}}]
    metadata: dict[str, Any] = {
        "name": "p",
        "namespace": "ns",
        "labels": draw(string_map | st.none()),
        "annotations": draw(string_map | st.none()),
        "creationTimestamp": draw(TIME),
    }
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


@st.composite
def any_pods(draw: st.DrawFn) -> dict[str, Any]:
    """A valid pod with one or two values anywhere in it replaced by wrong ones. Replaced in a
    copy: the strategies share some values between examples (AFFINITY, a container's ports,
    the odd values), and changing them in place changed what later examples drew, which
    hypothesis reports as a flaky strategy (make fuzz, seed 1829379708)."""
    raw = copy.deepcopy(draw(valid_pods()))
    for _ in range(draw(st.integers(1, 2))):
        places: list[tuple[Any, Any]] = []
        _places(raw, places)
        holder, key = draw(st.sampled_from(places))
        holder[key] = copy.deepcopy(draw(ODD))
    return raw


def _places(value: Any, out: list[tuple[Any, Any]]) -> None:
    """(container, key or index) of every value inside `value`."""
    entries = value.items() if isinstance(value, dict) else enumerate(value)
    for key, entry in list(entries):
        out.append((value, key))
        if isinstance(entry, dict | list):
            _places(entry, out)


@given(raw=valid_pods())
def test_any_valid_pod_converts_the_same_either_way(raw: dict[str, Any]) -> None:
    assert not isinstance(outcome(raw), list)  # a model, not problems
    assert_same_either_way(raw)


@given(raw=any_pods())
def test_any_pod_converts_the_same_either_way(raw: dict[str, Any]) -> None:
    assert_same_either_way(raw)


#: LISTED with everything else the shortcuts read: a second container with limits,
#: annotations, a nodeSelector, absent affinity sections.
RICHER: dict[str, Any] = {
    "metadata": {**LISTED["metadata"], "annotations": {"note": "x"}},
    "spec": {
        **LISTED["spec"],
        "nodeSelector": {"zone": "a"},
        "affinity": {"podAffinity": None, "nodeAffinity": None},
        "containers": [
            *LISTED["spec"]["containers"],
            {"name": "side", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}},
        ],
    },
}


def test_a_wrong_value_anywhere_reads_the_same_either_way() -> None:
    """Every value in the pod replaced by each wrong one in turn (a pod with its valid twin
    converted just before, so that what the twin left behind is there to be misused)."""
    checked = 0
    for index in range(len(_every_place(RICHER))):
        for odd in ODD_VALUES:
            raw = copy.deepcopy(RICHER)
            holder, key = _every_place(raw)[index]
            holder[key] = odd
            pod_from_raw(RICHER, priorities=PRIORITIES)
            assert_same_either_way(raw)
            checked += 1
    assert checked > 500


def _every_place(raw: Any) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    _places(raw, out)
    return out


@pytest.mark.parametrize(
    "toleration_list",
    [
        [{"key": "a", "operator": "Exists", "value": "x"}],  # value with Exists
        [{"operator": "Equal"}],  # no key without Exists
        [{"key": "a", "effect": "Sometimes"}],
        [{"key": "a", "operator": "Gt", "value": "1"}],
    ],
)
def test_a_refused_toleration_is_refused_again_with_its_field(
    toleration_list: list[dict[str, Any]],
) -> None:
    raw = {**LISTED, "spec": {**LISTED["spec"], "tolerations": toleration_list}}
    for _ in range(2):
        problems = outcome(raw)
        assert isinstance(problems, list) and problems
        assert all("spec.tolerations[0]." in problem for problem in problems)
    assert_same_either_way(raw)
