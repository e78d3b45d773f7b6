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

Built once for a node set and then updated PV by PV (`update`): every gang that binds local
PVs changes a hundred of them, and rebuilding 10,000 after each gang cost more than the
cycle. An update leaves the index as a rebuild would leave it: the same shapes in the same
order (smallest capacity first, then by their smallest PV name), the same PVs per node in name
order, the same counts (a property test compares the two after random changes).
"""

from __future__ import annotations

import heapq
from bisect import insort
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


def _add_at(counts: CountVector, nodes: list[int], step: int) -> None:
    """`np.add.at` (repeated nodes count twice), without its overhead for the usual one
    node of a local PV."""
    if len(nodes) == 1:
        counts[nodes[0]] += step
    else:
        np.add.at(counts, nodes, step)


def _order(volume: PersistentVolume) -> tuple[int, str]:
    return (volume.capacity, volume.name)


def _name(volume: PersistentVolume) -> str:
    return volume.name


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
    #: Per shape, the names of its available PVs as a heap (a name whose PV left the shape
    #: is dropped when it reaches the top): the smallest orders shapes of equal capacity.
    names: dict[Shape, list[str]] = field(default_factory=dict)
    members: dict[Shape, int] = field(default_factory=dict)
    #: One object per shape, so that `shape` values compare by identity.
    canonical: dict[Shape, Shape] = field(default_factory=dict)
    #: Per shape, how many of its PVs each node can reach that no claim was given: `counts`
    #: less the reach of the `held` PVs. Kept as the VolumeBook gives PVs to claims and takes
    #: them back (`hold`, `release`), so that a member's filter does not walk every PV the
    #: cycle gave out before it.
    free: dict[Shape, CountVector] = field(default_factory=dict)
    #: Available PVs given to some claim (the book's `taken`), with their shape.
    held: dict[str, Shape] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        volumes: Iterable[PersistentVolume],
        snap: Snapshot,
        taken: Iterable[str] = (),
    ) -> StaticIndex:
        """The index of `volumes` on the snapshot's nodes, with the PVs named in `taken`
        (given to claims) held."""
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
            shape = index.canonical.setdefault(shape_of(volume), shape_of(volume))
            index.shape[volume.name] = shape
            index.affinity[volume.name] = volume.node_affinity
            if shape not in index.counts:
                index.counts[shape] = np.zeros(size, dtype=np.int32)
                index.by_node[shape] = {}
                index.shapes.setdefault(shape.storage_class, []).append(shape)
                index.names[shape] = []
                index.members[shape] = 0
                local[shape] = []
            index.names[shape].append(volume.name)  # in name order: already a heap
            index.members[shape] += 1
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
        index.free = {shape: counts.copy() for shape, counts in index.counts.items()}
        for name in taken:
            index.hold(name, snap)
        return index

    def hold(self, name: str, snap: Snapshot) -> None:
        """The PV was given to a claim: no other claim may count it."""
        shape = self.shape.get(name)
        if shape is not None and name not in self.held:
            self.held[name] = shape
            self._step(name, snap, self.free[shape], -1)

    def release(self, name: str, snap: Snapshot) -> None:
        """The PV's claim gave it back."""
        shape = self.held.pop(name, None)
        if shape is not None:
            self._step(name, snap, self.free[shape], 1)

    def _step(self, name: str, snap: Snapshot, counts: CountVector, step: int) -> None:
        nodes = self.nodes_of.get(name)
        if nodes is not None:
            _add_at(counts, nodes, step)
        elif step > 0:
            counts += terms_mask(snap, self.affinity[name])
        else:
            counts -= terms_mask(snap, self.affinity[name])

    # -------------------------------------------------------------------------- updates
    def update(
        self,
        old: PersistentVolume | None,
        new: PersistentVolume | None,
        snap: Snapshot,
        taken: Mapping[str, str],
    ) -> None:
        """A PV changed (`old` -> `new`; None: it did not exist or is gone), on the node set
        the index was built for; `taken`: the PVs given to claims."""
        if old is not None:
            self.release(old.name, snap)
            self._remove(old, snap)
        if new is not None:
            self._add(new, snap)
            if new.name in taken:
                self.hold(new.name, snap)

    def _add(self, volume: PersistentVolume, snap: Snapshot) -> None:
        if volume.claim_ref is not None:
            if not volume.deleting:
                insort(self.prebound.setdefault(volume.claim_ref.key, []), volume, key=_order)
            return
        if not is_available(volume):
            return
        shape = self.canonical.setdefault(shape_of(volume), shape_of(volume))
        self.shape[volume.name] = shape
        self.affinity[volume.name] = volume.node_affinity
        if shape not in self.counts:
            self.counts[shape] = np.zeros(len(snap), dtype=np.int32)
            self.free[shape] = np.zeros(len(snap), dtype=np.int32)
            self.by_node[shape] = {}
            self.shapes.setdefault(shape.storage_class, []).append(shape)
            self.names[shape] = []
            self.members[shape] = 0
        heapq.heappush(self.names[shape], volume.name)
        self.members[shape] += 1
        nodes = self._reach(volume, snap, self.counts[shape], 1)
        self._step(volume.name, snap, self.free[shape], 1)
        by_node = self.by_node[shape]
        for node in nodes:
            insort(by_node.setdefault(node, []), volume, key=_name)
        self._order_shapes(shape.storage_class)

    def _remove(self, volume: PersistentVolume, snap: Snapshot) -> None:
        if volume.claim_ref is not None:
            prebound = self.prebound.get(volume.claim_ref.key, [])
            for i, candidate in enumerate(prebound):
                if candidate is volume:
                    del prebound[i]
                    if not prebound:
                        del self.prebound[volume.claim_ref.key]
                    break
            return
        shape = self.shape.get(volume.name)
        if shape is None:
            return
        self._step(volume.name, snap, self.free[shape], -1)
        nodes = self._reach(volume, snap, self.counts[shape], -1)
        del self.shape[volume.name], self.affinity[volume.name]
        self.nodes_of.pop(volume.name, None)
        by_node = self.by_node[shape]
        for node in nodes:
            held = by_node[node]
            held.remove(volume)
            if not held:
                del by_node[node]
        self.members[shape] -= 1
        if not self.members[shape]:
            for table in (
                self.counts,
                self.free,
                self.by_node,
                self.names,
                self.members,
                self.canonical,
            ):
                del table[shape]
            self.shapes[shape.storage_class].remove(shape)
            if not self.shapes[shape.storage_class]:
                del self.shapes[shape.storage_class]
            return
        self._order_shapes(shape.storage_class)

    def _reach(
        self, volume: PersistentVolume, snap: Snapshot, counts: CountVector, step: int
    ) -> list[int]:
        """Add `step` to the counts of the nodes the PV reaches; those nodes."""
        terms = volume.node_affinity
        nodes = None if terms is None else single_node_indices(snap, terms)
        if nodes is None:
            reach = terms_mask(snap, terms)
            counts += reach if step > 0 else -reach.astype(np.int32)
            return [int(n) for n in np.flatnonzero(reach)]
        if step > 0:
            self.nodes_of[volume.name] = nodes
        _add_at(counts, nodes, step)
        return nodes

    def _order_shapes(self, storage_class: str) -> None:
        """Smallest capacity first, then smallest PV name: the order a rebuild finds."""
        self.shapes[storage_class].sort(key=lambda shape: (shape.capacity, self._first(shape)))

    def _first(self, shape: Shape) -> str:
        heap = self.names[shape]
        while self.shape.get(heap[0]) is not shape:
            heapq.heappop(heap)
        return heap[0]

    def fitting(self, claim: PersistentVolumeClaim, storage_class: str) -> list[Shape]:
        return [s for s in self.shapes.get(storage_class, ()) if s.fits(claim)]

    def prebound_to(self, claim: PersistentVolumeClaim) -> PersistentVolume | None:
        for volume in self.prebound.get(claim.key, ()):
            if volume.bound_to(claim):
                return volume
        return None

    def mask(self, snap: Snapshot, shapes: list[Shape], own: str | None = None) -> BoolVector:
        """Nodes reachable by an available PV of a fitting shape not given to another claim
        (`own`: the PV given to this claim, if any)."""
        if not shapes:
            return np.zeros(len(snap), dtype=np.bool_)
        total = sum((self.free[s] for s in shapes[1:]), self.free[shapes[0]].copy())
        if own is not None and any(self.held.get(own) is shape for shape in shapes):
            self._step(own, snap, total, 1)
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
        snap: Snapshot,
        claim: PersistentVolumeClaim,
        storage_class: StorageClass,
        own: str | None = None,
    ) -> BoolVector:
        """Nodes where some PV can be bound statically to the claim (a PV pre-bound to the
        claim, else an available PV of a fitting shape that no other claim was given;
        `own`: the PV given to this claim, if any)."""
        prebound = self.prebound_to(claim)
        if prebound is not None:
            return terms_mask(snap, prebound.node_affinity)
        return self.mask(snap, self.fitting(claim, storage_class.name), own)

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
