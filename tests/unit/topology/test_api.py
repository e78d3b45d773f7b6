"""Topology constraints read from every PodGroup dialect into one TopologyRequest."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_group_from_raw
from gangsched.core.topology.request import TopologyRequest, label_key_problem

RESOLVER = PriorityResolver()
RACK = "topology.example.com/rack"


def upstream(constraints: Any, version: str = "v1beta1") -> dict[str, Any]:
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": constraints,
        },
    }


def sigs(topology: Any = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 2}
    if topology is not None:
        spec["topology"] = topology
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml", "annotations": annotations or {}},
        "spec": spec,
    }


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3", "v1alpha2"])
def test_upstream_key_is_required_domain(version: str) -> None:
    group = pod_group_from_raw(
        upstream({"topology": [{"key": RACK}]}, version), priorities=RESOLVER
    )
    assert group.topology == TopologyRequest(
        required=RACK, origin="spec.schedulingConstraints.topology[0].key"
    )
    assert group.topology.levels == (RACK,)


def test_v1alpha2_early_spelling() -> None:
    raw = upstream({"topologyConstraints": [{"topologyKey": RACK}]}, "v1alpha2")
    group = pod_group_from_raw(raw, priorities=RESOLVER)
    assert group.topology is not None and group.topology.required == RACK


def test_early_spelling_refused_after_v1alpha2() -> None:
    raw = upstream({"topologyConstraints": [{"topologyKey": RACK}]}, "v1beta1")
    with pytest.raises(InvalidObject, match="topologyConstraints: is the early v1alpha2"):
        pod_group_from_raw(raw, priorities=RESOLVER)


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        ({"topology": [{"key": RACK}, {"key": "zone"}]}, "must have at most 1 item, got 2"),
        ({"topology": [{}]}, r"topology\[0\].key: is required"),
        ({"topology": [{"key": "has space"}]}, "is not a valid label key"),
        ({"topology": "rack"}, "must be a list"),
    ],
)
def test_upstream_malformed_constraint_names_the_field(constraints: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message) as error:
        pod_group_from_raw(upstream(constraints), priorities=RESOLVER)
    assert "PodGroup ml/train" in str(error.value)


def test_upstream_without_constraint_is_unconstrained() -> None:
    raw = upstream({})
    assert pod_group_from_raw(raw, priorities=RESOLVER).topology is None
    del raw["spec"]["schedulingConstraints"]
    assert pod_group_from_raw(raw, priorities=RESOLVER).topology is None


def test_sigs_required_and_preferred() -> None:
    group = pod_group_from_raw(sigs({"required": "zone", "preferred": RACK}), priorities=RESOLVER)
    assert group.topology == TopologyRequest(
        required="zone", preferred=(RACK,), origin="spec.topology"
    )
    assert group.topology.levels == (RACK, "zone")


def test_sigs_preferred_alone_climbs_to_the_whole_cluster() -> None:
    group = pod_group_from_raw(sigs({"preferred": RACK}), priorities=RESOLVER)
    assert group.topology is not None and group.topology.levels == (RACK, None)


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ({"required": "zone", "typo": "x"}, 'spec.topology.typo: unknown field "typo"'),
        ({"required": "/rack"}, "spec.topology.required: '/rack' has an empty prefix"),
        ({"preferred": 3}, "spec.topology.preferred: must be a string"),
    ],
)
def test_sigs_malformed_topology(topology: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        pod_group_from_raw(sigs(topology), priorities=RESOLVER)


def test_kai_annotations() -> None:
    annotations = {
        "kai.scheduler/topology-required-placement": "zone",
        "kai.scheduler/topology-preferred-placement": RACK,
    }
    group = pod_group_from_raw(sigs(annotations=annotations), priorities=RESOLVER)
    assert group.topology is not None
    assert (group.topology.required, group.topology.preferred) == ("zone", (RACK,))


def test_kai_annotation_conflicting_with_spec_is_refused() -> None:
    raw = sigs({"required": "zone"}, {"kai.scheduler/topology-required-placement": RACK})
    with pytest.raises(InvalidObject, match=r"conflicts with spec\.topology"):
        pod_group_from_raw(raw, priorities=RESOLVER)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("rack", True),
        ("topology.kubernetes.io/zone", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("Upper.Case/rack", False),
        ("-rack", False),
        ("", False),
    ],
)
def test_label_key_rule(key: str, ok: bool) -> None:
    assert (label_key_problem(key) is None) is ok
