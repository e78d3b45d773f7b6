"""The pure allocator: one node, a set of claims, kube-scheduler's structured semantics."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gangsched.core.dra.allocator import (
    AllocationError,
    ClaimToAllocate,
    Outcome,
    SharedSearches,
    allocate,
)
from gangsched.core.dra.cel import SelectorCache
from gangsched.core.dra.inventory import Inventory
from gangsched.core.dra.model import (
    AllocationMode,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceTaint,
    DeviceToleration,
    ExactRequest,
    MatchAttribute,
    ResourceSlice,
)
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import Node
from tests.builders import GPU_CLASS, GPU_DRIVER, NVLINK, gpu_claim_spec, gpu_class, gpu_slice

CLASSES = {GPU_CLASS: gpu_class()}


def run(
    specs: list[ClaimSpec],
    slices: list[ResourceSlice],
    *,
    node: str = "n1",
    labels: dict[str, str] | None = None,
    in_use: set[tuple[str, str, str]] = frozenset(),  # type: ignore[assignment]
    classes: dict[str, DeviceClass] = CLASSES,
) -> tuple[Outcome, list[list[str]]]:
    inventory = Inventory.build(slices)
    devices = inventory.node_devices(Node(name=node, labels=labels or {}))
    used = {inventory.by_id[d] for d in in_use}
    outcome = allocate(
        [ClaimToAllocate(f"default/c{i}", spec) for i, spec in enumerate(specs)],
        inventory=inventory,
        node=devices,
        is_free=lambda index: index not in used,
        classes=classes,
        selectors=SelectorCache(),
    )
    names = [
        [
            f"{pick.request}:{inventory.entries[devices.devices[pick.position]].device.name}"
            for pick in picks
        ]
        for picks in outcome.picks or []
    ]
    return outcome, names


def request(name: str = "gpus", count: int = 1, **kwargs: object) -> DeviceRequest:
    return DeviceRequest(
        name=name,
        exactly=ExactRequest(name=name, class_name=GPU_CLASS, count=count, **kwargs),  # type: ignore[arg-type]
    )


def test_exact_count_takes_the_first_matching_devices() -> None:
    outcome, names = run([gpu_claim_spec(2)], [gpu_slice("n1", 4)])
    assert outcome.ok
    assert names == [["gpus:gpu-0", "gpus:gpu-1"]]


def test_devices_in_use_and_other_nodes_are_not_taken() -> None:
    in_use = {(GPU_DRIVER, "n1", "gpu-0"), (GPU_DRIVER, "n1", "gpu-2")}
    _, names = run([gpu_claim_spec(2)], [gpu_slice("n1", 4), gpu_slice("n2", 4)], in_use=in_use)
    assert names == [["gpus:gpu-1", "gpus:gpu-3"]]
    outcome, _ = run([gpu_claim_spec(3)], [gpu_slice("n1", 4)], in_use=in_use)
    assert not outcome.ok
    assert outcome.reason() == (
        "cannot allocate all claims (claim default/c0: 2 of 4 device(s) free, 3 needed)"
    )


def test_match_attribute_needs_backtracking_greedy_would_miss() -> None:
    # gpu-0 is alone in its domain; the first choice must be undone.
    slice_ = gpu_slice("n1", 3, domains=1)
    slice_.devices[0].attributes[NVLINK] = "lonely"
    _, names = run([gpu_claim_spec(2, same_domain=True)], [slice_])
    assert names == [["gpus:gpu-1", "gpus:gpu-2"]]


def test_match_attribute_across_requests_of_one_claim() -> None:
    spec = ClaimSpec(
        requests=(request("a", 2), request("b", 2)),
        constraints=(MatchAttribute(NVLINK, ("a", "b")),),
    )
    _, names = run([spec], [gpu_slice("n1", 8, domains=2)])
    assert names == [["a:gpu-0", "a:gpu-1", "b:gpu-2", "b:gpu-3"]]
    spec = ClaimSpec(
        requests=(request("a", 3), request("b", 2)), constraints=(MatchAttribute(NVLINK),)
    )
    assert not run([spec], [gpu_slice("n1", 8, domains=2)])[0].ok


def test_match_attribute_device_without_the_attribute_never_matches() -> None:
    slice_ = gpu_slice("n1", 2)
    del slice_.devices[0].attributes[NVLINK]
    _, names = run([gpu_claim_spec(1, same_domain=True)], [slice_])
    assert names == [["gpus:gpu-1"]]


def test_two_claims_of_one_pod_never_share_a_device() -> None:
    _, names = run([gpu_claim_spec(3), gpu_claim_spec(1)], [gpu_slice("n1", 4)])
    assert names == [["gpus:gpu-0", "gpus:gpu-1", "gpus:gpu-2"], ["gpus:gpu-3"]]
    assert not run([gpu_claim_spec(3), gpu_claim_spec(2)], [gpu_slice("n1", 4)])[0].ok


def test_selectors_of_class_and_request() -> None:
    slices = [gpu_slice("n1", 2, model="T4"), gpu_slice("n1-b", 2, model="H100")]
    slices[1].node_name = "n1"
    slices[1].pool = "n1-b"
    spec = gpu_claim_spec(2, selectors=('device.attributes["gpu.example.com"].model == "H100"',))
    _, names = run([spec], slices)
    assert names == [["gpus:gpu-0", "gpus:gpu-1"]]
    big = {
        GPU_CLASS: gpu_class(
            GPU_CLASS, 'device.capacity["gpu.example.com"].memory .isGreaterThan(quantity("64Gi"))'
        )
    }
    assert not run([gpu_claim_spec(1)], slices, classes=big)[0].ok


def test_all_mode_takes_every_matching_device_or_none() -> None:
    spec = ClaimSpec(requests=(request("all", mode=AllocationMode.ALL),))
    _, names = run([spec], [gpu_slice("n1", 3)])
    assert names == [["all:gpu-0", "all:gpu-1", "all:gpu-2"]]
    outcome, _ = run([spec], [gpu_slice("n1", 3)], in_use={(GPU_DRIVER, "n1", "gpu-1")})
    assert not outcome.ok
    assert not run([spec], [gpu_slice("n2", 3)])[0].ok  # nothing on this node


def test_all_mode_with_an_incomplete_pool_is_an_error() -> None:
    incomplete = gpu_slice("n1", 2)
    incomplete.slice_count = 2
    spec = ClaimSpec(requests=(request("all", mode=AllocationMode.ALL),))
    with pytest.raises(AllocationError, match="asks for all devices, but resource pool"):
        run([spec], [incomplete])
    assert not run([gpu_claim_spec(1)], [incomplete])[0].ok  # no device of it is offered


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = gpu_slice("n1", 4)
    new = gpu_slice("n1", 1)
    new.name, new.generation = "n1-new", 2
    assert run([gpu_claim_spec(1)], [old, new])[0].ok
    assert not run([gpu_claim_spec(2)], [old, new])[0].ok


def test_first_available_falls_back_in_order() -> None:
    spec = ClaimSpec(
        requests=(
            DeviceRequest(
                name="gpu",
                first_available=(
                    ExactRequest(name="eight", class_name=GPU_CLASS, count=8),
                    ExactRequest(name="four", class_name=GPU_CLASS, count=4),
                    ExactRequest(name="one", class_name=GPU_CLASS, count=1),
                ),
            ),
        )
    )
    _, names = run([spec], [gpu_slice("n1", 6)])
    assert names == [[f"gpu/four:gpu-{i}" for i in range(4)]]


def test_first_available_retried_when_a_later_request_fails() -> None:
    spec = ClaimSpec(
        requests=(
            DeviceRequest(
                name="x",
                first_available=(
                    ExactRequest(name="big", class_name=GPU_CLASS, count=3),
                    ExactRequest(name="small", class_name=GPU_CLASS, count=1),
                ),
            ),
            request("y", 3),
        )
    )
    _, names = run([spec], [gpu_slice("n1", 4)])
    assert names == [["x/small:gpu-0", "y:gpu-1", "y:gpu-2", "y:gpu-3"]]


def test_taints_need_tolerations_and_admin_access_shares() -> None:
    tainted = gpu_slice("n1", 2)
    tainted.devices[0].taints = (DeviceTaint("maintenance", "", "NoSchedule"),)
    _, names = run([gpu_claim_spec(1)], [tainted])
    assert names == [["gpus:gpu-1"]]
    tolerant = ClaimSpec(
        requests=(
            request(count=2, tolerations=(DeviceToleration(key="maintenance", operator="Exists"),)),
        )
    )
    assert run([tolerant], [tainted])[0].ok
    admin = ClaimSpec(requests=(request(count=2, admin_access=True),))
    used = {(GPU_DRIVER, "n1", "gpu-0"), (GPU_DRIVER, "n1", "gpu-1")}
    assert run([admin], [gpu_slice("n1", 2)], in_use=used)[0].ok
    assert not run([admin], [gpu_slice("n1", 1)])[0].ok  # never one device twice in a claim


def test_network_attached_slices_by_node_selector_and_all_nodes() -> None:
    rack = ResourceSlice(
        name="rack",
        driver="nic.example.com",
        pool="rack-a",
        generation=1,
        slice_count=1,
        node_selector=(NodeSelectorTerm(match_expressions=(Requirement("rack", "In", ("a",)),)),),
        devices=[Device(name="nic-0")],
    )
    fabric = ResourceSlice(
        name="fabric",
        driver="nic.example.com",
        pool="fabric",
        generation=1,
        slice_count=1,
        all_nodes=True,
        devices=[Device(name="f-0")],
    )
    nic = {"nic": DeviceClass(name="nic")}
    spec = ClaimSpec(
        requests=(
            DeviceRequest(name="n", exactly=ExactRequest(name="n", class_name="nic", count=2)),
        )
    )
    assert run([spec], [rack, fabric], labels={"rack": "a"}, classes=nic)[0].ok
    assert not run([spec], [rack, fabric], labels={"rack": "b"}, classes=nic)[0].ok


def test_unusable_claims_raise_with_the_object_named() -> None:
    with pytest.raises(AllocationError, match="device class nope does not exist"):
        run(
            [
                ClaimSpec(
                    requests=(
                        DeviceRequest(name="r", exactly=ExactRequest(name="r", class_name="nope")),
                    )
                )
            ],
            [gpu_slice("n1", 1)],
        )
    broken = gpu_claim_spec(1, selectors=('device.attributes["gpu.example.com"].nope == 1',))
    with pytest.raises(AllocationError) as error:
        run([broken], [gpu_slice("n1", 1)])
    assert str(error.value) == (
        "claim default/c0: selector #0 on device gpu.example.com/n1/gpu-0: "
        'CEL runtime error: no such key: "nope"'
    )
    with pytest.raises(AllocationError, match="exceed the limit of 32"):
        run([ClaimSpec(requests=(request("all", mode=AllocationMode.ALL),))], [gpu_slice("n1", 40)])


def test_identical_devices_keep_the_search_small() -> None:
    # 64 identical GPUs, a request for 33 of one domain that has only 32: combinations would
    # be astronomically many; identical devices are tried once per choice point.
    slice_ = gpu_slice("n1", 64, domains=2)
    for device in slice_.devices:
        device.capacity = {f"{GPU_DRIVER}/memory": Fraction(1)}
    outcome, _ = run(
        [gpu_claim_spec(32, same_domain=True), gpu_claim_spec(1, same_domain=True)], [slice_]
    )
    assert outcome.ok and not outcome.exhausted


def test_nodes_with_alike_devices_share_one_search() -> None:
    # Each node has its own NVLink domain names: alike for a matchAttribute constraint.
    slices = [gpu_slice(f"n{i}", 8) for i in range(20)]
    inventory = Inventory.build(slices)
    claims = [ClaimToAllocate("default/c0", gpu_claim_spec(4, same_domain=True))]
    shared = SharedSearches()
    selectors = SelectorCache()
    busy = {inventory.by_id[(GPU_DRIVER, "n3", f"gpu-{i}")] for i in (0, 1)}
    outcomes = []
    for i in range(20):
        devices = inventory.node_devices(Node(name=f"n{i}"))
        outcomes.append(
            allocate(
                claims,
                inventory=inventory,
                node=devices,
                is_free=lambda index: index not in busy,
                classes=CLASSES,
                selectors=selectors,
                shared=shared,
            )
        )
    assert len(shared.outcomes) == 2  # every node alike but n3, whose devices 0 and 1 are in use
    assert all(o is outcomes[0] for i, o in enumerate(outcomes) if i != 3)
    picks = outcomes[3].picks
    assert picks is not None and [p.position for p in picks[0]] == [4, 5, 6, 7]
    assert outcomes[3] is not outcomes[0]
