"""The callbacks a cache hands each informer, and the checks every raw object passes first.

Every cache (pods, nodes and PodGroups in edge/cache.py; policy, volume and DRA objects in
their own caches) gives its informer a `Handler`: replace after a list, upsert and delete per
watch event. Objects without metadata never reach a cache: the API server only sends objects
with metadata, so anything else is skipped loudly rather than breaking the informer (a
failing list would never sync).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from gangsched.edge.kube import JSON

log = structlog.get_logger("gangsched.cache")


def object_key(obj: JSON) -> str:
    """ "namespace/name", or "name" for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


@dataclass
class Handler:
    _replace: Callable[[list[JSON]], None]
    _upsert: Callable[..., Any]
    _delete: Callable[[JSON], None]

    def replace(self, objects: list[JSON]) -> None:
        self._replace([obj for obj in objects if readable(obj)])

    def upsert(self, obj: JSON) -> None:
        if readable(obj):
            self._upsert(obj)

    def delete(self, obj: JSON) -> None:
        if readable(obj):
            self._delete(obj)


@dataclass
class Relist:
    """One relist fed page by page (gangsched.edge.informer): `add` per page, `done` once."""

    _add: Callable[[list[JSON]], None]
    _done: Callable[[], None]

    def add(self, objects: list[JSON]) -> None:
        self._add([obj for obj in objects if readable(obj)])

    def done(self) -> None:
        self._done()


@dataclass
class PagedHandler(Handler):
    """A handler that also takes a relist page by page, so no page is kept after it has
    gone into the cache (the pod cache: the raw JSON of 50,000 pods is never held at once)."""

    _relist: Callable[[], Relist] = lambda: Relist(lambda _: None, lambda: None)

    def relist(self) -> Relist:
        return self._relist()


def readable(obj: object) -> bool:
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        return True
    log.error("skipping an object without metadata", object=repr(obj)[:200])
    return False
