"""Keeps the cluster's CompositePodGroups in step with their informer (scheduling.k8s.io/v1alpha3).

A CompositePodGroup changes which unit its PodGroups are scheduled in (a parent appearing
makes a lone PodGroup part of a tree; one going breaks the tree) and when a tree is ready
(minGroupCount), so every change re-keys the pending gangs and wakes the tree's root. The
model holds only what scheduling reads: a status-only update (our own condition write) changes
nothing and requeues nothing. Unreadable objects are reported like every other kind, and
dropped, so their tree waits with a clear error rather than follow an old spec.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gangsched.core.api import InvalidObject
from gangsched.core.api.composite import COMPOSITE_KIND, composite_pod_group_from_raw
from gangsched.core.composite.model import composite_ref
from gangsched.core.model import GroupRef
from gangsched.edge.cache import ClusterCache
from gangsched.edge.handlers import Handler, object_key
from gangsched.edge.kube import JSON


@dataclass
class CompositeCache:
    cache: ClusterCache
    #: Called with (ref, status) on every event: the status writer compares against it.
    on_status: Callable[[GroupRef, JSON], None] | None = None

    def handler(self) -> Handler:
        return Handler(self._replace, self._upsert, self._delete)

    def _requeue(self, ref: GroupRef | None = None) -> None:
        self.cache.requeue_pending()
        if ref is not None:
            root = self.cache.cluster.tree_root(ref)
            self.cache.scheduler.queue.activate(root if isinstance(root, GroupRef) else ref)
        self.cache.changed()

    def _replace(self, objects: list[JSON]) -> None:
        seen = {ref for obj in objects if (ref := self._upsert(obj, notify=False)) is not None}
        cluster = self.cache.cluster
        for ref in [r for r in cluster.composites if r not in seen]:
            cluster.delete_composite(ref)
        self._requeue()

    def _upsert(self, obj: JSON, *, notify: bool = True) -> GroupRef | None:
        key = object_key(obj)
        cluster = self.cache.cluster
        try:
            composite = composite_pod_group_from_raw(obj, priorities=self.cache.policy.resolver())
        except InvalidObject as exc:
            self.cache.report(COMPOSITE_KIND, key, exc, obj)
            stale = _ref(obj)
            if stale in cluster.composites:
                cluster.delete_composite(stale)
                if notify:
                    self._requeue(stale)
            return None
        self.cache.forgive(COMPOSITE_KIND, key)
        if self.on_status is not None:
            self.on_status(composite.ref, dict(obj.get("status") or {}))
        unchanged = cluster.composites.get(composite.ref) == composite
        cluster.upsert_composite(composite)
        if notify and not unchanged:
            self._requeue(composite.ref)
        return composite.ref

    def _delete(self, obj: JSON) -> None:
        self.cache.forgive(COMPOSITE_KIND, object_key(obj))
        ref = _ref(obj)
        self.cache.cluster.delete_composite(ref)
        if self.cache.on_group_deleted is not None:
            self.cache.on_group_deleted(ref)
        self._requeue()


def _ref(obj: JSON) -> GroupRef:
    meta = obj.get("metadata") or {}
    return composite_ref(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
