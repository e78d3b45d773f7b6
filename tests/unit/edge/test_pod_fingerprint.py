"""A bound pod whose update changed only its node, phase or nomination is its cached model
with those replaced (`rebound`): exactly what converting it again gives. Anything else is
converted again."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from gangsched.core.api import PriorityResolver, pod_from_raw
from gangsched.core.model import Pod
from gangsched.edge.pod_fingerprint import pod_fingerprint, rebound
from tests.builders import raw_pod

RESOLVER = PriorityResolver(())


def fields(pod: Pod) -> dict[str, Any]:
    return {f.name: getattr(pod, f.name) for f in dataclasses.fields(Pod)}


def pending() -> dict[str, Any]:
    return raw_pod(
        "p",
        cpu=2,
        memory="1Gi",
        group="g",
        labels={"app": "x"},
        uid="u-1",
        metadata={"creationTimestamp": "2026-01-01T00:00:00Z"},
        status={"nominatedNodeName": "n-0"},
        tolerations=[{"key": "k", "operator": "Exists"}],
    )


def changed(raw: dict[str, Any], *, node: str | None, phase: str | None) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    if node is not None:
        out["spec"]["nodeName"] = node
    if phase is not None:
        out.setdefault("status", {})["phase"] = phase
    return out


@pytest.mark.parametrize(
    ("node", "phase", "nominated"),
    [("n-1", None, "n-0"), ("n-1", "Running", "n-0"), ("n-1", "Succeeded", None)],
)
def test_a_bind_or_start_is_what_a_new_conversion_gives(
    node: str, phase: str | None, nominated: str | None
) -> None:
    before = pending()
    cached = pod_from_raw(before, priorities=RESOLVER)
    after = changed(before, node=node, phase=phase)
    if nominated is None:
        after["status"].pop("nominatedNodeName")
    got = rebound(cached, pod_fingerprint(before), pod_fingerprint(after))
    assert got is not None and got is not cached
    assert fields(got) == fields(pod_from_raw(after, priorities=RESOLVER))
    assert cached.node_name is None  # the cached model is left as it was


def test_a_pod_started_after_its_bind_came_back() -> None:
    bound = changed(pending(), node="n-1", phase=None)
    cached = pod_from_raw(bound, priorities=RESOLVER)
    running = changed(bound, node=None, phase="Running")
    got = rebound(cached, pod_fingerprint(bound), pod_fingerprint(running))
    assert got is not None
    assert fields(got) == fields(pod_from_raw(running, priorities=RESOLVER))


def test_anything_else_changed_is_converted_again() -> None:
    before = pending()
    cached = pod_from_raw(before, priorities=RESOLVER)
    relabelled = changed(before, node="n-1", phase=None)
    relabelled["metadata"]["labels"]["app"] = "y"
    deleting = changed(before, node="n-1", phase=None)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    unbound = changed(before, node=None, phase="Failed")
    bad_phase = changed(before, node="n-1", phase="Sleeping")
    adopted = changed(before, node="n-1", phase=None)
    adopted["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j-1", "controller": True}
    ]
    assert pod_from_raw(adopted, priorities=RESOLVER).owner != cached.owner
    for after in (relabelled, deleting, unbound, bad_phase, adopted):
        assert rebound(cached, pod_fingerprint(before), pod_fingerprint(after)) is None
    bound = changed(before, node="n-1", phase=None)
    assert rebound(None, pod_fingerprint(before), pod_fingerprint(bound)) is None
    assert rebound(cached, None, pod_fingerprint(bound)) is None
    gated = copy.deepcopy(before)
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    gated_pod = pod_from_raw(gated, priorities=RESOLVER)
    assert gated_pod.scheduling_gates
    assert rebound(gated_pod, pod_fingerprint(gated), pod_fingerprint(gated)) is None


@pytest.mark.parametrize("section", ["status", "spec", "metadata"])
def test_an_update_whose_section_is_not_an_object_is_converted_again(section: str) -> None:
    """A bound pod's update whose status (spec, metadata) is a list reads as empty in the
    fingerprint; the full conversion refuses it, so `rebound` must not accept it (the
    fixed-seed fuzz of edge objects found `status: []` kept as a bound pod)."""
    bound = changed(pending(), node="n-1", phase="Running")
    model = pod_from_raw(bound, priorities=RESOLVER)
    broken = copy.deepcopy(bound)
    broken[section] = []
    assert rebound(model, pod_fingerprint(bound), pod_fingerprint(broken)) is None


@pytest.mark.parametrize(
    ("place", "values"),
    [
        (("spec", "tolerations", 0, "tolerationSeconds"), [300, 300.0, True, "300", None]),
        (("metadata", "labels", "app"), ["1", 1, 1.0, True, None]),
        (("spec", "tolerations", 0, "key"), ["k", "k ", ["k"], {"k": 1}]),
    ],
)
def test_values_that_compare_equal_but_read_differently_change_the_fingerprint(
    place: tuple[str | int, ...], values: list[object]
) -> None:
    """1, 1.0 and True are equal in Python and read differently (an integer field refuses
    True), so the fingerprint tells them apart, as the repr it replaced did."""
    fingerprints = []
    for value in values:
        raw = pending()
        holder: Any = raw
        for key in place[:-1]:
            holder = holder[key]
        holder[place[-1]] = value
        fingerprints.append(pod_fingerprint(raw))
    assert len(set(fingerprints)) == len(values)
    assert pod_fingerprint(pending()) == pod_fingerprint(pending())


def test_a_value_json_never_has_still_fingerprints() -> None:
    """What msgpack cannot encode (no JSON decoding makes it) falls back to repr."""
    odd = pending()
    odd["metadata"]["labels"]["app"] = object()
    assert pod_fingerprint(odd) != pod_fingerprint(pending())
    huge = pending()
    huge["spec"]["tolerations"][0]["tolerationSeconds"] = 2**70
    other = pending()
    other["spec"]["tolerations"][0]["tolerationSeconds"] = 2**70 + 1
    assert pod_fingerprint(huge) != pod_fingerprint(other)
    assert pod_fingerprint(huge) == pod_fingerprint(copy.deepcopy(huge))
