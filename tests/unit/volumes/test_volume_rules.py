"""Every volume rule through the real scheduler step: kube-scheduler's reasons, the plan's
decisions, and nothing decided for a gang that does not fit."""

from __future__ import annotations

import dataclasses

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import Bind, BindVolume, SelectNode, SetCondition
from gangsched.core.labels import LabelSelector
from gangsched.core.scheduler import CycleReport, Scheduler
from gangsched.core.volumes.book import VolumeBook
from gangsched.core.volumes.model import (
    ClaimRef,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
)
from tests.builders import (
    GIB,
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


def step(cluster: ClusterState) -> CycleReport:
    scheduler = Scheduler(cluster)
    scheduler.enqueue_pending()
    report = scheduler.step(0.0)
    assert report is not None
    return report


def pod_message(report: CycleReport, key: str) -> str:
    """The pod's kube-scheduler style reason (after the gang's own words)."""
    message = next(
        d.message for d in report.decisions if isinstance(d, SetCondition) and d.pod == key
    )
    return message[message.index("0/") :]


def binds(report: CycleReport) -> dict[str, str]:
    return {d.pod: d.node for d in report.decisions if isinstance(d, Bind)}


def volume_decisions(report: CycleReport) -> list[BindVolume | SelectNode]:
    return [d for d in report.decisions if isinstance(d, BindVolume | SelectNode)]


NODES = [node("n1"), node("n2"), node("n3")]


# -- PreFilter -------------------------------------------------------------------------------
def test_missing_claim_is_reported_like_kube_scheduler() -> None:
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=volume_book()))
    assert report.result == "unschedulable"
    assert pod_message(report, "default/p") == (
        '0/3 nodes are available: persistentvolumeclaim "data" not found.'
    )


def test_claim_being_deleted() -> None:
    book = volume_book(claims=[claim("data", deleting=True)])
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert '"data" is being deleted' in pod_message(report, "default/p")
    assert not binds(report)


def test_unbound_immediate_claim() -> None:
    book = volume_book(
        claims=[claim("data", storage_class="fast")],
        classes=[storage_class("fast", provisioner="csi.example.com", mode="Immediate")],
    )
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert pod_message(report, "default/p") == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )


def test_claim_of_unknown_class_is_immediate() -> None:
    book = volume_book(claims=[claim("data", storage_class="nope")])
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert "pod has unbound immediate PersistentVolumeClaims" in pod_message(report, "default/p")


def test_claim_without_class_gets_the_default_class() -> None:
    default = dataclasses.replace(
        storage_class("std", provisioner="csi.example.com"), is_default=True
    )
    book = volume_book(claims=[claim("data", storage_class=None)], classes=[default])
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert report.result == "scheduled"
    (decision,) = volume_decisions(report)
    assert isinstance(decision, SelectNode) and decision.claim == "default/data"


def test_ephemeral_claim_is_pod_dash_volume_and_owned_by_the_pod() -> None:
    worker = with_claims(pod("w"), ephemeral=("scratch",))
    owned = claim("w-scratch", storage_class="std", owner_uids=frozenset({worker.uid}))
    classes = [storage_class("std", provisioner="csi.example.com")]
    report = step(
        volume_cluster(NODES, [worker], book=volume_book(claims=[owned], classes=classes))
    )
    assert report.result == "scheduled"

    stranger = dataclasses.replace(owned, owner_uids=frozenset({"someone-else"}))
    worker = with_claims(pod("w"), ephemeral=("scratch",))
    report = step(
        volume_cluster(NODES, [worker], book=volume_book(claims=[stranger], classes=classes))
    )
    assert "was not created for pod default/w (pod is not owner)" in pod_message(
        report, "default/w"
    )

    worker = with_claims(pod("w"), ephemeral=("scratch",))
    report = step(volume_cluster(NODES, [worker], book=volume_book(classes=classes)))
    assert 'persistentvolumeclaim "w-scratch" not found' in pod_message(report, "default/w")


# -- bound claims ----------------------------------------------------------------------------
def test_bound_claim_follows_its_pv_node_affinity() -> None:
    ref = ClaimRef("default", "data", "uid-pvc-data")
    book = volume_book(
        claims=[claim("data", volume_name="disk")],
        volumes=[local_volume("disk", "n2", claim_ref=ref)],
    )
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert binds(report) == {"default/p": "n2"}
    assert not volume_decisions(report)


def test_bound_claim_on_a_full_node_is_unschedulable_with_node_conflict() -> None:
    ref = ClaimRef("default", "data", "uid-pvc-data")
    book = volume_book(
        claims=[claim("data", volume_name="disk")],
        volumes=[local_volume("disk", "n2", claim_ref=ref)],
    )
    busy = pod("busy", cpu=4, node_name="n2")
    report = step(volume_cluster(NODES, [busy, with_claims(pod("p"), "data")], book=book))
    message = pod_message(report, "default/p")
    assert "2 node(s) had volume node affinity conflict" in message
    assert "1 Insufficient cpu" in message


def test_bound_claim_whose_pv_is_gone() -> None:
    book = volume_book(claims=[claim("data", volume_name="gone")])
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert pod_message(report, "default/p") == (
        "0/3 nodes are available: 3 node(s) unavailable due to one or more pvc(s) bound to "
        "non-existent pv(s)."
    )


def test_volume_zone_labels() -> None:
    nodes = [
        node("a1", labels={"topology.kubernetes.io/zone": "a"}),
        node("b1", labels={"topology.kubernetes.io/zone": "b"}),
        node("c1", labels={"failure-domain.beta.kubernetes.io/zone": "c"}),
    ]
    ref = ClaimRef("default", "data", "uid-pvc-data")
    pv = local_volume("disk", None, claim_ref=ref, labels={"topology.kubernetes.io/zone": "b__c"})
    book = volume_book(claims=[claim("data", volume_name="disk")], volumes=[pv])
    busy = pod("busy", cpu=4, node_name="b1")
    report = step(volume_cluster(nodes, [busy, with_claims(pod("p"), "data")], book=book))
    assert binds(report) == {"default/p": "c1"}  # the beta label counts for its GA twin

    busy_c = pod("busy-c", cpu=4, node_name="c1")
    report = step(volume_cluster(nodes, [busy, busy_c, with_claims(pod("p"), "data")], book=book))
    assert "1 node(s) had no available volume zone" in pod_message(report, "default/p")


# -- WaitForFirstConsumer: static --------------------------------------------------------------
def test_static_binding_takes_the_smallest_pv_that_fits() -> None:
    volumes = [
        local_volume("big", "n1", size="100Gi"),
        local_volume("small", "n1", size="20Gi"),
        local_volume("tiny", "n1", size="5Gi"),
    ]
    book = volume_book(claims=[claim("data", size="10Gi")], volumes=volumes)
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert binds(report) == {"default/p": "n1"}
    (decision,) = volume_decisions(report)
    assert isinstance(decision, BindVolume) and decision.volume == "small"


def test_static_matching_checks_modes_volume_mode_selector_and_class() -> None:
    wanted = dataclasses.replace(
        claim("data", modes=("ReadWriteOnce", "ReadOnlyMany")),
        selector=LabelSelector(match_labels=(("tier", "gold"),)),
    )
    volumes = [
        local_volume("wrong-modes", "n1", labels={"tier": "gold"}),
        dataclasses.replace(
            local_volume(
                "block", "n2", modes=("ReadWriteOnce", "ReadOnlyMany"), labels={"tier": "gold"}
            ),
            volume_mode="Block",
        ),
        local_volume("silver", "n2", modes=("ReadWriteOnce", "ReadOnlyMany")),
        local_volume(
            "other-class",
            "n2",
            storage_class="other",
            modes=("ReadWriteOnce", "ReadOnlyMany"),
            labels={"tier": "gold"},
        ),
        local_volume(
            "good", "n3", modes=("ReadWriteOnce", "ReadOnlyMany"), labels={"tier": "gold"}
        ),
    ]
    book = volume_book(claims=[wanted], volumes=volumes)
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert binds(report) == {"default/p": "n3"}
    (decision,) = volume_decisions(report)
    assert isinstance(decision, BindVolume) and decision.volume == "good"


def test_no_static_pv_and_no_provisioner() -> None:
    book = volume_book(claims=[claim("data", size="100Gi")], volumes=[local_volume("d", "n1")])
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert pod_message(report, "default/p") == (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )


def test_gang_members_never_share_a_static_pv() -> None:
    volumes = [local_volume("d1", "n1"), local_volume("d2", "n1"), local_volume("d3", "n2")]
    claims = [claim(f"c{i}") for i in range(3)]
    members = [with_claims(pod(f"w{i}", group="job", created=float(i)), f"c{i}") for i in range(3)]
    book = volume_book(claims=claims, volumes=volumes)
    report = step(volume_cluster(NODES, members, [group("job", 3)], book=book))
    assert report.result == "scheduled"
    chosen = [d.volume for d in volume_decisions(report) if isinstance(d, BindVolume)]
    assert sorted(chosen) == ["d1", "d2", "d3"]
    by_pod = {d.pod: d.node for d in volume_decisions(report)}
    assert by_pod == binds(report)


def test_gang_with_an_unsatisfiable_member_decides_nothing() -> None:
    volumes = [local_volume("d1", "n1"), local_volume("d2", "n2")]
    claims = [claim(f"c{i}") for i in range(3)]
    members = [with_claims(pod(f"w{i}", group="job", created=float(i)), f"c{i}") for i in range(3)]
    book = volume_book(claims=claims, volumes=volumes)
    cluster = volume_cluster(NODES, members, [group("job", 3)], book=book)
    report = step(cluster)
    assert report.result == "unschedulable"
    assert not binds(report) and not volume_decisions(report)
    assert not book.taken and not book.assumed_volume and not book.assumed_node
    assert not book.planned and not book.placing
    assert all(p.node_name is None for p in cluster.pods.values())


def test_one_pod_with_two_claims_needs_two_pvs_on_one_node() -> None:
    volumes = [local_volume("a", "n1"), local_volume("b", "n2"), local_volume("c", "n2")]
    book = volume_book(claims=[claim("x"), claim("y")], volumes=volumes)
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "x", "y")], book=book))
    assert binds(report) == {"default/p": "n2"}
    assert sorted(d.volume for d in volume_decisions(report) if isinstance(d, BindVolume)) == [
        "b",
        "c",
    ]


def test_pv_prebound_to_the_claim_wins() -> None:
    ref = ClaimRef("default", "data", "")
    volumes = [local_volume("small", "n1", size="10Gi"), local_volume("mine", "n3", claim_ref=ref)]
    volumes[1] = dataclasses.replace(volumes[1], phase="Available")
    book = volume_book(claims=[claim("data")], volumes=volumes)
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert binds(report) == {"default/p": "n3"}


# -- WaitForFirstConsumer: dynamic -------------------------------------------------------------
ZONED = [
    node("a1", labels={"topology.kubernetes.io/zone": "a"}),
    node("b1", labels={"topology.kubernetes.io/zone": "b"}),
]


def test_dynamic_provisioning_honours_allowed_topologies() -> None:
    classes = [storage_class("zonal", provisioner="csi.example.com", zones=("b",))]
    book = volume_book(claims=[claim("data", storage_class="zonal")], classes=classes)
    report = step(volume_cluster(ZONED, [with_claims(pod("p"), "data")], book=book))
    assert binds(report) == {"default/p": "b1"}
    (decision,) = volume_decisions(report)
    assert isinstance(decision, SelectNode) and decision.node == "b1"


def test_static_pv_is_preferred_over_provisioning() -> None:
    classes = [storage_class("mixed", provisioner="csi.example.com")]
    volumes = [local_volume("pre", "a1", storage_class="mixed")]
    book = volume_book(
        claims=[claim("data", storage_class="mixed")], volumes=volumes, classes=classes
    )
    busy = pod("busy", cpu=3, node_name="b1")  # LeastAllocated alone would pick a1 anyway
    report = step(volume_cluster(ZONED, [busy, with_claims(pod("p"), "data")], book=book))
    (decision,) = volume_decisions(report)
    assert isinstance(decision, BindVolume) and decision.volume == "pre"


def capacity_book(max_in_b: float) -> VolumeBook:
    classes = [storage_class("lvm", provisioner="lvm.csi")]
    book = volume_book(claims=[claim("data", storage_class="lvm", size="30Gi")], classes=classes)
    book.drivers["lvm.csi"] = CSIDriver("lvm.csi", storage_capacity=True)
    for zone, capacity, largest in (("a", 20.0, None), ("b", 100.0, max_in_b)):
        book.capacities[f"kube-system/{zone}"] = CSIStorageCapacity(
            "kube-system",
            zone,
            "lvm",
            node_topology=LabelSelector(match_labels=(("topology.kubernetes.io/zone", zone),)),
            capacity=int(capacity * GIB),
            maximum_volume_size=None if largest is None else int(largest * GIB),
        )
    return book


def test_storage_capacity_where_the_driver_publishes_it() -> None:
    report = step(volume_cluster(ZONED, [with_claims(pod("p"), "data")], book=capacity_book(40)))
    assert binds(report) == {"default/p": "b1"}  # a has 20 GiB, b volumes up to 40 GiB

    report = step(volume_cluster(ZONED, [with_claims(pod("p"), "data")], book=capacity_book(25)))
    assert pod_message(report, "default/p") == (
        "0/2 nodes are available: 2 node(s) did not have enough free storage."
    )


def test_capacity_is_not_checked_for_drivers_that_do_not_publish_it() -> None:
    book = capacity_book(25)
    book.drivers["lvm.csi"] = CSIDriver("lvm.csi", storage_capacity=False)
    report = step(volume_cluster(ZONED, [with_claims(pod("p"), "data")], book=book))
    assert report.result == "scheduled"


def test_claim_with_selected_node_stays_on_that_node() -> None:
    classes = [storage_class("std", provisioner="csi.example.com")]
    book = volume_book(
        claims=[claim("data", storage_class="std", selected_node="n3")], classes=classes
    )
    report = step(volume_cluster(NODES, [with_claims(pod("p"), "data")], book=book))
    assert binds(report) == {"default/p": "n3"}


def test_members_sharing_a_claim_go_where_it_is_provisioned() -> None:
    classes = [storage_class("std", provisioner="csi.example.com")]
    shared = claim("shared", storage_class="std", modes=("ReadWriteMany",))
    members = [
        with_claims(pod(f"w{i}", group="job", created=float(i), cpu=1), "shared") for i in range(2)
    ]
    book = volume_book(claims=[shared], classes=classes)
    report = step(volume_cluster(NODES, members, [group("job", 2)], book=book))
    nodes = set(binds(report).values())
    assert len(nodes) == 1
    assert {d.node for d in volume_decisions(report)} == nodes


# -- VolumeRestrictions and NodeVolumeLimits ---------------------------------------------------
def test_read_write_once_pod_claim_in_use_elsewhere() -> None:
    ref = ClaimRef("default", "solo", "uid-pvc-solo")
    book = volume_book(
        claims=[claim("solo", volume_name="disk", modes=("ReadWriteOncePod",))],
        volumes=[local_volume("disk", None, claim_ref=ref, modes=("ReadWriteOncePod",))],
    )
    holder = with_claims(pod("holder", node_name="n1"), "solo")
    report = step(volume_cluster(NODES, [holder, with_claims(pod("p"), "solo")], book=book))
    assert pod_message(report, "default/p") == (
        "0/3 nodes are available: 3 node(s) unavailable due to PersistentVolumeClaim with "
        "ReadWriteOncePod access mode already in-use by another pod."
    )


def test_two_members_of_one_gang_cannot_share_a_read_write_once_pod_claim() -> None:
    classes = [storage_class("std", provisioner="csi.example.com")]
    book = volume_book(
        claims=[claim("solo", storage_class="std", modes=("ReadWriteOncePod",))], classes=classes
    )
    members = [with_claims(pod(f"w{i}", group="job", created=float(i)), "solo") for i in range(2)]
    report = step(volume_cluster(NODES, members, [group("job", 2)], book=book))
    assert report.result == "unschedulable"
    assert not binds(report) and not volume_decisions(report)
    assert "ReadWriteOncePod access mode" in report.message


def test_node_volume_limits_count_existing_and_the_gangs_own_volumes() -> None:
    classes = [storage_class("ebs", provisioner="ebs.csi")]
    ref = ClaimRef("default", "old", "uid-pvc-old")
    book = volume_book(
        claims=[claim("old", storage_class="ebs", volume_name="vol-old")]
        + [claim(f"c{i}", storage_class="ebs") for i in range(3)],
        volumes=[
            local_volume("vol-old", None, storage_class="ebs", claim_ref=ref, csi_driver="ebs.csi")
        ],
        classes=classes,
    )
    for name in ("n1", "n2"):
        book.csi_nodes[name] = CSINode(name, limits=(("ebs.csi", 2),))
    running = with_claims(pod("running", node_name="n1"), "old")
    members = [
        with_claims(pod(f"w{i}", group="job", created=float(i), cpu=0.1), f"c{i}") for i in range(3)
    ]
    nodes = [node("n1"), node("n2")]
    report = step(volume_cluster(nodes, [running, *members], [group("job", 3)], book=book))
    # n1 has room for one more volume, n2 for two: exactly three fit.
    assert report.result == "scheduled"
    placed = list(binds(report).values())
    assert placed.count("n1") == 1 and placed.count("n2") == 2

    book4 = volume_book(
        claims=[claim("old", storage_class="ebs", volume_name="vol-old")]
        + [claim(f"c{i}", storage_class="ebs") for i in range(4)],
        volumes=[
            local_volume("vol-old", None, storage_class="ebs", claim_ref=ref, csi_driver="ebs.csi")
        ],
        classes=classes,
    )
    book4.csi_nodes = dict(book.csi_nodes)
    members = [
        with_claims(pod(f"w{i}", group="job", created=float(i), cpu=0.1), f"c{i}") for i in range(4)
    ]
    running = with_claims(pod("running", node_name="n1"), "old")
    report = step(volume_cluster(nodes, [running, *members], [group("job", 4)], book=book4))
    assert report.result == "unschedulable"
    assert "node(s) exceed max volume count" in report.message


def test_search_moves_a_member_off_the_only_pv_another_member_can_use() -> None:
    # w0 fits the PVs of n1 and n2; w1 only n1's big one. The fixed order puts w0 on n1 (name
    # order breaks the tie) and w1 finds nothing; the search places w0 on n2 instead.
    volumes = [local_volume("big", "n1", size="50Gi"), local_volume("small", "n2", size="10Gi")]
    claims = [claim("c0", size="10Gi"), claim("c1", size="40Gi")]
    members = [with_claims(pod(f"w{i}", group="job", created=float(i)), f"c{i}") for i in range(2)]
    book = volume_book(claims=claims, volumes=volumes)
    report = step(volume_cluster(NODES, members, [group("job", 2)], book=book))
    assert report.result == "scheduled" and report.strategy != "greedy"
    assert binds(report) == {"default/w0": "n2", "default/w1": "n1"}
    chosen = {d.claim: d.volume for d in volume_decisions(report) if isinstance(d, BindVolume)}
    assert chosen == {"default/c0": "small", "default/c1": "big"}
