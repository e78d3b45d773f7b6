"""Properties of the gang's volume plan over random clusters of local PVs and provisioners:
no PV is ever given to two claims (within a gang or across gangs), every static choice fits
its claim and its pod's node, and a gang that does not fit decides and keeps nothing."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.decisions import Bind, BindVolume, SelectNode
from gangsched.core.labels import any_term_matches
from gangsched.core.model import Pod
from gangsched.core.scheduler import Scheduler
from gangsched.core.volumes.book import VolumeBook
from gangsched.core.volumes.model import PersistentVolumeClaim
from tests.builders import (
    claim,
    group,
    local_volume,
    node,
    pod,
    storage_class,
    volume_book,
    volume_cluster,
    with_claims,
)


@dataclass
class World:
    nodes: int
    #: Per node, the sizes (GiB) of its local PVs.
    disks: list[list[int]]
    #: Per gang, per member, the sizes (GiB) of its claims; and the gang's minMember.
    gangs: list[tuple[list[list[int]], int]]
    #: Claims of the "dyn" class (provisioned on nodes of zone a) instead of "local".
    dynamic: set[tuple[int, int, int]]
    #: Two members of gang 0 share its first claim (ReadWriteOncePod when True).
    shared: bool | None


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes = draw(st.integers(2, 5))
    disks = [draw(st.lists(st.sampled_from([5, 10, 20, 50]), max_size=3)) for _ in range(nodes)]
    gangs = []
    for _ in range(draw(st.integers(1, 2))):
        members = draw(
            st.lists(
                st.lists(st.sampled_from([5, 10, 20]), min_size=1, max_size=2),
                min_size=1,
                max_size=4,
            )
        )
        gangs.append((members, draw(st.integers(1, len(members)))))
    dynamic = set()
    for g, (members, _) in enumerate(gangs):
        for m, sizes in enumerate(members):
            for c in range(len(sizes)):
                if draw(st.booleans()) and draw(st.booleans()):
                    dynamic.add((g, m, c))
    shared = draw(st.sampled_from([None, False, True]))
    return World(nodes, disks, gangs, dynamic, shared)


def build(world: World) -> tuple[list[Pod], VolumeBook, list[str]]:
    nodes = [
        node(f"n{i}", cpu=8, labels={"topology.kubernetes.io/zone": "a" if i % 2 else "b"})
        for i in range(world.nodes)
    ]
    volumes = [
        local_volume(f"pv-{i}-{j}", f"n{i}", size=f"{size}Gi")
        for i, sizes in enumerate(world.disks)
        for j, size in enumerate(sizes)
    ]
    claims: list[PersistentVolumeClaim] = []
    pods: list[Pod] = []
    for g, (members, _) in enumerate(world.gangs):
        for m, sizes in enumerate(members):
            names = []
            for c, size in enumerate(sizes):
                name = f"g{g}-m{m}-c{c}"
                if world.shared is not None and g == 0 and m == 1 and c == 0:
                    name = "g0-m0-c0"  # shares member 0's first claim
                else:
                    modes = (
                        ("ReadWriteOncePod",)
                        if world.shared and name == "g0-m0-c0"
                        else ("ReadWriteOnce",)
                    )
                    cls = "dyn" if (g, m, c) in world.dynamic else "local"
                    claims.append(claim(name, storage_class=cls, size=f"{size}Gi", modes=modes))
                names.append(name)
            pods.append(with_claims(pod(f"g{g}-m{m}", group=f"g{g}", created=float(m)), *names))
    classes = [storage_class(), storage_class("dyn", provisioner="csi.example.com", zones=("a",))]
    book = volume_book(claims=claims, volumes=volumes, classes=classes)
    cluster_nodes = [n.name for n in nodes]
    return pods, book, cluster_nodes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_volume_plan_invariants(world: World) -> None:
    pods, book, _ = build(world)
    nodes = [
        node(f"n{i}", cpu=8, labels={"topology.kubernetes.io/zone": "a" if i % 2 else "b"})
        for i in range(world.nodes)
    ]
    groups = [group(f"g{g}", min_member) for g, (_, min_member) in enumerate(world.gangs)]
    cluster = volume_cluster(nodes, pods, groups, book=book)
    scheduler = Scheduler(cluster)
    scheduler.enqueue_pending()
    given_out: dict[str, str] = {}  # PV -> claim, over every gang
    for _ in range(len(groups)):
        report = scheduler.step(0.0)
        if report is None:
            break
        binds = {d.pod: d.node for d in report.decisions if isinstance(d, Bind)}
        decided = [d for d in report.decisions if isinstance(d, BindVolume | SelectNode)]
        if report.result != "scheduled":
            assert not binds and not decided
            assert not book.planned and not book.placing
            continue
        for decision in decided:
            assert binds[decision.pod] == decision.node
            if isinstance(decision, BindVolume):
                owner = given_out.get(decision.volume, decision.claim)
                assert owner == decision.claim, "a PV given to two claims"
                given_out[decision.volume] = decision.claim
                volume = book.volumes[decision.volume]
                wanted = book.claims[decision.claim]
                assert volume.capacity >= wanted.request
                assert volume.node_affinity is not None
                target = cluster.nodes[decision.node]
                assert any_term_matches(volume.node_affinity, target.name, target.labels)
            else:  # provisioning: only for the class that provisions, only where it may
                assert book.claims[decision.claim].storage_class == "dyn"
                assert cluster.nodes[decision.node].labels["topology.kubernetes.io/zone"] == "a"
        for pod_key in binds:
            member = cluster.pods[pod_key]
            for volume_claim in member.volume_claims:
                key = f"default/{volume_claim.claim}"
                assert any(d.claim == key for d in decided) or book.decision_of(key) is not None
    # Whatever stays assumed is consistent: one claim per PV, one PV per claim.
    assert len(set(book.taken.values())) == len(book.taken)
    assert {v: c for c, v in book.assumed_volume.items()} == book.taken
    if world.shared:  # a ReadWriteOncePod claim shared by two members is never placed twice
        users = [
            p
            for p in cluster.pods.values()
            if p.node_name and any(v.claim == "g0-m0-c0" for v in p.volume_claims)
        ]
        assert len(users) <= 1


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_a_gang_with_an_unsatisfiable_member_binds_nothing(world: World) -> None:
    members, _ = world.gangs[0]
    world.gangs = [([*members, [500]], len(members) + 1)]  # 500 GiB: no PV, no provisioner
    world.shared = None
    world.dynamic = {key for key in world.dynamic if key[1] < len(members)}
    pods, book, _ = build(world)
    nodes = [
        node(f"n{i}", cpu=8, labels={"topology.kubernetes.io/zone": "a" if i % 2 else "b"})
        for i in range(world.nodes)
    ]
    cluster = volume_cluster(nodes, pods, [group("g0", len(members) + 1)], book=book)
    scheduler = Scheduler(cluster)
    scheduler.enqueue_pending()
    report = scheduler.step(0.0)
    assert report is not None and report.result != "scheduled"
    assert not [d for d in report.decisions if isinstance(d, Bind | BindVolume | SelectNode)]
    assert not book.taken and not book.assumed_node and not book.planned and not book.placing
    assert all(p.node_name is None for p in cluster.pods.values())
