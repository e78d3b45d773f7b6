"""Device configuration (opaque driver parameters of a DeviceClass and a claim) copied into the
allocation as kube-scheduler's allocator does, and written back with allocationTimestamp."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from gangsched.core.api import InvalidObject
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, AllocateClaim
from gangsched.core.dra.allocator import Pick
from gangsched.core.dra.model import (
    AllocatedConfig,
    Allocation,
    ClaimSpec,
    ConfigSource,
    DeviceClass,
    DeviceConfig,
    DeviceRequest,
    DeviceResult,
    ExactRequest,
)
from gangsched.core.dra.parse_claims import resource_claim_from_raw
from gangsched.core.dra.parse_classes import device_class_from_raw
from gangsched.core.dra.results import allocated_config
from gangsched.core.dra.state import DraState
from gangsched.core.scheduler import Scheduler
from gangsched.edge.claim_writebacks import allocation_json
from tests.builders import (
    GPU_CLASS,
    SCHEDULER,
    gpu_class,
    gpu_slice,
    node,
    pod,
    resource_claim,
    with_resource_claims,
)

DRIVER = "gpu.example.com"


def opaque(value: Any) -> dict[str, Any]:
    return {"opaque": {"driver": DRIVER, "parameters": value}}


def config(value: Any, *requests: str) -> DeviceConfig:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return DeviceConfig(driver=DRIVER, parameters=text, requests=requests)


def exact(name: str, class_name: str = GPU_CLASS) -> ExactRequest:
    return ExactRequest(name=name, class_name=class_name)


def test_class_and_claim_config_are_parsed_canonically() -> None:
    device_class = device_class_from_raw(
        {
            "metadata": {"name": "gpu"},
            "spec": {"config": [opaque({"b": 1, "a": {"mode": "x"}})]},
        }
    )
    assert device_class.config == (config({"a": {"mode": "x"}, "b": 1}),)
    claim = resource_claim_from_raw(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}],
                    "config": [
                        opaque({"sharing": "TimeSlicing"}),
                        {**opaque(1), "requests": ["gpus"]},
                    ],
                }
            },
        }
    )
    assert claim.spec.config == (config({"sharing": "TimeSlicing"}), config(1, "gpus"))
    hash(claim.spec)  # specs key the allocator's caches


def test_bad_config_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidObject) as error:
        resource_claim_from_raw(
            {
                "metadata": {"name": "c", "namespace": "ns"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}],
                        "config": [
                            {"requests": ["gpus"]},
                            {"opaque": {"parameters": {}}, "requests": ["nope"]},
                        ],
                    }
                },
            }
        )
    text = [str(p) for p in error.value.problems]
    assert any("spec.devices.config[0]" in p and "opaque is required" in p for p in text), text
    assert any("spec.devices.config[1].opaque.driver" in p for p in text), text
    assert any("spec.devices.config[1]" in p and 'unknown request "nope"' in p for p in text), text


def test_allocated_config_follows_upstream_order_and_scope() -> None:
    classes = {
        "gpu": DeviceClass(name="gpu", config=(config("class-gpu"),)),
        "nic": DeviceClass(name="nic", config=(config("class-nic-1"), config("class-nic-2"))),
    }
    spec = ClaimSpec(
        requests=(
            DeviceRequest(name="a", exactly=exact("a", "gpu")),
            DeviceRequest(name="b", first_available=(exact("big", "nic"), exact("small", "gpu"))),
            DeviceRequest(name="c", exactly=exact("c", "nic")),
        ),
        config=(
            config("all"),
            config("for-a", "a"),
            config("for-b-small", "b/small"),
            config("for-b-big", "b/big"),  # the alternative not chosen
            config("for-b", "b"),
        ),
    )
    picks = [Pick("a", 0), Pick("b/small", 1), Pick("c", 2)]
    got = [
        (c.source, json.loads(c.config.parameters), c.config.requests)
        for c in allocated_config(spec, picks, classes)
    ]
    assert got == [
        (ConfigSource.FROM_CLASS, "class-gpu", ("a", "b/small")),
        (ConfigSource.FROM_CLASS, "class-nic-1", ("c",)),
        (ConfigSource.FROM_CLASS, "class-nic-2", ("c",)),
        (ConfigSource.FROM_CLAIM, "all", ()),
        (ConfigSource.FROM_CLAIM, "for-a", ("a",)),
        (ConfigSource.FROM_CLAIM, "for-b-small", ("b/small",)),
        (ConfigSource.FROM_CLAIM, "for-b", ("b",)),
    ]


def test_gang_allocation_carries_the_config_and_the_write_back_its_json() -> None:
    gpu = gpu_class()
    gpu = DeviceClass(name=gpu.name, selectors=gpu.selectors, config=(config({"mig": False}),))
    spec = ClaimSpec(
        requests=(
            DeviceRequest(
                name="gpus", exactly=ExactRequest(name="gpus", class_name=GPU_CLASS, count=2)
            ),
        ),
        config=(config({"sharing": "none"}, "gpus"),),
    )
    claim = resource_claim("p-gpu", spec)
    member = pod("p")
    with_resource_claims(member, claim.name)
    dra = DraState.build(classes=[gpu], slices=[gpu_slice("n1", 8)], claims=[claim])
    cluster = ClusterState.build(
        scheduler_name=SCHEDULER,
        nodes=[node("n1", 64, memory="512Gi")],
        pods=[member],
        extensions=[dra],
    )
    scheduler = Scheduler(cluster)
    scheduler.enqueue_pending()
    report = scheduler.step(0.0)
    assert report is not None and report.result == SCHEDULED
    (decision,) = [d for d in report.decisions if isinstance(d, AllocateClaim)]
    assert decision.allocation is not None
    assert decision.allocation.config == (
        AllocatedConfig(ConfigSource.FROM_CLASS, config({"mig": False}, "gpus")),
        AllocatedConfig(ConfigSource.FROM_CLAIM, config({"sharing": "none"}, "gpus")),
    )
    body = allocation_json(decision.allocation, now=datetime(2026, 11, 23, 19, 0, 1, tzinfo=UTC))
    assert body["allocationTimestamp"] == "2026-11-23T19:00:01Z"
    assert body["devices"]["config"] == [
        {
            "source": "FromClass",
            "requests": ["gpus"],
            "opaque": {"driver": DRIVER, "parameters": {"mig": False}},
        },
        {
            "source": "FromClaim",
            "requests": ["gpus"],
            "opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}},
        },
    ]
    assert len(body["devices"]["results"]) == 2


def test_allocation_without_config_writes_none() -> None:
    allocation = Allocation(results=(DeviceResult("gpus", DRIVER, "n1", "gpu-0"),))
    body = allocation_json(allocation)
    assert "config" not in body["devices"] and "allocationTimestamp" not in body
