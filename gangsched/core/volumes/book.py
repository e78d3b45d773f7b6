"""The volume state one scheduling cycle reads and the volume decisions it makes.

kube-scheduler keeps "assume caches" of PVs and PVCs: Reserve writes the chosen PV's claimRef
or the PVC's selected-node into the cached copies so the next pod does not pick the same PV,
and Unreserve restores them. Here the same happens inside the gang's plan: the book is one of
the snapshot's extensions (gangsched.core.reservations), and `reserve` (called by
`Snapshot.assume`) returns an undo for each member's choice, which the snapshot journals, so
a gang that fails rolls its volume choices back with its placements, and two members (or two
gangs) never get the same static PV. Decisions that a cycle kept stay assumed until the watch
shows the claim bound (`settle`) or the edge gives them up (`forget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gangsched.core.decisions import BindVolume, Decision, SelectNode
from gangsched.core.model import Pod, PodVolumeClaim
from gangsched.core.reservations import Undo
from gangsched.core.snapshot import Snapshot
from gangsched.core.volumes.model import (
    READ_WRITE_ONCE_POD,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gangsched.core.volumes.static_index import StaticIndex

_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class ClaimDecision:
    """What a cycle decided for one unbound claim of a placed pod: a static PV (`volume`)
    or dynamic provisioning on `node` (`volume` empty)."""

    claim: str
    claim_uid: str
    node: str
    volume: str = ""
    volume_resource_version: str = ""


@dataclass(slots=True)
class ClaimSet:
    """A pod's claims, classified as kube-scheduler's PreFilter does."""

    #: Bound claims and their PV (None: the PV does not exist).
    bound: list[tuple[PersistentVolumeClaim, PersistentVolume | None]]
    #: Unbound claims of a WaitForFirstConsumer class: the scheduler decides them.
    delayed: list[tuple[PersistentVolumeClaim, StorageClass]]
    #: Every claim the pod uses (bound or not), for VolumeRestrictions and limits.
    claims: list[PersistentVolumeClaim]


@dataclass(slots=True)
class VolumeBook:
    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)
    drivers: dict[str, CSIDriver] = field(default_factory=dict)
    capacities: dict[str, CSIStorageCapacity] = field(default_factory=dict)
    #: Static choices: claim key -> PV name, and the reverse.
    assumed_volume: dict[str, str] = field(default_factory=dict)
    taken: dict[str, str] = field(default_factory=dict)
    #: Dynamic choices: claim key -> node name.
    assumed_node: dict[str, str] = field(default_factory=dict)
    #: Per placed pod (this cycle or in flight), its claim decisions.
    planned: dict[str, tuple[ClaimDecision, ...]] = field(default_factory=dict)
    #: Pods assumed on a node in the current cycle (they have no node name yet).
    placing: dict[str, int] = field(default_factory=dict)
    #: Claim key -> pods (by key) whose volumes use it, bound or not.
    users: dict[str, dict[str, Pod]] = field(default_factory=dict)
    #: What the watch has shown since the edge last cleared it: a claim's selected-node and a
    #: PV's claimRef. A provisioner may set and remove an annotation between two looks at
    #: the cache; these keep the fact that it was there.
    seen_selected_node: dict[str, str] = field(default_factory=dict)
    seen_claim_ref: dict[str, str] = field(default_factory=dict)
    #: Bumped on every PV change.
    volume_version: int = 0
    #: The static index and the node set it was built for: (node generation, node count).
    _static: tuple[tuple[int, int], StaticIndex] | None = None
    #: PV changes since the index was last brought up to date: (old, new) pairs.
    _changes: list[tuple[PersistentVolume | None, PersistentVolume | None]] = field(
        default_factory=list
    )
    #: PVs given to a claim or given back since then (`taken` says which).
    _given: set[str] = field(default_factory=set)

    # --------------------------------------------------------------------------- objects
    def upsert_claim(self, claim: PersistentVolumeClaim) -> None:
        self.claims[claim.key] = claim
        if claim.selected_node:
            self.seen_selected_node[claim.key] = claim.selected_node
        self.settle(claim.key)

    def delete_claim(self, key: str) -> None:
        self.claims.pop(key, None)
        self.settle(key)

    def upsert_volume(self, volume: PersistentVolume) -> None:
        old = self.volumes.get(volume.name)
        self.volumes[volume.name] = volume
        if volume.claim_ref is not None:
            self.seen_claim_ref[volume.name] = volume.claim_ref.key
        self._volume_changed(old, volume)
        claim = self.taken.get(volume.name)
        if claim is not None and volume.claim_ref is not None:
            self.settle(claim)

    def delete_volume(self, name: str) -> None:
        old = self.volumes.pop(name, None)
        self._volume_changed(old, None)

    def replace_volumes(self, volumes: Iterable[PersistentVolume]) -> None:
        self.volumes = {volume.name: volume for volume in volumes}
        self.volume_version += 1
        self._static = None
        self._changes.clear()

    def _volume_changed(self, old: PersistentVolume | None, new: PersistentVolume | None) -> None:
        self.volume_version += 1
        if self._static is not None and (old is not None or new is not None):
            self._changes.append((old, new))

    def static_index(self, snap: Snapshot) -> StaticIndex:
        """The index of available PVs for this snapshot's nodes: built for a node set, then
        updated with each PV change (rebuilt when the nodes change, or when more PVs changed
        than a rebuild costs)."""
        key = (snap.node_generation, len(snap))
        static = self._static
        if static is None or static[0] != key or len(self._changes) > 64 + len(self.volumes) // 4:
            self._static = static = (
                key,
                StaticIndex.build(self.volumes.values(), snap, self.taken),
            )
        else:
            index = static[1]
            for old, new in self._changes:
                index.update(old, new, snap, self.taken)
            for volume in self._given:
                if volume in self.taken:
                    index.hold(volume, snap)
                else:
                    index.release(volume, snap)
        self._changes.clear()
        self._given.clear()
        return static[1]

    def storage_class(self, claim: PersistentVolumeClaim) -> StorageClass | None:
        """The claim's class; a claim naming none gets the default class, as the
        DefaultStorageClass admission plugin (or the PV controller, retroactively) does."""
        if claim.storage_class is not None:
            return self.classes.get(claim.storage_class)
        defaults = sorted((c for c in self.classes.values() if c.is_default), key=lambda c: c.name)
        return defaults[0] if defaults else None

    @property
    def is_empty(self) -> bool:
        return not self.claims and not self.volumes

    # ------------------------------------------------------------------------------ users
    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """Keep the claim -> pods index (VolumeRestrictions, NodeVolumeLimits) current."""
        if old is not None:
            for volume in old.volume_claims:
                users = self.users.get(_claim_key(old, volume))
                if users is not None:
                    users.pop(old.key, None)
                    if not users:
                        del self.users[_claim_key(old, volume)]
            self.placing.pop(old.key, None)
        if new is not None:
            for volume in new.volume_claims:
                self.users.setdefault(_claim_key(new, volume), {})[new.key] = new

    # ------------------------------------------------------------------------ pod claims
    def classify(self, pod: Pod) -> ClaimSet | str:
        """The pod's claims by kind, or the PreFilter message that makes it unschedulable
        everywhere (kube-scheduler's wording)."""
        result = ClaimSet(bound=[], delayed=[], claims=[])
        immediate = False
        for volume in pod.volume_claims:
            key = _claim_key(pod, volume)
            claim = self.claims.get(key)
            if claim is None:
                return f'persistentvolumeclaim "{volume.claim}" not found'
            if claim.deleting:
                return f'persistentvolumeclaim "{volume.claim}" is being deleted'
            if volume.ephemeral and pod.uid and pod.uid not in claim.owner_uids:
                return f"PVC {claim.key} was not created for pod {pod.key} (pod is not owner)"
            result.claims.append(claim)
            if claim.is_bound:
                result.bound.append((claim, self.volumes.get(claim.volume_name)))
                continue
            storage_class = self.storage_class(claim)
            if storage_class is not None and storage_class.delays_binding and not claim.volume_name:
                result.delayed.append((claim, storage_class))
            else:
                immediate = True
        if immediate:
            return "pod has unbound immediate PersistentVolumeClaims"
        return result

    def decision_of(self, claim_key: str) -> tuple[str, str] | None:
        """("volume", pv) or ("node", node) decided earlier for the claim (this cycle, an
        earlier member of the gang, or a bind still in flight)."""
        volume = self.assumed_volume.get(claim_key)
        if volume is not None:
            return ("volume", volume)
        node = self.assumed_node.get(claim_key)
        if node is not None:
            return ("node", node)
        return None

    def uses_read_write_once_pod(self, pod: Pod, claims: list[PersistentVolumeClaim]) -> list[str]:
        return [c.key for c in claims if READ_WRITE_ONCE_POD in c.access_modes]

    # --------------------------------------------------------------------------- planning
    def reserve(self, snap: Snapshot, pod: Pod, node: int) -> Sequence[Undo]:
        """Decide the pod's unbound claims on `node` (kube-scheduler's Reserve); the undos.

        Static binding first: the smallest matching Available PV not chosen for another
        claim; otherwise the claim is provisioned on the node. Claims are taken smallest
        request first, as upstream sorts them.
        """
        if not pod.volume_claims or pod.node_name is not None:
            # No claim, or a bound pod put back by a preemption dry run: nothing to decide.
            return ()
        undos: list[Undo] = []
        self._mark_placing(undos, pod, node)
        classified = self.classify(pod)
        if isinstance(classified, str):
            return undos
        node_obj = snap.nodes[node]
        decisions = []
        for claim, storage_class in sorted(classified.delayed, key=lambda c: c[0].request):
            earlier = self.decision_of(claim.key)
            if earlier is not None:
                kind, value = earlier
                decisions.append(
                    ClaimDecision(
                        claim=claim.key,
                        claim_uid=claim.uid,
                        node=node_obj.name,
                        volume=value if kind == "volume" else "",
                        volume_resource_version=self._version(value) if kind == "volume" else "",
                    )
                )
                continue
            volume = None
            if not claim.selected_node:
                index = self.static_index(snap)
                volume = index.volume_for(self.taken, snap, claim, storage_class, node)
            if volume is not None:
                self._assume_volume(undos, claim.key, volume.name)
                decisions.append(
                    ClaimDecision(
                        claim=claim.key,
                        claim_uid=claim.uid,
                        node=node_obj.name,
                        volume=volume.name,
                        volume_resource_version=volume.resource_version,
                    )
                )
            else:
                self._assume_node(undos, claim.key, node_obj.name)
                decisions.append(
                    ClaimDecision(claim=claim.key, claim_uid=claim.uid, node=node_obj.name)
                )
        if decisions:
            previous = self.planned.get(pod.key)
            self.planned[pod.key] = tuple(decisions)
            undos.append(lambda: self._restore(self.planned, pod.key, previous))
        return undos

    def release(self, snap: Snapshot, pod: Pod) -> Sequence[Undo]:
        """A preemption dry run took `pod` off its node: its claims keep their PVs (a PV is
        given up only when its claim is deleted), so nothing changes."""
        return ()

    def _version(self, name: str) -> str:
        volume = self.volumes.get(name)
        return volume.resource_version if volume is not None else ""

    def _mark_placing(self, undos: list[Undo], pod: Pod, node: int) -> None:
        previous = self.placing.get(pod.key)
        self.placing[pod.key] = node
        undos.append(lambda: self._restore(self.placing, pod.key, previous))

    def _assume_volume(self, undos: list[Undo], claim: str, volume: str) -> None:
        self.assumed_volume[claim] = volume
        self._take(volume, claim)

        def undo() -> None:
            self.assumed_volume.pop(claim, None)
            self._give_back(volume)

        undos.append(undo)

    def _take(self, volume: str, claim: str) -> None:
        self.taken[volume] = claim
        if self._static is not None:
            self._given.add(volume)

    def _give_back(self, volume: str) -> None:
        if self.taken.pop(volume, None) is not None and self._static is not None:
            self._given.add(volume)

    def _assume_node(self, undos: list[Undo], claim: str, node: str) -> None:
        previous = self.assumed_node.get(claim)
        self.assumed_node[claim] = node
        undos.append(lambda: self._restore(self.assumed_node, claim, previous))

    @staticmethod
    def _restore(table: dict[str, _V], key: str, previous: _V | None) -> None:
        if previous is None:
            table.pop(key, None)
        else:
            table[key] = previous

    # ------------------------------------------------------------------- after the cycle
    def commit(self) -> None:
        """The cycle's placements are kept: its pods get their node names as they bind."""
        self.placing.clear()

    def write_backs(self) -> list[Decision]:
        return []  # every volume decision belongs to a pod (`pod_write_backs`)

    def pod_write_backs(self, pod: Pod, node: str) -> list[Decision]:
        """The claim decisions of a pod the cycle placed, for the edge to write before the
        pod binds: a PV's claimRef (`BindVolume`) or a claim's selected node (`SelectNode`).
        They stay assumed until settled."""
        decisions: list[Decision] = []
        for claim in self.planned.pop(pod.key, ()):
            if claim.volume:
                decisions.append(
                    BindVolume(
                        pod=pod.key,
                        node=node,
                        claim=claim.claim,
                        claim_uid=claim.claim_uid,
                        volume=claim.volume,
                        volume_resource_version=claim.volume_resource_version,
                    )
                )
            else:
                decisions.append(
                    SelectNode(pod=pod.key, node=node, claim=claim.claim, claim_uid=claim.claim_uid)
                )
        return decisions

    def settle(self, claim_key: str) -> None:
        """The claim is bound (or gone), or its PV now names it: the assumption is done."""
        claim = self.claims.get(claim_key)
        volume = self.assumed_volume.get(claim_key)
        if claim is not None and not claim.is_bound:
            pv = self.volumes.get(volume) if volume is not None else None
            if volume is None or pv is None or pv.claim_ref is None:
                if claim.selected_node and self.assumed_node.get(claim_key) == claim.selected_node:
                    self.assumed_node.pop(claim_key, None)  # the annotation holds it now
                return
        self.forget(claim_key)

    def forget(self, claim_key: str) -> None:
        """Give up the decision for a claim (its write-back failed or was undone)."""
        volume = self.assumed_volume.pop(claim_key, None)
        if volume is not None and self.taken.get(volume) == claim_key:
            self._give_back(volume)
        self.assumed_node.pop(claim_key, None)


def volume_book(snap: Snapshot) -> VolumeBook:
    """The snapshot's VolumeBook; where none is registered, an empty one (no PVC, no PV)."""
    book = snap.extensions.get(VolumeBook)
    return book if book is not None else VolumeBook()


def _claim_key(pod: Pod, volume: PodVolumeClaim) -> str:
    return f"{pod.namespace}/{volume.claim}"


def claim_key(pod: Pod, volume: PodVolumeClaim) -> str:
    return _claim_key(pod, volume)
