"""The informer's list: pages joined into one replace, managedFields dropped on the way."""

from __future__ import annotations

from typing import Any

from gangsched.edge.informer import Informer


class FakeKube:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.queries: list[dict[str, Any]] = []

    async def get(self, path: str, **query: Any) -> dict[str, Any]:
        self.queries.append(query)
        return self.pages[len(self.queries) - 1]


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
