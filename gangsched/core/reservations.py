"""What a scheduling cycle reserves besides node capacity, behind one protocol.

Some pods need more decided with their node, and undone with it when the cycle gives the
node up: the PersistentVolume each unbound claim binds to, or the node it is provisioned on
(gangsched.core.volumes); the devices each ResourceClaim is allocated (gangsched.core.dra).
Each such thing is a `CycleExtension`. The snapshot knows this protocol and nothing of what
implements it, as kube-scheduler's framework runs the Reserve, Unreserve and PreBind
extension points of VolumeBinding and DynamicResources without naming either:

- `reserve`: the snapshot assumes a pod on a node; `release`: it takes a placed pod off its
  node (a preemption dry run). Each returns the undos of what it changed, oldest first, and
  the snapshot journals them with its own placements, so its `checkpoint` and `rollback`
  cover every extension;
- `commit`: what the snapshot assumed is kept;
- `write_backs` (once per kept cycle) and `pod_write_backs` (per placed pod): the decisions
  the edge carries out before the cycle's pods bind;
- `pod_changed`: the cluster's copy of a pod changed (for an extension's index of pods).

Whoever builds the cluster state registers the extensions on the snapshot (simulate's
loader, the operator's caches), at most one of each type. A plugin that needs one's state
reads it by type, `snap.extensions.get(VolumeBook)`, as a kube-scheduler plugin reads its
state from CycleState by key.

The protocol is generic in the snapshot's type only so that this module, which the snapshot
imports, does not import the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from gangsched.core.decisions import Decision
from gangsched.core.model import Pod

#: Reverts one change an extension made (called by the snapshot's rollback).
Undo = Callable[[], None]

S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)
E = TypeVar("E")
X = TypeVar("X", bound="CycleExtension[Any]")


class CycleExtension(Protocol[S_contra]):
    """Something a cycle reserves for its pods beside their nodes (see the module)."""

    def reserve(self, snap: S_contra, pod: Pod, node: int) -> Sequence[Undo]:
        """Reserve what `pod` needs on node index `node`, where the snapshot has just
        assumed it; the undos of every change made, oldest first (none: nothing to do)."""
        ...

    def release(self, snap: S_contra, pod: Pod) -> Sequence[Undo]:
        """The snapshot has just taken placed `pod` off its node: free what only it held;
        the undos, oldest first."""
        ...

    def commit(self) -> None:
        """Everything reserved since the last commit stands (the journal is cleared)."""
        ...

    def write_backs(self) -> list[Decision]:
        """Decisions of the kept cycle as a whole, carried out before any of its pods binds
        (taken: a second call returns none)."""
        ...

    def pod_write_backs(self, pod: Pod, node: str) -> list[Decision]:
        """Decisions carried out before `pod`, placed by the kept cycle, binds to `node`
        (taken, like `write_backs`)."""
        ...

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """The cluster's copy of a pod changed (old None: a new pod; new None: deleted)."""
        ...


class Extensions(Generic[S]):
    """A snapshot's extensions: at most one per type, in the order they were registered."""

    __slots__ = ("_by_type",)

    def __init__(self, extensions: Iterable[CycleExtension[S]] = ()) -> None:
        self._by_type: dict[type, CycleExtension[S]] = {}
        for extension in extensions:
            self.add(extension)

    def add(self, extension: CycleExtension[S]) -> None:
        """Register `extension`; one of the same type is replaced (in its place)."""
        self._by_type[type(extension)] = extension

    def get(self, kind: type[E]) -> E | None:
        """The registered extension of type `kind`, or None."""
        found = self._by_type.get(kind)
        return found if isinstance(found, kind) else None

    def setdefault(self, kind: type[X], make: Callable[[], X]) -> X:
        """The registered extension of type `kind`, registering `make()` first if none is."""
        found = self.get(kind)
        if found is None:
            found = make()
            self.add(found)
        return found

    def __iter__(self) -> Iterator[CycleExtension[S]]:
        return iter(self._by_type.values())

    def __len__(self) -> int:
        return len(self._by_type)
