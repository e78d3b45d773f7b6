"""The informer's list: pages joined into one replace (or fed page by page to a handler that
takes them), the next page requested before the current one is handed on, managedFields
dropped on the way; a list started early (gangsched run) taken over by the informer."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
import pytest

from gangsched.edge.informer import Informer
from gangsched.edge.kube import KubeError
from gangsched.edge.list_pages import ListPages, continue_token


class FakeKube:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.queries: list[dict[str, Any]] = []

    async def request_raw(
        self, method: str, path: str, *, query: dict[str, Any], **_: Any
    ) -> bytes:
        self.queries.append(dict(query))
        return orjson.dumps(self.pages[len(self.queries) - 1])


class Recorder:
    def __init__(self) -> None:
        self.replaced: list[dict[str, Any]] = []

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self.replaced = objects

    def upsert(self, obj: dict[str, Any]) -> None: ...

    def delete(self, obj: dict[str, Any]) -> None: ...


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "managedFields": [{"manager": "kwok", "fieldsV1": {}}]},
        "spec": {"nodeName": "n1"},
    }


async def test_pages_are_joined_without_managed_fields() -> None:
    kube = FakeKube(
        [
            {"metadata": {"continue": "c1"}, "items": [pod("a"), pod("b")]},
            {"metadata": {"resourceVersion": "42"}, "items": [pod("c")]},
        ]
    )
    handler = Recorder()
    informer = Informer(kube, "/api/v1/pods", handler, page_size=2)  # type: ignore[arg-type]
    await informer._list()
    assert [o["metadata"]["name"] for o in handler.replaced] == ["a", "b", "c"]
    assert all("managedFields" not in o["metadata"] for o in handler.replaced)
    assert all(o["kind"] == "Pod" and o["spec"] == {"nodeName": "n1"} for o in handler.replaced)
    assert kube.queries == [{"limit": 2}, {"limit": 2, "continue": "c1"}]
    assert informer.resource_version == "42"
    assert informer.synced.is_set()


class PagedRecorder(Recorder):
    """Takes a relist page by page and notes how many requests were out at each page."""

    def __init__(self, kube: FakeKube) -> None:
        super().__init__()
        self.kube = kube
        self.pages: list[tuple[list[str], int]] = []
        self.finished = 0

    def relist(self) -> PagedRecorder:
        return self

    def add(self, objects: list[dict[str, Any]]) -> None:
        names = [o["metadata"]["name"] for o in objects]
        self.pages.append((names, len(self.kube.queries)))

    def done(self) -> None:
        self.finished += 1


async def test_pages_go_to_a_paged_handler_as_they_arrive_with_the_next_one_requested() -> None:
    kube = FakeKube(
        [
            {"metadata": {"continue": "c1"}, "items": [pod("a"), pod("b")]},
            {"metadata": {"continue": "c2"}, "items": [pod("c"), pod("d")]},
            {"metadata": {"resourceVersion": "42"}, "items": [pod("e")]},
        ]
    )
    handler = PagedRecorder(kube)
    informer = Informer(kube, "/api/v1/pods", handler, page_size=2)  # type: ignore[arg-type]
    await informer._list()
    # Each page is handed on after the next one was asked for; nothing joined.
    assert [names for names, _ in handler.pages] == [["a", "b"], ["c", "d"], ["e"]]
    assert [asked >= min(i + 2, 3) for i, (_, asked) in enumerate(handler.pages)] == [True] * 3
    assert handler.finished == 1 and handler.replaced == []
    assert kube.queries[1:] == [{"limit": 2, "continue": "c1"}, {"limit": 2, "continue": "c2"}]
    assert informer.resource_version == "42" and informer.synced.is_set()


async def test_a_list_that_fails_half_way_never_finishes_the_relist() -> None:
    """Objects no page brought are only forgotten at the end of a complete list."""

    class Failing(FakeKube):
        async def request_raw(
            self, method: str, path: str, *, query: dict[str, Any], **_: Any
        ) -> bytes:
            if query.get("continue"):
                raise ConnectionResetError("gone")
            return await super().request_raw(method, path, query=query)

    kube = Failing([{"metadata": {"continue": "c1"}, "items": [pod("a")]}])
    handler = PagedRecorder(kube)
    informer = Informer(kube, "/api/v1/pods", handler)  # type: ignore[arg-type]
    with contextlib.suppress(ConnectionResetError):
        await informer._list()
    assert handler.pages == [(["a"], 1)]  # the page that came is in, nothing is forgotten
    assert handler.finished == 0 and not informer.synced.is_set()


def chain(n: int) -> list[dict[str, Any]]:
    """n pages of one pod each, chained by continue tokens."""
    return [
        {
            "metadata": {"continue": f"c{i + 1}"} if i < n - 1 else {"resourceVersion": "7"},
            "items": [pod(f"p{i}")],
        }
        for i in range(n)
    ]


async def test_pages_fetched_ahead_stop_at_the_bound_until_taken() -> None:
    kube = FakeKube(chain(10))
    pages = ListPages(kube, "/api/v1/pods", page_size=1, ahead=3).start()  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(kube.queries) == 4  # three waiting to be taken, the fourth held until room
    first = orjson.loads(await pages.next())
    assert first["items"][0]["metadata"]["name"] == "p0"
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(kube.queries) == 5
    pages.cancel()


async def test_an_informer_takes_over_a_list_already_under_way() -> None:
    """The pages fetched before the informer existed go into its first list, in order, and
    the list goes on from there; the next list is the informer's own."""
    kube = FakeKube(chain(4) + chain(2))
    early = ListPages(kube, "/api/v1/pods", page_size=1, ahead=8).start()  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(kube.queries) == 4  # the whole list fetched before anyone took it
    handler = PagedRecorder(kube)
    informer = Informer(kube, "/api/v1/pods", handler, page_size=1, first_list=early)  # type: ignore[arg-type]
    await informer._list()
    assert [names for names, _ in handler.pages] == [["p0"], ["p1"], ["p2"], ["p3"]]
    assert handler.finished == 1 and informer.resource_version == "7"
    assert informer.first_list is None
    await informer._list()  # a relist asks the server again
    assert [names for names, _ in handler.pages][4:] == [["p0"], ["p1"]]
    assert kube.queries[4] == {"limit": 1}


async def test_a_failed_early_list_fails_the_informers_first_list() -> None:
    class Refusing(FakeKube):
        async def request_raw(self, method: str, path: str, **_: Any) -> bytes:
            raise KubeError(403, "Forbidden", "pods is forbidden")

    early = ListPages(Refusing([]), "/api/v1/pods").start()  # type: ignore[arg-type]
    handler = PagedRecorder(FakeKube([]))
    informer = Informer(FakeKube([]), "/api/v1/pods", handler, first_list=early)  # type: ignore[arg-type]
    with pytest.raises(KubeError):
        await informer._list()
    assert handler.finished == 0 and not informer.synced.is_set()


def test_the_continue_token_is_read_without_the_items() -> None:
    page = {"kind": "PodList", "metadata": {"continue": "abc", "resourceVersion": "9"}}
    assert continue_token(orjson.dumps({**page, "items": [pod("a")]})) == "abc"
    assert continue_token(b'{"metadata": {"resourceVersion": "9"}, "items": []}') == ""
    assert continue_token(b'{"kind": "Status", "metadata": 3}') == ""


async def test_a_list_waits_for_what_its_objects_are_read_against() -> None:
    """PodGroups resolve their priorityClassName: their list (maybe started early) is read
    only once the PriorityClasses are; its pages wait meanwhile, requested but unread."""
    kube = FakeKube([{"metadata": {"resourceVersion": "7"}, "items": [pod("a")]}])
    handler = Recorder()
    classes_listed = asyncio.Event()
    informer = Informer(
        kube,  # type: ignore[arg-type]
        "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups",
        handler,
        after=classes_listed,
        first_list=ListPages(kube, "/apis/x/podgroups").start(),  # type: ignore[arg-type]
    )
    listing = asyncio.create_task(informer._list())
    for _ in range(5):
        await asyncio.sleep(0)
    assert kube.queries == [{"limit": 500}]  # the page was asked for ...
    assert handler.replaced == [] and not informer.synced.is_set()  # ... and not read
    classes_listed.set()
    await listing
    assert [o["metadata"]["name"] for o in handler.replaced] == ["a"]
    assert informer.synced.is_set()


class WatchingKube(FakeKube):
    """Lists as FakeKube; each watch it is asked for is noted and yields nothing."""

    def __init__(self, pages: list[dict[str, Any]]) -> None:
        super().__init__(pages)
        self.watched: list[dict[str, Any]] = []

    async def watch(self, path: str, *, query: dict[str, Any], **_: Any) -> Any:
        self.watched.append(dict(query))
        await asyncio.sleep(3600)
        yield {}  # pragma: no cover - never reached


async def test_the_watch_waits_for_its_gate_from_the_lists_resource_version() -> None:
    """`gangsched run` holds the watches until its first binds are out
    (Watches.open_watches): the informer has synced, and watches from its list's version."""
    kube = WatchingKube([{"metadata": {"resourceVersion": "42"}, "items": [pod("a")]}])
    gate = asyncio.Event()
    informer = Informer(kube, "/api/v1/pods", Recorder(), watch_after=gate)  # type: ignore[arg-type]
    running = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 5)
        for _ in range(5):
            await asyncio.sleep(0)
        assert kube.watched == []
        gate.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert [q["resourceVersion"] for q in kube.watched] == ["42"]
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
