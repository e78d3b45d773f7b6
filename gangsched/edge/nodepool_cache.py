"""Keeps Karpenter's NodePools (karpenter.sh/v1, read-only) in the cluster state, so that a
gang no node Karpenter may still add can make fit is not marked `Unschedulable` for it
(core/autoscaling_room.py), and waiting gangs are tried again when a pool's limit or usage
changes. Watched only where the NodePool CRD is served (edge/watches.py)."""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.core.api import InvalidObject
from gangsched.core.autoscaling_room import KIND, NodePool, node_pool_from_raw
from gangsched.edge.cache_host import CacheHost
from gangsched.edge.handlers import Handler, object_key
from gangsched.edge.kube import JSON

API_VERSION = "karpenter.sh/v1"
INFORMER = "nodepools.karpenter.sh"
PATH = f"/apis/{API_VERSION}/nodepools"


@dataclass
class NodePoolCache:
    #: The ClusterCache composing this one (edge/cache_host.py says why a protocol).
    cache: CacheHost

    def handler(self) -> Handler:
        return Handler(self._replace, self._upsert, self._delete)

    @property
    def pools(self) -> dict[str, NodePool]:
        return self.cache.cluster.node_pools

    def _replace(self, objects: list[JSON]) -> None:
        read = {object_key(obj): self._read(obj) for obj in objects}
        if read != self.pools:
            self.pools.clear()
            self.pools.update(read)
            self.cache.changed()

    def _upsert(self, obj: JSON) -> None:
        key = object_key(obj)
        pool = self._read(obj)
        if self.pools.get(key) != pool:
            self.pools[key] = pool
            self.cache.changed()

    def _delete(self, obj: JSON) -> None:
        key = object_key(obj)
        self.cache.forgive(KIND, key)
        if self.pools.pop(key, None) is not None:
            self.cache.changed()

    def _read(self, obj: JSON) -> NodePool:
        """The pool; one whose quantities cannot be read is reported on the object and
        counts as unlimited, so that it never holds a gang back."""
        key = object_key(obj)
        try:
            pool = node_pool_from_raw(obj)
        except InvalidObject as exc:
            self.cache.report(KIND, key, exc, obj)
            return NodePool(name=key)
        self.cache.forgive(KIND, key)
        return pool
