"""Model storage objects: PVCs, local PVs, StorageClasses, pods using claims, and the volume
book and cluster state holding them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gangsched.core.cluster import ClusterState
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import (
    Node,
    Pod,
    PodGroup,
    PodVolumeClaim,
)
from gangsched.core.quantity import to_units
from gangsched.core.volumes.book import VolumeBook
from gangsched.core.volumes.model import (
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from tests.builders.common import Quantity
from tests.builders.model import cluster


def claim(
    name: str,
    *,
    storage_class: str | None = "local",
    size: Quantity = "10Gi",
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
        request=to_units(size),
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
    size: Quantity = "50Gi",
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
        capacity=to_units(size),
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
    nodes: Iterable[Node], pods: Iterable[Pod], groups: Iterable[PodGroup] = (), *, book: VolumeBook
) -> ClusterState:
    return cluster(nodes, pods, groups, volumes=book)


# ================================================================================ raw JSON
