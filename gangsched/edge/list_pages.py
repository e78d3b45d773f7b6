"""The pages of one list, fetched by a task of their own ahead of whoever takes them.

A list is a chain of pages (each page's continue token asks for the next), so the next page is
requested as soon as one arrives: the API server prepares page N+1 while page N goes into the
cache. Pages are handed on undecoded; the taker (gangsched.edge.informer) decodes each with
the resource's typed decoder. Only the page's continue token is read here, which needs no
more than msgspec: `gangsched run` starts its pod and node lists with this module before it
imports the core (gangsched.edge.early_lists).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, TypedDict

import msgspec

from gangsched.edge.kube import Kube

# "continue" is a Python keyword: only the functional form names it.
_ListMeta = TypedDict("_ListMeta", {"continue": str}, total=False)


class _ListHead(TypedDict, total=False):
    metadata: _ListMeta


#: Reads a page's continue token and skips its items unparsed into objects.
_read_head = msgspec.json.Decoder(_ListHead).decode


def continue_token(raw: bytes) -> str:
    """The token asking for the page after `raw` ("" on the last page)."""
    try:
        return _read_head(raw).get("metadata", {}).get("continue", "")
    except msgspec.ValidationError:  # not the shape of a list: the taker's decoder says why
        return ""


@dataclass
class ListPages:
    """Up to `ahead` pages wait to be taken (one by default; a list started before the
    cache exists holds more, gangsched.edge.early_lists), one more is in flight. A failed
    request ends the pages: `next` raises its error."""

    kube: Kube
    path: str
    page_size: int = 500
    ahead: int = 1
    _pages: asyncio.Queue[bytes | BaseException] = field(init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> ListPages:
        self._pages = asyncio.Queue(maxsize=self.ahead)
        self._task = asyncio.create_task(self._fetch(), name=f"list {self.path}")
        return self

    async def next(self) -> bytes:
        """The next page's body (the last page's has no continue token)."""
        page = await self._pages.get()
        if isinstance(page, BaseException):
            raise page
        return page

    def cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _fetch(self) -> None:
        cont = ""
        try:
            while True:
                query: dict[str, Any] = {"limit": self.page_size}
                if cont:
                    query["continue"] = cont
                raw = await self.kube.request_raw("GET", self.path, query=query)
                await self._pages.put(raw)
                cont = continue_token(raw)
                if not cont:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the taker, which lists again
            await self._pages.put(exc)
