"""What the per-kind caches composed by `ClusterCache` (edge/cache.py) need of it.

`ClusterCache` builds its policy and network-topology caches and calls them; they call back
only through this protocol, so they depend on it and not on edge/cache.py: the dependency
runs one way, from the cache that composes them to the parts it is made of.
"""

from __future__ import annotations

from typing import Protocol

from gangsched.core.api import InvalidObject
from gangsched.core.cluster import ClusterState
from gangsched.core.model import GroupRef
from gangsched.edge.kube import JSON


class CacheHost(Protocol):
    """The cluster state being kept, the problem book, and the queue's change signal."""

    @property
    def cluster(self) -> ClusterState: ...

    def changed(self) -> None:
        """Something changed that may let a waiting gang schedule: requeue and wake."""
        ...

    def report(self, kind: str, key: str, exc: InvalidObject, obj: JSON | None = None) -> None:
        """The object cannot be read: remember and report the problem on it."""
        ...

    def forgive(self, kind: str, key: str) -> None:
        """The object is readable again (or gone): forget its problem."""
        ...

    def read_group(self, obj: JSON) -> GroupRef | None:
        """Read a raw PodGroup again (e.g. its ClusterNetworkTopology layers changed)."""
        ...

    def reread_unreadable_groups(self) -> None:
        """Read again the PodGroups that could not be read (e.g. a PriorityClass arrived)."""
        ...
