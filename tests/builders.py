"""Terse builders for model objects in tests (CPU in cores or millicores, memory in GiB)."""

from __future__ import annotations

from collections.abc import Sequence

from gangsched.core.cluster import ClusterState
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import (
    Dialect,
    DisruptionMode,
    GroupRef,
    Node,
    NodeConstraints,
    Pod,
    PodGroup,
    PodVolumeClaim,
    Taint,
)
from gangsched.core.volumes.book import VolumeBook
from gangsched.core.volumes.model import (
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

GIB = 1024**3
SCHEDULER = "gangsched"


def node(
    name: str,
    *,
    cpu: float = 4,
    memory_gib: float = 16,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    unschedulable: bool = False,
    extra: dict[str, int] | None = None,
) -> Node:
    allocatable = {"cpu": int(cpu * 1000), "memory": int(memory_gib * GIB), "pods": pods}
    allocatable.update(extra or {})
    return Node(
        name=name,
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        allocatable=allocatable,
        taints=taints,
        unschedulable=unschedulable,
    )


def pod(
    name: str,
    *,
    cpu: float = 1,
    memory_gib: float = 0.1,
    group: str | None = None,
    node_name: str | None = None,
    priority: int = 0,
    created: float = 0.0,
    namespace: str = "default",
    scheduler_name: str = SCHEDULER,
    constraints: NodeConstraints | None = None,
    labels: dict[str, str] | None = None,
    extra: dict[str, int] | None = None,
    preemption_policy: str = "PreemptLowerPriority",
) -> Pod:
    requests = {"cpu": round(cpu * 1000), "memory": int(memory_gib * GIB)}
    requests.update(extra or {})
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=dict(labels or {}),
        scheduler_name=scheduler_name,
        node_name=node_name,
        phase="Running" if node_name else "Pending",
        priority=priority,
        preemption_policy=preemption_policy,
        requests={k: v for k, v in requests.items() if v},
        constraints=constraints or NodeConstraints(),
        created=created,
        group=GroupRef(Dialect.SIGS, namespace, group) if group else None,
    )


def group(
    name: str,
    min_member: int,
    *,
    namespace: str = "default",
    priority: int | None = None,
    mode: DisruptionMode = DisruptionMode.SINGLE,
    gang_group: tuple[str, ...] = (),
    created: float = 0.0,
) -> PodGroup:
    return PodGroup(
        ref=GroupRef(Dialect.SIGS, namespace, name),
        min_member=min_member,
        priority=priority,
        disruption_mode=mode,
        gang_group=tuple(GroupRef(Dialect.SIGS, namespace, g) for g in gang_group),
        created=created,
    )


def cluster(
    nodes: list[Node], pods: list[Pod], groups: list[PodGroup] | None = None
) -> ClusterState:
    return ClusterState.build(scheduler_name=SCHEDULER, nodes=nodes, pods=pods, groups=groups or [])


def gang_pods(name: str, count: int, **kwargs: object) -> list[Pod]:
    return [
        pod(f"{name}-{i}", group=name, created=float(i), **kwargs)  # type: ignore[arg-type]
        for i in range(count)
    ]


# -- volumes ------------------------------------------------------------------------------------
def claim(
    name: str,
    *,
    storage_class: str | None = "local",
    size_gib: float = 10,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    volume_name: str = "",
    namespace: str = "default",
    selected_node: str = "",
    deleting: bool = False,
    owner_uids: frozenset[str] = frozenset(),
) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        namespace=namespace,
        name=name,
        uid=f"uid-pvc-{name}",
        storage_class=storage_class,
        access_modes=frozenset(modes),
        request=int(size_gib * GIB),
        volume_name=volume_name,
        bind_completed=bool(volume_name),
        phase="Bound" if volume_name else "Pending",
        selected_node=selected_node,
        deleting=deleting,
        owner_uids=owner_uids,
    )


def local_volume(
    name: str,
    node_name: str | None,
    *,
    storage_class: str = "local",
    size_gib: float = 50,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    labels: dict[str, str] | None = None,
    claim_ref: ClaimRef | None = None,
    csi_driver: str = "",
) -> PersistentVolume:
    affinity = None
    if node_name is not None:
        affinity = (
            NodeSelectorTerm(
                match_expressions=(Requirement("kubernetes.io/hostname", "In", (node_name,)),)
            ),
        )
    return PersistentVolume(
        name=name,
        labels=tuple(sorted((labels or {}).items())),
        storage_class=storage_class,
        capacity=int(size_gib * GIB),
        access_modes=frozenset(modes),
        node_affinity=affinity,
        claim_ref=claim_ref,
        phase="Bound" if claim_ref is not None else "Available",
        csi_driver=csi_driver,
        volume_handle=name if csi_driver else "",
    )


def storage_class(
    name: str = "local",
    *,
    provisioner: str = "kubernetes.io/no-provisioner",
    mode: str = "WaitForFirstConsumer",
    zones: tuple[str, ...] | None = None,
) -> StorageClass:
    topologies = None
    if zones is not None:
        topologies = (
            NodeSelectorTerm(
                match_expressions=(Requirement("topology.kubernetes.io/zone", "In", zones),)
            ),
        )
    return StorageClass(
        name=name, provisioner=provisioner, binding_mode=mode, allowed_topologies=topologies
    )


def with_claims(base: Pod, *claims: str, ephemeral: tuple[str, ...] = ()) -> Pod:
    """The pod with `persistentVolumeClaim` volumes for `claims` and generic ephemeral
    volumes named `ephemeral` (claims `<pod>-<volume>`)."""
    volumes = [PodVolumeClaim(volume=f"v-{c}", claim=c) for c in claims]
    volumes += [
        PodVolumeClaim(volume=v, claim=f"{base.name}-{v}", ephemeral=True) for v in ephemeral
    ]
    base.volume_claims = tuple(volumes)
    return base


def volume_book(
    *,
    claims: Sequence[PersistentVolumeClaim] = (),
    volumes: Sequence[PersistentVolume] = (),
    classes: Sequence[StorageClass] | None = None,
) -> VolumeBook:
    book = VolumeBook()
    for known in classes if classes is not None else [storage_class()]:
        book.classes[known.name] = known
    for pending in claims:
        book.upsert_claim(pending)
    book.replace_volumes(volumes)
    return book


def volume_cluster(
    nodes: list[Node],
    pods: list[Pod],
    groups: list[PodGroup] | None = None,
    *,
    book: VolumeBook,
) -> ClusterState:
    return ClusterState.build(
        scheduler_name=SCHEDULER, nodes=nodes, pods=pods, groups=groups or [], volumes=book
    )
