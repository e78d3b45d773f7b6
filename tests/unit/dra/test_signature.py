"""Nodes share a search only when it would find the same on each (signature.py).

The signature of a node is read from device projections (what the selectors can observe)
rather than from a built search. On random fleets with several selector kinds (attribute
tests, capacity comparisons, a selector that iterates a map and so observes everything, one
that fails at runtime on some devices), taints and constraints, the outcome a node gets from
the shared searches must equal the one its own search finds: same picks, same message.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gangsched.core.dra.allocator import (
    AllocationError,
    ClaimToAllocate,
    Outcome,
    SharedSearches,
    allocate,
)
from gangsched.core.dra.cel import SelectorCache
from gangsched.core.dra.inventory import Inventory, NodeDevices
from gangsched.core.dra.model import (
    ClaimSpec,
    Device,
    DeviceRequest,
    DeviceTaint,
    DeviceToleration,
    ExactRequest,
    MatchAttribute,
    ResourceSlice,
)
from gangsched.core.model import Node
from tests.builders import GPU_CLASS, GPU_DRIVER, gpu_class

GIB = 1024**3
MODEL = f"{GPU_DRIVER}/model"
DOMAIN = f"{GPU_DRIVER}/domain"
SELECTORS = (
    f'device.attributes["{GPU_DRIVER}"].model == "A"',
    f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0',
    f'device.attributes["{GPU_DRIVER}"].exists(k, k == "domain")',
    f'device.attributes["{GPU_DRIVER}"].fast',  # no such key on most devices: an error
)

# model, domain (None: no attribute), memory in GiB, tainted, has the "fast" attribute
device_strategy = st.tuples(
    st.sampled_from(["A", "B"]),
    st.sampled_from(["x", "y", None]),
    st.sampled_from([40, 80]),
    st.booleans(),
    st.booleans(),
)
# count, selector index (None: no selector), tolerates the taint
request_strategy = st.tuples(
    st.integers(1, 3), st.one_of(st.none(), st.integers(0, len(SELECTORS) - 1)), st.booleans()
)
claim_strategy = st.tuples(st.lists(request_strategy, min_size=1, max_size=2), st.booleans())


def make_slice(
    node_name: str, devices: list[tuple[str, str | None, int, bool, bool]]
) -> ResourceSlice:
    return ResourceSlice(
        name=f"{node_name}-slice",
        driver=GPU_DRIVER,
        pool=node_name,
        generation=1,
        slice_count=1,
        node_name=node_name,
        devices=[
            Device(
                name=f"d{i}",
                attributes={
                    MODEL: model,
                    **({DOMAIN: f"{node_name}-{domain}"} if domain else {}),
                    **({f"{GPU_DRIVER}/fast": True} if fast else {}),
                },
                capacity={f"{GPU_DRIVER}/memory": Fraction(memory * GIB)},
                taints=(DeviceTaint("broken", "", "NoSchedule"),) if tainted else (),
            )
            for i, (model, domain, memory, tainted, fast) in enumerate(devices)
        ],
    )


def make_spec(claim: tuple[list[tuple[int, int | None, bool]], bool]) -> ClaimSpec:
    requests, same_domain = claim
    return ClaimSpec(
        requests=tuple(
            DeviceRequest(
                name=f"r{i}",
                exactly=ExactRequest(
                    name=f"r{i}",
                    class_name=GPU_CLASS,
                    count=count,
                    selectors=() if selector is None else (SELECTORS[selector],),
                    tolerations=(DeviceToleration(key="broken", operator="Exists"),)
                    if tolerates
                    else (),
                ),
            )
            for i, (count, selector, tolerates) in enumerate(requests)
        ),
        constraints=(MatchAttribute(DOMAIN),) if same_domain else (),
    )


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(
            st.lists(device_strategy, min_size=1, max_size=3),
            st.sets(st.integers(0, 2), max_size=1),
        ),
        min_size=2,
        max_size=5,
    ),
    claims=st.lists(claim_strategy, min_size=1, max_size=2),
)
# Alike but for the memory the selector compares.
@example(
    nodes=[([("A", None, 80, False, False)], set()), ([("A", None, 40, False, False)], set())],
    claims=[([(1, 1, False)], False)],
)
def test_a_shared_outcome_is_the_one_the_node_would_find_alone(
    nodes: list[tuple[list[tuple[str, str | None, int, bool, bool]], set[int]]],
    claims: list[tuple[list[tuple[int, int | None, bool]], bool]],
) -> None:
    inventory = Inventory.build([make_slice(f"n{i}", d) for i, (d, _) in enumerate(nodes)])
    to_allocate = [ClaimToAllocate(f"ns/c{i}", make_spec(c)) for i, c in enumerate(claims)]
    shared = SharedSearches()
    selectors = SelectorCache()
    for i, (_, in_use) in enumerate(nodes):
        devices = inventory.node_devices(Node(name=f"n{i}"))
        busy = {devices.devices[p] for p in in_use if p < len(devices.devices)}

        def run(
            share: SharedSearches | None, busy: set[int] = busy, devices: NodeDevices = devices
        ) -> Outcome | str:
            try:
                return allocate(
                    to_allocate,
                    inventory=inventory,
                    node=devices,
                    is_free=lambda index: index not in busy,
                    classes={GPU_CLASS: gpu_class()},
                    selectors=selectors,
                    shared=share,
                )
            except AllocationError as error:
                return f"error: {error}"

        together, alone = run(shared), run(None)
        assert together == alone, f"node n{i}"


def test_nodes_alike_but_for_unobserved_attributes_share_one_search() -> None:
    """Every device has its own serial number, which no selector looks at: one projection
    per model, one search for all nodes."""
    slices = [
        ResourceSlice(
            name=f"n{i}",
            driver=GPU_DRIVER,
            pool=f"n{i}",
            generation=1,
            slice_count=1,
            node_name=f"n{i}",
            devices=[
                Device(name=f"d{d}", attributes={MODEL: "A", f"{GPU_DRIVER}/serial": f"{i}-{d}"})
                for d in range(4)
            ],
        )
        for i in range(10)
    ]
    inventory = Inventory.build(slices)
    spec = ClaimSpec(
        requests=(
            DeviceRequest(
                name="r",
                exactly=ExactRequest(
                    name="r", class_name=GPU_CLASS, count=2, selectors=SELECTORS[:1]
                ),
            ),
        )
    )
    shared = SharedSearches()
    outcomes = [
        allocate(
            [ClaimToAllocate("ns/c", spec)],
            inventory=inventory,
            node=inventory.node_devices(Node(name=f"n{i}")),
            is_free=lambda _: True,
            classes={GPU_CLASS: gpu_class()},
            selectors=SelectorCache(),
            shared=shared,
        )
        for i in range(10)
    ]
    assert all(o.ok for o in outcomes)
    assert len(shared.outcomes) == 1
    assert shared.signatures is not None
    # Only the devices of the one node searched were fingerprinted, not the 40.
    assert len(inventory.kinds.views) == 4
