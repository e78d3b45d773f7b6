"""DRA in the gang cycle: all members' claims from one snapshot, all or nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE, AllocateClaim, Bind, Evict
from gangsched.core.dra.model import Allocation, Consumer, DeviceClass, DeviceResult, ResourceClaim
from gangsched.core.dra.state import DraState
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import Pod, PodClaim, PodGroup
from gangsched.core.preemption import build_preemptor
from gangsched.core.scheduler import CycleReport, Scheduler
from tests.builders import (
    GPU_DRIVER,
    NVLINK,
    SCHEDULER,
    gang_pods,
    gpu_claim_spec,
    gpu_class,
    gpu_slice,
    group,
    node,
    pod,
    resource_claim,
    with_resource_claims,
)


def setup(
    pods: list[Pod],
    claims: list[ResourceClaim],
    *,
    nodes: int = 2,
    gpus: int = 8,
    groups: list[PodGroup] | None = None,
) -> Scheduler:
    names = [f"n{i}" for i in range(1, nodes + 1)]
    dra = DraState.build(
        classes=[gpu_class()], slices=[gpu_slice(n, gpus) for n in names], claims=claims
    )
    cluster = ClusterState.build(
        scheduler_name=SCHEDULER,
        nodes=[node(n, 64, memory="512Gi") for n in names],
        pods=pods,
        groups=groups or [],
        extensions=[dra],
    )
    return Scheduler(cluster)


def step(scheduler: Scheduler) -> CycleReport:
    scheduler.enqueue_pending()
    report = scheduler.step(0.0)
    assert report is not None
    return report


def gpu_gang(name: str, size: int, gpus: int) -> tuple[list[Pod], list[ResourceClaim], PodGroup]:
    pods = gang_pods(name, size)
    claims = []
    for p in pods:
        claim = resource_claim(f"{p.name}-gpu", gpu_claim_spec(gpus, same_domain=True))
        claims.append(claim)
        with_resource_claims(p, claim.name)
    return pods, claims, group(name, size)


def test_gang_claims_allocated_in_one_plan_written_before_binds() -> None:
    pods, claims, g = gpu_gang("train", 4, 4)
    scheduler = setup(pods, claims, groups=[g])
    report = step(scheduler)
    assert report.result == SCHEDULED
    kinds = [type(d).__name__ for d in report.decisions if isinstance(d, AllocateClaim | Bind)]
    assert kinds == ["AllocateClaim"] * 4 + ["Bind"] * 4
    allocations = [d for d in report.decisions if isinstance(d, AllocateClaim)]
    devices = [r.device_id for d in allocations for r in d.allocation.results]  # type: ignore[union-attr]
    assert len(devices) == 16 and len(set(devices)) == 16
    binds = {d.pod: d.node for d in report.decisions if isinstance(d, Bind)}
    dra = scheduler.cluster.snapshot.extensions.get(DraState)
    assert dra is not None
    for decision in allocations:
        claim = dra.claims[decision.claim]
        owner = f"default/{decision.reserve[0].name}"
        assert [c.name for c in claim.reserved_for] == [decision.reserve[0].name]
        assert claim.allocation == decision.allocation
        assert claim.allocation is not None and claim.allocation.admits(binds[owner], {})
        domains = {
            dra.inventory.entries[dra.inventory.by_id[r.device_id]].device.attributes[NVLINK]
            for r in claim.allocation.results
        }
        assert len(domains) == 1  # one NVLink domain per pod
    assert not dra.pending_allocation and not dra.pending_reserve


def test_gang_that_cannot_get_all_claims_binds_nothing() -> None:
    pods, claims, g = gpu_gang("train", 5, 4)  # 4 domains of 4 GPUs in the cluster
    scheduler = setup(pods, claims, groups=[g])
    report = step(scheduler)
    assert report.result == UNSCHEDULABLE
    assert not [d for d in report.decisions if isinstance(d, Bind | AllocateClaim)]
    assert "cannot allocate all claims" in report.message
    assert "claim default/train-4-gpu" in report.message
    dra = scheduler.cluster.snapshot.extensions.get(DraState)
    assert dra is not None
    assert all(c.allocation is None and not c.reserved_for for c in dra.claims.values())
    assert not dra.pending_allocation and not dra._holders


def test_shared_claim_allocated_once_and_reserved_for_every_member() -> None:
    pods = gang_pods("pair", 2)
    shared = resource_claim("shared", gpu_claim_spec(2))
    for p in pods:
        with_resource_claims(p, "shared")
    scheduler = setup(pods, [shared], groups=[group("pair", 2)])
    report = step(scheduler)
    assert report.result == SCHEDULED
    allocations = [d for d in report.decisions if isinstance(d, AllocateClaim)]
    assert len(allocations) == 1
    assert [c.name for c in allocations[0].reserve] == ["pair-0", "pair-1"]
    nodes = {d.node for d in report.decisions if isinstance(d, Bind)}
    assert len(nodes) == 1  # the claim's devices are local to one node


def test_allocated_claim_pins_the_pod_and_its_devices_are_taken() -> None:
    on_n2 = resource_claim("pinned", gpu_claim_spec(1))
    on_n2.allocation = Allocation(
        results=(DeviceResult("gpus", GPU_DRIVER, "n2", "gpu-0"),),
        node_selector=(
            NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n2",)),)),
        ),
    )
    p = with_resource_claims(pod("p"), "pinned")
    other = with_resource_claims(pod("q"), "q-gpu")
    q_claim = resource_claim("q-gpu", gpu_claim_spec(8))
    scheduler = setup([p, other], [on_n2, q_claim])
    reports = [step(scheduler), step(scheduler)]
    binds = {d.pod: d.node for r in reports for d in r.decisions if isinstance(d, Bind)}
    assert binds == {"default/p": "n2", "default/q": "n1"}  # n2 lost gpu-0 to `pinned`
    reserve = [d for r in reports for d in r.decisions if isinstance(d, AllocateClaim)]
    pinned = next(d for d in reserve if d.claim == "default/pinned")
    assert pinned.allocation is None and [c.name for c in pinned.reserve] == ["p"]


def test_claim_not_created_yet_or_missing_makes_the_pod_wait_with_a_message() -> None:
    waiting = pod("w")
    waiting.claims = (PodClaim(name="gpu", template_name="gpus"),)
    missing = with_resource_claims(pod("m"), "nope")
    scheduler = setup([waiting, missing], [])
    messages = {}
    for _ in range(2):
        report = step(scheduler)
        assert report.result == UNSCHEDULABLE
        messages[report.pods[0]] = report.message
    assert (
        'ResourceClaim for pod claim "gpu" (template "gpus") not created yet'
        in (messages["default/w"])
    )
    assert 'resourceclaim "nope" not found' in messages["default/m"]


def test_without_dra_state_pods_with_claims_are_never_bound() -> None:
    p = with_resource_claims(pod("p"), "c")
    cluster = ClusterState.build(scheduler_name=SCHEDULER, nodes=[node("n1")], pods=[p])
    report = step(Scheduler(cluster))
    assert report.result == UNSCHEDULABLE
    assert "the scheduler has no DRA state" in report.message


def test_decided_claim_stays_assumed_until_the_api_server_shows_it_done() -> None:
    pods, claims, g = gpu_gang("train", 2, 4)
    for claim in claims:
        claim.resource_version = "10"
    scheduler = setup(pods, [], groups=[g])
    dra = scheduler.cluster.snapshot.extensions.get(DraState)
    assert dra is not None
    for claim in claims:
        dra.observe_claim(claim)
    step(scheduler)
    first = claims[0].key
    assert dra.claims[first].allocation is not None
    assert claims[0].allocation is None, "the API server's copy is left as it was"
    dra.observe_claim(claims[0])  # an informer resync of the old version changes nothing
    assert dra.claims[first].allocation is not None
    finalized = replace(claims[0], resource_version="11", finalizers=("x",))
    dra.observe_claim(finalized)  # the finalizer written, the status not yet
    assert dra.claims[first].allocation is not None
    taken = set(dra._holders)
    dra.forget_claim(first)  # the write failed: back to the API server's copy
    assert dra.claims[first].allocation is None
    assert len(dra._holders) == len(taken) - 4
    decided = dra.claims[claims[1].key]
    allocated = replace(claims[1], resource_version="11", allocation=decided.allocation)
    dra.observe_claim(allocated)  # allocated, not reserved yet: still the decision
    assert dra.claims[claims[1].key] is decided
    written = replace(allocated, resource_version="12", reserved_for=decided.reserved_for)
    dra.observe_claim(written)  # the write landed
    assert dra.claims[claims[1].key] is written


def preempting(pods: list[Pod], claims: list[ResourceClaim], strategy: str) -> Scheduler:
    dra = DraState.build(classes=[gpu_class()], slices=[gpu_slice("n1", 8)], claims=claims)
    cluster = ClusterState.build(
        scheduler_name=SCHEDULER,
        nodes=[node("n1", 64, memory="512Gi")],
        pods=pods,
        extensions=[dra],
    )
    return Scheduler(
        cluster, preemptor=build_preemptor(strategy=strategy, scheduler_name=SCHEDULER)
    )


@pytest.mark.parametrize("strategy", ["mincost", "kep"])
def test_preemption_frees_the_victims_devices(strategy: str) -> None:
    # The low pod holds all 8 GPUs of the only node; the high pod needs 4 of them.
    low = with_resource_claims(pod("low", node_name="n1", priority=1), "low-gpu")
    held = resource_claim("low-gpu", gpu_claim_spec(8))
    held.allocation = Allocation(
        results=tuple(DeviceResult("gpus", GPU_DRIVER, "n1", f"gpu-{i}") for i in range(8)),
        node_selector=(
            NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n1",)),)),
        ),
    )
    held.reserved_for = (Consumer("pods", "low", low.uid),)
    high = with_resource_claims(pod("high", priority=100), "high-gpu")
    scheduler = preempting(
        [low, high], [held, resource_claim("high-gpu", gpu_claim_spec(4))], strategy
    )
    report = step(scheduler)
    evicted = [d.pod for d in report.decisions if isinstance(d, Evict)]
    assert evicted == ["default/low"]
    assert "cannot allocate all claims" in report.message
    dra = scheduler.cluster.snapshot.extensions.get(DraState)
    assert dra is not None
    assert dra.claims["default/low-gpu"].allocation is not None, "dry runs leave no trace"
    assert len(dra._holders) == 8


@pytest.mark.parametrize("strategy", ["mincost", "kep"])
def test_no_preemption_when_freeing_devices_cannot_help(strategy: str) -> None:
    low = with_resource_claims(pod("low", node_name="n1", priority=1), "low-gpu")
    held = resource_claim("low-gpu", gpu_claim_spec(2))
    held.allocation = Allocation(results=(DeviceResult("gpus", GPU_DRIVER, "n1", "gpu-0"),))
    held.reserved_for = (Consumer("pods", "low", low.uid),)
    high = with_resource_claims(pod("high", priority=100), "high-gpu")
    scheduler = preempting(
        [low, high], [held, resource_claim("high-gpu", gpu_claim_spec(9))], strategy
    )
    report = step(scheduler)
    assert not [d for d in report.decisions if isinstance(d, Evict)]
    assert report.result == UNSCHEDULABLE


def test_extended_resources_backed_by_dra_are_refused_clearly() -> None:
    mapped = DeviceClass(name="gpu.example.com", extended_resource_name="example.com/gpu")
    by_mapping = pod("a", extra={"example.com/gpu": 1})
    by_class = pod("b", extra={"deviceclass.resource.kubernetes.io/gpu.example.com": 1})
    dra = DraState.build(classes=[mapped], slices=[gpu_slice("n1", 8)])
    cluster = ClusterState.build(
        scheduler_name=SCHEDULER, nodes=[node("n1")], pods=[by_mapping, by_class], extensions=[dra]
    )
    scheduler = Scheduler(cluster)
    messages = " | ".join(step(scheduler).message for _ in range(2))
    assert (
        "default/b: 0/1 nodes are available: gangsched does not support extended resources "
        "backed by DRA yet (deviceclass.resource.kubernetes.io/gpu.example.com, DeviceClass "
        "gpu.example.com)."
    ) in messages
    assert "default/a: 0/1 nodes are available: gangsched does not support extended" in messages
    assert "(example.com/gpu, DeviceClass gpu.example.com)" in messages


def test_extended_resource_a_device_plugin_serves_is_left_to_resources_fit() -> None:
    mapped = DeviceClass(name="gpu.example.com", extended_resource_name="example.com/gpu")
    dra = DraState.build(classes=[mapped])
    cluster = ClusterState.build(
        scheduler_name=SCHEDULER,
        nodes=[node("n1", extra={"example.com/gpu": 4})],
        pods=[pod("a", extra={"example.com/gpu": 1})],
        extensions=[dra],
    )
    assert step(Scheduler(cluster)).result == SCHEDULED
