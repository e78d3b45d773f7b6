"""resource.k8s.io/v1 objects and pod resource claims from raw JSON."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw
from gangsched.core.dra.model import AllocationMode, Semver
from gangsched.core.dra.parse_claims import (
    generated_claim_raw,
    resource_claim_from_raw,
    resource_claim_template_from_raw,
)
from gangsched.core.dra.parse_classes import device_class_from_raw
from gangsched.core.dra.parse_slices import resource_slice_from_raw
from gangsched.core.dra.semver import parse_semver


def slice_raw(**spec: Any) -> dict[str, Any]:
    body = {
        "driver": "gpu.example.com",
        "pool": {"name": "n1", "generation": 2, "resourceSliceCount": 1},
        "nodeName": "n1",
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "model": {"string": "A100"},
                    "index": {"int": 0},
                    "healthy": {"bool": True},
                    "driverVersion": {"version": "1.2.3-rc.1+build.5"},
                    "other.com/x": {"string": "y"},
                },
                "capacity": {"memory": {"value": "40Gi"}},
                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            }
        ],
    }
    body.update(spec)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s1"},
        "spec": body,
    }


def claim_raw(devices: Any, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c1", "namespace": "ns", **meta},
        "spec": {"devices": devices},
    }


def problems(error: pytest.ExceptionInfo[InvalidObject]) -> list[str]:
    return [str(p) for p in error.value.problems]


def test_slice_devices_attributes_are_qualified_with_the_driver() -> None:
    s = resource_slice_from_raw(slice_raw())
    assert (s.driver, s.pool, s.generation, s.slice_count, s.node_name) == (
        "gpu.example.com",
        "n1",
        2,
        1,
        "n1",
    )
    device = s.devices[0]
    assert device.attributes == {
        "gpu.example.com/model": "A100",
        "gpu.example.com/index": 0,
        "gpu.example.com/healthy": True,
        "gpu.example.com/driverVersion": Semver(1, 2, 3, ("rc", 1)),
        "other.com/x": "y",
    }
    assert device.capacity == {"gpu.example.com/memory": Fraction(40 * 2**30)}
    assert device.taints[0].effect == "NoSchedule"


def test_slice_needs_exactly_one_node_scope() -> None:
    with pytest.raises(InvalidObject) as error:
        resource_slice_from_raw(slice_raw(allNodes=True))
    assert any(
        "ResourceSlice s1: spec: exactly one of nodeName, nodeSelector, allNodes" in p
        and "nodeName, allNodes" in p
        for p in problems(error)
    )


def test_slice_problems_name_the_field() -> None:
    raw = slice_raw(pool={"name": "", "generation": -1})
    raw["spec"]["devices"][0]["attributes"]["bad"] = {"int": 1, "string": "x"}
    raw["spec"]["devices"][0]["attributes"]["v"] = {"version": "1.02"}
    raw["spec"]["devices"][0]["capacity"]["memory"] = {"value": "lots"}
    raw["spec"]["devices"].append({"name": "gpu-0"})
    with pytest.raises(InvalidObject) as error:
        resource_slice_from_raw(raw)
    text = "\n".join(problems(error))
    for expected in (
        "spec.pool.name: is required",
        "spec.pool.generation: must not be negative",
        "spec.pool.resourceSliceCount: is required",
        "spec.devices[0].attributes.bad: exactly one of bool, int, string, version is required",
        'spec.devices[0].attributes.v.version: "1.02" is not a semantic version',
        'spec.devices[0].capacity.memory.value: "lots" is not a valid quantity',
        'spec.devices[1]: duplicate device name "gpu-0"',
    ):
        assert expected in text


def test_partitionable_slices_are_marked_unsupported() -> None:
    raw = slice_raw()
    raw["spec"]["devices"][0]["consumesCounters"] = [{"counterSet": "x", "counters": {}}]
    assert resource_slice_from_raw(raw).devices[0].unsupported


def test_device_class_selectors() -> None:
    raw = {
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
    }
    assert device_class_from_raw(raw).selectors == ('device.driver == "gpu.example.com"',)
    with pytest.raises(InvalidObject) as error:
        device_class_from_raw({"metadata": {"name": "gpu"}, "spec": {"selectors": [{}]}})
    assert problems(error) == [
        "DeviceClass gpu: spec.selectors[0]: only cel selectors are supported; cel is required"
    ]


def test_claim_requests_constraints_and_status() -> None:
    raw = claim_raw(
        {
            "requests": [
                {
                    "name": "gpus",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "count": 4,
                        "selectors": [{"cel": {"expression": "true"}}],
                    },
                },
                {"name": "all", "exactly": {"deviceClassName": "nic", "allocationMode": "All"}},
                {
                    "name": "alt",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "count": 2},
                        {"name": "small", "deviceClassName": "gpu"},
                    ],
                },
            ],
            "constraints": [
                {"matchAttribute": "gpu.example.com/nvlinkDomain", "requests": ["gpus", "alt/big"]}
            ],
        },
        uid="u1",
        ownerReferences=[{"kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True}],
    )
    raw["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpus",
                        "driver": "gpu.example.com",
                        "pool": "n1",
                        "device": "gpu-0",
                    }
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}],
    }
    claim = resource_claim_from_raw(raw)
    gpus, every, alt = claim.spec.requests
    assert gpus.exactly is not None and gpus.exactly.count == 4
    assert every.exactly is not None and every.exactly.mode is AllocationMode.ALL
    assert [a.name for a in alt.alternatives] == ["big", "small"]
    assert claim.spec.constraints[0].requests == ("gpus", "alt/big")
    assert claim.allocation is not None
    assert claim.allocation.results[0].device_id == ("gpu.example.com", "n1", "gpu-0")
    assert claim.allocation.admits("n1", {}) and not claim.allocation.admits("n2", {})
    assert claim.reserved_for[0].uid == "pod-uid"
    assert claim.owner_pod_uid == "pod-uid"


@pytest.mark.parametrize(
    ("request_body", "expected"),
    [
        ({"name": "r"}, "spec.devices.requests[0]: exactly one of exactly, firstAvailable"),
        (
            {"name": "r", "exactly": {"deviceClassName": "g", "count": 0}},
            "spec.devices.requests[0].exactly.count: must be at least 1, got 0",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": "g", "allocationMode": "Some"}},
            'spec.devices.requests[0].exactly.allocationMode: unknown value "Some"',
        ),
        (
            {"name": "r", "exactly": {}},
            "spec.devices.requests[0].exactly.deviceClassName: is required",
        ),
        (
            {"name": "r", "exactly": {"deviceClassName": "g", "allocationMode": "All", "count": 2}},
            "spec.devices.requests[0].exactly.count: must not be set with allocationMode All",
        ),
    ],
)
def test_bad_requests_are_refused_naming_the_field(request_body: Any, expected: str) -> None:
    with pytest.raises(InvalidObject) as error:
        resource_claim_from_raw(claim_raw({"requests": [request_body]}))
    assert any(f"ResourceClaim ns/c1: {expected}" in p for p in problems(error)), problems(error)


def test_match_attribute_must_be_qualified_and_name_known_requests() -> None:
    raw = claim_raw(
        {
            "requests": [{"name": "r", "exactly": {"deviceClassName": "g"}}],
            "constraints": [
                {"matchAttribute": "model"},
                {"matchAttribute": "a.com/b", "requests": ["nope"]},
            ],
        }
    )
    with pytest.raises(InvalidObject) as error:
        resource_claim_from_raw(raw)
    text = "\n".join(problems(error))
    assert '"model" must be a fully qualified name' in text
    assert 'spec.devices.constraints[1].requests: unknown request "nope"' in text


def test_template_and_generated_claim() -> None:
    template = {
        "metadata": {"name": "gpus", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 2}}
                    ]
                }
            }
        },
    }
    parsed = resource_claim_template_from_raw(template)
    assert parsed.spec.requests[0].exactly is not None
    pod = {"metadata": {"name": "trainer", "namespace": "default", "uid": "u"}}
    raw = generated_claim_raw(template, pod=pod, pod_claim="gpu")
    claim = resource_claim_from_raw(raw)
    assert claim.key == "default/trainer-gpu"
    assert claim.owner_pod_uid == "u"
    assert claim.spec == parsed.spec


def test_semver_parsing() -> None:
    assert parse_semver("1.2.3") == Semver(1, 2, 3)
    assert parse_semver("1.2.3-alpha.10+x") == Semver(1, 2, 3, ("alpha", 10))
    assert parse_semver("01.2.3") is None
    assert parse_semver("1.2") is None


def pod_raw(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


def test_pod_resource_claims_and_generated_names() -> None:
    raw = pod_raw(
        resourceClaims=[
            {"name": "gpu", "resourceClaimTemplateName": "gpus"},
            {"name": "shared", "resourceClaimName": "team-claim"},
            {"name": "later", "resourceClaimTemplateName": "gpus"},
        ]
    )
    raw["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7"}]}
    pod = pod_from_raw(raw, priorities=PriorityResolver([]))
    gpu, shared, later = pod.claims
    assert gpu.resolved_name == "p-gpu-x7"
    assert shared.resolved_name == "team-claim"
    assert later.resolved_name is None  # not created yet


def test_pod_resource_claims_need_exactly_one_source() -> None:
    raw = pod_raw(resourceClaims=[{"name": "gpu"}, {"name": "gpu", "resourceClaimName": "x"}])
    with pytest.raises(InvalidObject) as error:
        pod_from_raw(raw, priorities=PriorityResolver([]))
    assert problems(error) == [
        "Pod default/p: spec.resourceClaims[0]: exactly one of resourceClaimName, "
        "resourceClaimTemplateName is required",
        'Pod default/p: spec.resourceClaims[1].name: duplicate resource claim name "gpu"',
    ]
