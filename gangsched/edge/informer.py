"""List+watch of one resource, feeding a handler with raw objects.

Our own instead of kubernetes-asyncio's Watch (which retries a 410 Gone only once and decodes
every event into generated models): paginated list, watch from the list's resourceVersion
with bookmarks, relist on 410 Gone, reconnect with capped exponential backoff, and an
inactivity timeout so a silently dead connection is replaced. After every (re)list the
handler receives the complete set, so objects deleted while we were disconnected are noticed.

A list is a chain of pages (each page's continue token asks for the next), fetched by its own
task (gangsched.edge.list_pages), so the next page is requested before the current one is
handed on: the API server prepares page N+1 while we convert page N. A handler that takes a
relist page by page (`PagedHandler`) gets each page as it arrives and no page is kept after
it; others get the joined list at the end. Resources with a typed decoder
(gangsched.edge.wire) decode only the fields the scheduler reads.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import orjson
import structlog

from gangsched.edge.kube import JSON, Kube, KubeError
from gangsched.edge.list_pages import ListPages
from gangsched.edge.wire import LIST_DECODERS, WATCH_DECODERS, Decoder, gc_paused

log = structlog.get_logger("gangsched.informer")


class Handler(Protocol):
    def replace(self, objects: list[JSON]) -> None:
        """The complete current set after a (re)list."""

    def upsert(self, obj: JSON) -> None: ...

    def delete(self, obj: JSON) -> None: ...


class Relist(Protocol):
    """One relist fed page by page: `add` with each page's objects, then `done` once (what
    no page brought is gone). A list that fails half-way never reaches `done`."""

    def add(self, objects: list[JSON]) -> None: ...

    def done(self) -> None: ...


@runtime_checkable
class PagedHandler(Handler, Protocol):
    def relist(self) -> Relist:
        """Start a relist (the informer calls it once its first page has arrived)."""


@dataclass
class Informer:
    kube: Kube
    path: str
    handler: Handler
    name: str = ""
    page_size: int = 500
    #: Server-side watch timeout; the watch is reopened from the last resourceVersion after it.
    watch_seconds: int = 300
    #: No line (event or bookmark) for this long means the connection is dead.
    inactivity_seconds: float = 90.0
    initial_backoff: float = 0.5
    max_backoff: float = 30.0
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    relists: int = 0
    on_relist: Callable[[str], None] | None = None
    #: Called with (resource, HTTP status or "connection") when a list or watch fails.
    on_error: Callable[[str, str], None] | None = None
    #: The last list/watch failure, cleared by the next successful list (for /readyz).
    last_error: str = ""
    resource_version: str = ""
    #: Set on listed items, which the API server returns without apiVersion/kind.
    api_version: str = ""
    kind: str = ""
    #: An optional resource (a DRA kind, a PodGroup dialect, ...) whose first list is
    #: forbidden (403: the RBAC in use lacks it) counts as synced and empty, so the rest of the
    #: scheduler is not held for ever; pods that need it wait, none is bound without it. The
    #: list is retried, and fills the cache once the RBAC allows it.
    optional: bool = False
    #: Why an optional resource is missing ("" while it is listed normally; for /readyz).
    forbidden: str = ""
    #: A list of this resource already under way (taken over by the first list).
    first_list: ListPages | None = None
    #: Set once what this resource's objects are read against has been listed (PodGroups
    #: resolve their priorityClassName): the first list's pages wait for it, undecoded.
    after: asyncio.Event | None = None
    #: Set once watches may start: until then the informer holds its watch after its first
    #: list (gangsched.edge.watches' `open_watches` says why). No event is lost meanwhile:
    #: the watch starts from the list's resourceVersion.
    watch_after: asyncio.Event | None = None

    async def run(self) -> None:
        backoff = self.initial_backoff
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    backoff = self.initial_backoff
                if self.watch_after is not None:
                    await self.watch_after.wait()
                await self._watch()
                backoff = self.initial_backoff
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                if exc.gone:
                    log.info("watch expired, relisting", resource=self.name)
                    need_list = True
                    continue
                log.warning("list/watch failed", resource=self.name, error=str(exc))
                self._failed(str(exc.status), str(exc))
                need_list = True
                if exc.forbidden and self.optional and not self.synced.is_set():
                    self._go_without(exc)
            except Exception as exc:  # connection reset, timeouts, bad JSON
                log.warning("list/watch interrupted", resource=self.name, error=repr(exc))
                self._failed("connection", repr(exc))
                need_list = need_list or not self.resource_version
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(self.max_backoff, backoff * 2)

    def _go_without(self, exc: KubeError) -> None:
        """The first list of an optional resource was refused: schedule without it."""
        self.forbidden = f"{exc.status} {exc.reason}"
        log.error(
            "cannot list an optional resource; scheduling goes on without it (pods that need "
            "it wait) until the RBAC allows list and watch on it",
            resource=self.name,
            error=str(exc),
        )
        if isinstance(self.handler, PagedHandler):
            self.handler.relist().done()
        else:
            self.handler.replace([])
        self.synced.set()

    def _failed(self, code: str, error: str) -> None:
        self.last_error = error
        if self.on_error is not None:
            self.on_error(self.name, code)

    async def _list(self) -> None:
        kind = self.kind or _item_kind(self.path)
        paged = self.handler if isinstance(self.handler, PagedHandler) else None
        relist: Relist | None = None
        joined: list[JSON] = []
        started, pages, count = time.monotonic(), 0, 0
        # A list started before this informer existed (gangsched.edge.early_lists) is
        # taken over once; every later list is our own.
        source, self.first_list = self.first_list, None
        if source is None:
            source = ListPages(self.kube, self.path, page_size=self.page_size).start()
        decode: Decoder = LIST_DECODERS.get(self.path, _decode_json)
        try:
            if self.after is not None:
                await self.after.wait()
            while True:
                raw = await source.next()
                # Let the next page's request go out before this page's work begins.
                await asyncio.sleep(0)
                page = decode(raw)
                del raw
                meta = page.get("metadata") or {}
                objects = self._objects(page, kind)
                pages, count = pages + 1, count + len(objects)
                if paged is not None:
                    relist = relist or paged.relist()
                    with gc_paused():
                        relist.add(objects)
                else:
                    joined.extend(objects)
                if not meta.get("continue"):
                    self.resource_version = str(meta.get("resourceVersion", ""))
                    break
        finally:
            source.cancel()
        if paged is not None:
            (relist or paged.relist()).done()
        else:
            self.handler.replace(joined)
        if self.forbidden:
            log.info(
                "optional resource listed; no longer scheduling without it", resource=self.name
            )
        self.last_error = ""
        self.forbidden = ""
        # As client-go's reflector logs its lists: how long the start-up or a relist took.
        log.info(
            "listed",
            resource=self.name or self.path,
            objects=count,
            pages=pages,
            seconds=round(time.monotonic() - started, 3),
        )
        self.relists += 1
        if self.on_relist is not None and self.relists > 1:
            self.on_relist(self.name)
        self.synced.set()

    def _objects(self, page: JSON, kind: str) -> list[JSON]:
        objects = []
        for item in page.get("items") or []:
            if isinstance(item, dict):
                # Nothing here reads managedFields, about half of a pod's JSON: dropped page
                # by page (typed decoding never reads them), so a list peaks at half the
                # memory (bench/README.md).
                meta = item.get("metadata")
                if isinstance(meta, dict):
                    meta.pop("managedFields", None)
                item.setdefault("kind", kind)
                if self.api_version:
                    item.setdefault("apiVersion", self.api_version)
            objects.append(item)
        return objects

    async def _watch(self) -> None:
        query = {
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self.watch_seconds,
        }
        async for event in self.kube.watch(
            self.path,
            query=query,
            read_timeout=self.inactivity_seconds,
            decode=WATCH_DECODERS.get(self.path, _decode_json),
        ):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code", 500))
                raise KubeError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self.resource_version = str(version)
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                self.handler.delete(obj)
            else:
                self.handler.upsert(obj)


def _decode_json(raw: bytes) -> JSON:
    page: JSON = orjson.loads(raw)
    return page


def _item_kind(path: str) -> str:
    resource = path.rstrip("/").rsplit("/", 1)[-1]
    return {
        "pods": "Pod",
        "nodes": "Node",
        "priorityclasses": "PriorityClass",
        "poddisruptionbudgets": "PodDisruptionBudget",
        "podgroups": "PodGroup",
        "namespaces": "Namespace",
        "deviceclasses": "DeviceClass",
        "resourceslices": "ResourceSlice",
        "resourceclaims": "ResourceClaim",
        "resourceclaimtemplates": "ResourceClaimTemplate",
        "persistentvolumeclaims": "PersistentVolumeClaim",
        "persistentvolumes": "PersistentVolume",
        "storageclasses": "StorageClass",
        "csinodes": "CSINode",
        "csidrivers": "CSIDriver",
        "csistoragecapacities": "CSIStorageCapacity",
    }.get(resource, "")
