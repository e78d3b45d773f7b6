"""Properties of DRA allocation, checked against brute force on small device sets."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import AllocateClaim, Bind
from gangsched.core.dra.allocator import ClaimToAllocate, Outcome, SharedSearches, allocate
from gangsched.core.dra.cel import SelectorCache
from gangsched.core.dra.inventory import Inventory, NodeDevices
from gangsched.core.dra.model import (
    ClaimSpec,
    Device,
    DeviceRequest,
    ExactRequest,
    MatchAttribute,
    ResourceSlice,
)
from gangsched.core.dra.state import DraState
from gangsched.core.model import Node
from gangsched.core.scheduler import Scheduler
from tests.builders import (
    GPU_CLASS,
    GPU_DRIVER,
    SCHEDULER,
    gpu_class,
    group,
    node,
    pod,
    resource_claim,
    with_resource_claims,
)

MODEL = f"{GPU_DRIVER}/model"
DOMAIN = f"{GPU_DRIVER}/domain"
WANTS_A = f'device.attributes["{GPU_DRIVER}"].model == "A"'

devices_strategy = st.lists(
    st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["x", "y", "z", None])),
    min_size=1,
    max_size=6,
)
request_strategy = st.tuples(st.integers(1, 3), st.booleans())  # count, wants model A
claim_strategy = st.tuples(st.lists(request_strategy, min_size=1, max_size=2), st.booleans())


def make_slice(node_name: str, devices: list[tuple[str, str | None]]) -> ResourceSlice:
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
                attributes={MODEL: model, **({DOMAIN: domain} if domain else {})},
            )
            for i, (model, domain) in enumerate(devices)
        ],
    )


def make_spec(claim: tuple[list[tuple[int, bool]], bool]) -> ClaimSpec:
    requests, same_domain = claim
    return ClaimSpec(
        requests=tuple(
            DeviceRequest(
                name=f"r{i}",
                exactly=ExactRequest(
                    name=f"r{i}",
                    class_name=GPU_CLASS,
                    count=count,
                    selectors=(WANTS_A,) if wants_a else (),
                ),
            )
            for i, (count, wants_a) in enumerate(requests)
        ),
        constraints=(MatchAttribute(DOMAIN),) if same_domain else (),
    )


def satisfies(device: Device, request: ExactRequest) -> bool:
    return not request.selectors or device.attributes[MODEL] == "A"


def brute_force(specs: list[ClaimSpec], devices: list[Device], free: set[int]) -> bool:
    """Every way to give each request `count` distinct free matching devices."""
    slots = [(c, r) for c, spec in enumerate(specs) for r in spec.requests]

    def solve(i: int, used: frozenset[int], chosen: dict[int, list[int]]) -> bool:
        if i == len(slots):
            for c, spec in enumerate(specs):
                if spec.constraints:
                    values = {devices[d].attributes.get(DOMAIN) for d in chosen.get(c, [])}
                    if None in values or len(values) > 1:
                        return False
            return True
        claim, request = slots[i]
        assert request.exactly is not None
        options = [d for d in sorted(free - used) if satisfies(devices[d], request.exactly)]
        for combo in combinations(options, request.exactly.count):
            picked = {**chosen, claim: [*chosen.get(claim, []), *combo]}
            if solve(i + 1, used | set(combo), picked):
                return True
        return False

    return solve(0, frozenset(), {})


@settings(max_examples=300, deadline=None)
@given(
    devices=devices_strategy,
    claims=st.lists(claim_strategy, min_size=1, max_size=3),
    in_use=st.sets(st.integers(0, 5), max_size=3),
)
def test_allocator_agrees_with_brute_force_and_is_sound(
    devices: list[tuple[str, str | None]],
    claims: list[tuple[list[tuple[int, bool]], bool]],
    in_use: set[int],
) -> None:
    slice_ = make_slice("n1", devices)
    inventory = Inventory.build([slice_])
    node_devices = inventory.node_devices(Node(name="n1"))
    specs = [make_spec(c) for c in claims]
    free = {i for i in range(len(devices)) if i not in in_use}
    outcome = allocate(
        [ClaimToAllocate(f"ns/c{i}", s) for i, s in enumerate(specs)],
        inventory=inventory,
        node=node_devices,
        is_free=lambda index: index in free,
        classes={GPU_CLASS: gpu_class()},
        selectors=SelectorCache(),
    )
    assert outcome.ok == brute_force(specs, slice_.devices, free)
    if outcome.picks is None:
        return
    taken = [pick.position for picks in outcome.picks for pick in picks]
    assert len(taken) == len(set(taken)), "a device given twice"
    assert set(taken) <= free
    for spec, picks in zip(specs, outcome.picks, strict=True):
        by_request = {r.name: r.exactly for r in spec.requests}
        for request in spec.requests:
            assert request.exactly is not None
            got = [p for p in picks if p.request == request.name]
            assert len(got) == request.exactly.count
        for pick in picks:
            exact = by_request[pick.request]
            assert exact is not None
            assert satisfies(slice_.devices[pick.position], exact)
        if spec.constraints:
            values = {slice_.devices[p.position].attributes.get(DOMAIN) for p in picks}
            assert None not in values and len(values) == 1


@settings(max_examples=120, deadline=None)
@given(
    nodes=st.lists(devices_strategy, min_size=1, max_size=2),
    members=st.lists(claim_strategy, min_size=1, max_size=3),
    shared=st.booleans(),
)
def test_gang_gets_all_claims_or_nothing_and_no_device_twice(
    nodes: list[list[tuple[str, str | None]]],
    members: list[tuple[list[tuple[int, bool]], bool]],
    shared: bool,
) -> None:
    names = [f"n{i}" for i in range(len(nodes))]
    pods, claims = [], []
    for i, member in enumerate(members):
        p = pod(f"m{i}", group="g", created=float(i))
        own = resource_claim(f"m{i}-c", make_spec(member))
        claims.append(own)
        with_resource_claims(p, own.name, *(["shared"] if shared else []))
        pods.append(p)
    if shared:
        claims.append(resource_claim("shared", make_spec(([(1, False)], False))))
    dra = DraState.build(
        classes=[gpu_class()],
        slices=[make_slice(n, d) for n, d in zip(names, nodes, strict=True)],
        claims=claims,
    )
    cluster = ClusterState.build(
        scheduler_name=SCHEDULER,
        nodes=[node(n, 64) for n in names],
        pods=pods,
        groups=[group("g", len(pods))],
        extensions=[dra],
    )
    scheduler = Scheduler(cluster)
    scheduler.enqueue_pending()
    report = scheduler.step(0.0)
    assert report is not None
    binds = {d.pod: d.node for d in report.decisions if isinstance(d, Bind)}
    allocations = [d for d in report.decisions if isinstance(d, AllocateClaim)]
    if not binds:
        assert not allocations
        assert all(c.allocation is None and not c.reserved_for for c in dra.claims.values())
        return
    assert len(binds) == len(pods), "all or nothing"
    ids = [r.device_id for d in allocations if d.allocation for r in d.allocation.results]
    assert len(ids) == len(set(ids)), "a device given twice"
    for p in pods:
        for pod_claim in p.claims:
            claim = dra.claims[f"default/{pod_claim.claim_name}"]
            assert claim.allocation is not None
            assert claim.allocation.admits(binds[p.key], {})
            assert any(c.name == p.name for c in claim.reserved_for)
            devices = {
                r.device: dra.inventory.entries[dra.inventory.by_id[r.device_id]].device
                for r in claim.allocation.results
            }
            for result in claim.allocation.results:
                request = next(q for q in claim.spec.requests if q.name == result.request)
                assert request.exactly is not None
                assert satisfies(devices[result.device], request.exactly)
            if claim.spec.constraints:
                values = {d.attributes.get(DOMAIN) for d in devices.values()}
                assert None not in values and len(values) == 1


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(devices_strategy, st.sets(st.integers(0, 5), max_size=3)), min_size=2, max_size=5
    ),
    claims=st.lists(claim_strategy, min_size=1, max_size=2),
)
def test_nodes_sharing_searches_get_what_each_would_get_alone(
    nodes: list[tuple[list[tuple[str, str | None]], set[int]]],
    claims: list[tuple[list[tuple[int, bool]], bool]],
) -> None:
    """An outcome shared by signature is the one a search of that very node finds: same
    success, same request per pick, and each picked position satisfies its request there.
    Domain names are made per node (as real NVLink domains are), so sharing is exercised."""
    slices = [
        make_slice(f"n{i}", [(m, f"{d}-n{i}" if d else None) for m, d in devices])
        for i, (devices, _) in enumerate(nodes)
    ]
    inventory = Inventory.build(slices)
    specs = [make_spec(c) for c in claims]
    to_allocate = [ClaimToAllocate(f"ns/c{i}", s) for i, s in enumerate(specs)]
    shared = SharedSearches()
    selectors = SelectorCache()
    for i, (_, in_use) in enumerate(nodes):
        node_devices = inventory.node_devices(Node(name=f"n{i}"))
        busy = {node_devices.devices[p] for p in in_use if p < len(node_devices.devices)}

        def run(
            share: SharedSearches | None,
            node_devices: NodeDevices = node_devices,
            busy: set[int] = busy,
        ) -> Outcome:
            return allocate(
                to_allocate,
                inventory=inventory,
                node=node_devices,
                is_free=lambda index: index not in busy,
                classes={GPU_CLASS: gpu_class()},
                selectors=selectors,
                shared=share,
            )

        alone, together = run(None), run(shared)
        assert together.ok == alone.ok
        if together.picks is None or alone.picks is None:
            continue
        devices = [inventory.entries[d].device for d in node_devices.devices]
        free = [p for p, d in enumerate(node_devices.devices) if d not in busy]
        for spec, mine, theirs in zip(specs, together.picks, alone.picks, strict=True):
            assert [p.request for p in mine] == [p.request for p in theirs]
            positions = [p.position for p in mine]
            assert len(positions) == len(set(positions)) and set(positions) <= set(free)
            by_request = {r.name: r.exactly for r in spec.requests}
            for pick in mine:
                exact = by_request[pick.request]
                assert exact is not None and satisfies(devices[pick.position], exact)
            if spec.constraints:
                values = {devices[p].attributes.get(DOMAIN) for p in positions}
                assert None not in values and len(values) == 1
