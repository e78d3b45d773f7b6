"""The informer's list: pages joined into one replace (or fed page by page to a handler that
takes them), the next page requested before the current one is handed on, managedFields
dropped on the way."""

from __future__ import annotations

import contextlib
from typing import Any

import orjson

from gangsched.edge.informer import Informer


class FakeKube:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.queries: list[dict[str, Any]] = []

    async def get(self, path: str, *, decode: Any = None, **query: Any) -> dict[str, Any]:
        self.queries.append(query)
        page = self.pages[len(self.queries) - 1]
        return decode(orjson.dumps(page)) if decode is not None else page


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
    # Page 1 is handed on after page 2 was asked for, page 2 after page 3; nothing joined.
    assert handler.pages == [(["a", "b"], 2), (["c", "d"], 3), (["e"], 3)]
    assert handler.finished == 1 and handler.replaced == []
    assert kube.queries[1:] == [{"limit": 2, "continue": "c1"}, {"limit": 2, "continue": "c2"}]
    assert informer.resource_version == "42" and informer.synced.is_set()


async def test_a_list_that_fails_half_way_never_finishes_the_relist() -> None:
    """Objects no page brought are only forgotten at the end of a complete list."""

    class Failing(FakeKube):
        async def get(self, path: str, *, decode: Any = None, **query: Any) -> dict[str, Any]:
            if query.get("continue"):
                raise ConnectionResetError("gone")
            return await super().get(path, decode=decode, **query)

    kube = Failing([{"metadata": {"continue": "c1"}, "items": [pod("a")]}])
    handler = PagedRecorder(kube)
    informer = Informer(kube, "/api/v1/pods", handler)  # type: ignore[arg-type]
    with contextlib.suppress(ConnectionResetError):
        await informer._list()
    assert handler.pages == [(["a"], 1)]  # the page that came is in, nothing is forgotten
    assert handler.finished == 0 and not informer.synced.is_set()
