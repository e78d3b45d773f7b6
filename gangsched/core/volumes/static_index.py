"""An index of the PVs a claim could be statically bound to, fast at thousands of local PVs.

Checking every PV for every claim of every gang member, and OR-ing one node mask per PV, is
what made static binding slow (10,000 local PVs and 128 claims: seconds per gang). Available
PVs come in few shapes (class, capacity, access modes, volume mode, labels), and whether a PV
fits a claim depends only on its shape. So the index groups available PVs by shape and keeps,
per shape, how many of its PVs each node can reach (one count vector) and which PVs reach a
given node. A claim's nodes are then the nodes where the count over the shapes that fit it,
minus the PVs already chosen for other claims, is positive: a handful of vector additions.

Which PV a claim binds to follows component-helpers' FindMatchingVolume: a PV pre-bound to
the claim wins; otherwise the smallest Available PV of the claim's class with enough capacity,
the same volume mode, every access mode the claim asks for, labels matching the claim's
selector and node affinity admitting the node. `taken` (PV name -> the claim it was chosen
for, by this cycle or a bind in flight) is the VolumeBook's.

Rebuilt when a PV or the node set changes (PV updates are rare next to scheduling cycles).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gangsched.core.labels import NodeSelectorTerm
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.volumes.matching import (
    hostname_index,
    single_node_indices,
    terms_mask,
    volume_admits,
)
from gangsched.core.volumes.model import PersistentVolume, PersistentVolumeClaim, StorageClass

CountVector = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class Shape:
    storage_class: str
    capacity: int
    access_modes: frozenset[str]
    volume_mode: str
    labels: tuple[tuple[str, str], ...]

    def fits(self, claim: PersistentVolumeClaim) -> bool:
        """The node-independent half of FindMatchingVolume for an Available, unclaimed PV."""
        if self.capacity < claim.request or self.volume_mode != claim.volume_mode:
            return False
        if not claim.access_modes <= self.access_modes:
            return False
        return claim.selector is None or claim.selector.matches(dict(self.labels))


def shape_of(volume: PersistentVolume) -> Shape:
    return Shape(
        volume.storage_class,
        volume.capacity,
        volume.access_modes,
        volume.volume_mode,
        volume.labels,
    )


def is_available(volume: PersistentVolume) -> bool:
    return volume.claim_ref is None and volume.phase == "Available" and not volume.deleting


@dataclass(slots=True, eq=False)
class StaticIndex:
    #: Per class, the shapes of its available PVs, smallest capacity first.
    shapes: dict[str, list[Shape]] = field(default_factory=dict)
    counts: dict[Shape, CountVector] = field(default_factory=dict)
    #: Per shape, node index -> its PVs that reach the node (name order).
    by_node: dict[Shape, dict[int, list[PersistentVolume]]] = field(default_factory=dict)
    #: PV name -> its shape and node affinity (available PVs only), and for the local-PV
    #: affinity shape the node indices it reaches.
    shape: dict[str, Shape] = field(default_factory=dict)
    affinity: dict[str, tuple[NodeSelectorTerm, ...] | None] = field(default_factory=dict)
    nodes_of: dict[str, list[int]] = field(default_factory=dict)
    #: Claim key -> PVs whose claimRef names it (pre-bound), not being deleted.
    prebound: dict[str, list[PersistentVolume]] = field(default_factory=dict)

    @classmethod
    def build(cls, volumes: Iterable[PersistentVolume], snap: Snapshot) -> StaticIndex:
        index = cls()
        size = len(snap)
        hostnames = hostname_index(snap)
        local: dict[Shape, list[int]] = {}
        for volume in sorted(volumes, key=lambda v: (v.capacity, v.name)):
            if volume.claim_ref is not None:
                if not volume.deleting:
                    index.prebound.setdefault(volume.claim_ref.key, []).append(volume)
                continue
            if not is_available(volume):
                continue
            shape = shape_of(volume)
            index.shape[volume.name] = shape
            index.affinity[volume.name] = volume.node_affinity
            if shape not in index.counts:
                index.counts[shape] = np.zeros(size, dtype=np.int32)
                index.by_node[shape] = {}
                index.shapes.setdefault(shape.storage_class, []).append(shape)
                local[shape] = []
            terms = volume.node_affinity
            nodes = None if terms is None else single_node_indices(snap, terms, hostnames)
            if nodes is None:
                reach = terms_mask(snap, terms)
                index.counts[shape] += reach
                nodes = [int(n) for n in np.flatnonzero(reach)]
            else:
                index.nodes_of[volume.name] = nodes
                local[shape] += nodes
            by_node = index.by_node[shape]
            for node in nodes:
                by_node.setdefault(node, []).append(volume)
        for shape, nodes in local.items():
            if nodes:
                index.counts[shape] += np.bincount(nodes, minlength=size).astype(np.int32)
        return index

    def subtract(self, snap: Snapshot, total: CountVector, volumes: list[str]) -> None:
        """Take the PVs' reach off a per-node count (one vector operation for local PVs)."""
        local: list[int] = []
        for volume in volumes:
            nodes = self.nodes_of.get(volume)
            if nodes is not None:
                local += nodes
            else:
                total -= terms_mask(snap, self.affinity[volume])
        if local:
            np.subtract.at(total, local, 1)

    def fitting(self, claim: PersistentVolumeClaim, storage_class: str) -> list[Shape]:
        return [s for s in self.shapes.get(storage_class, ()) if s.fits(claim)]

    def prebound_to(self, claim: PersistentVolumeClaim) -> PersistentVolume | None:
        for volume in self.prebound.get(claim.key, ()):
            if volume.bound_to(claim):
                return volume
        return None

    def mask(
        self,
        taken: Mapping[str, str],
        snap: Snapshot,
        claim: PersistentVolumeClaim,
        shapes: list[Shape],
    ) -> BoolVector:
        """Nodes reachable by an available PV of a fitting shape not chosen for another claim."""
        if not shapes:
            return np.zeros(len(snap), dtype=np.bool_)
        total = sum((self.counts[s] for s in shapes[1:]), self.counts[shapes[0]].copy())
        fitting = set(shapes)
        others = [
            volume
            for volume, owner in taken.items()
            if owner != claim.key and self.shape.get(volume) in fitting
        ]
        self.subtract(snap, total, others)
        result: BoolVector = total > 0
        return result

    def smallest_on(
        self,
        taken: Mapping[str, str],
        claim: PersistentVolumeClaim,
        shapes: list[Shape],
        node: int,
        *,
        exclude: set[str] | None = None,
    ) -> PersistentVolume | None:
        """The smallest fitting PV reaching `node` that no other claim has (nor `exclude`)."""
        for shape in shapes:  # smallest capacity first
            for volume in self.by_node[shape].get(node, ()):
                owner = taken.get(volume.name, claim.key)
                if owner == claim.key and not (exclude and volume.name in exclude):
                    return volume
        return None

    def claim_mask(
        self,
        taken: Mapping[str, str],
        snap: Snapshot,
        claim: PersistentVolumeClaim,
        storage_class: StorageClass,
    ) -> BoolVector:
        """Nodes where some PV can be bound statically to the claim (a PV pre-bound to the
        claim, else an available PV of a fitting shape that no other claim was given)."""
        prebound = self.prebound_to(claim)
        if prebound is not None:
            return terms_mask(snap, prebound.node_affinity)
        return self.mask(taken, snap, claim, self.fitting(claim, storage_class.name))

    def volume_for(
        self,
        taken: Mapping[str, str],
        snap: Snapshot,
        claim: PersistentVolumeClaim,
        storage_class: StorageClass,
        node: int,
        *,
        exclude: set[str] | None = None,
    ) -> PersistentVolume | None:
        """The PV to bind on `node`: the pre-bound one, else the smallest that fits."""
        prebound = self.prebound_to(claim)
        if prebound is not None:
            return prebound if volume_admits(prebound, snap, node) else None
        shapes = self.fitting(claim, storage_class.name)
        return self.smallest_on(taken, claim, shapes, node, exclude=exclude)
