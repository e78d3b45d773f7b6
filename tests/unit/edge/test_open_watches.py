"""When `gangsched run`'s informers may start watching (Watches.open_watches): once the first
bind is answered (or the first step bound nothing), or after a bound for a follower that never
steps; aiohttp and the client (what watches go out on) loaded first, off the event loop."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from gangsched.edge import slim_client
from gangsched.edge.watches import Watches


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each load_client call, with whether it ran off the event loop's thread."""
    calls: list[bool] = []
    loop_thread = threading.get_ident()
    monkeypatch.setattr(
        slim_client, "load_client", lambda: calls.append(threading.get_ident() != loop_thread)
    )
    return calls


async def test_watches_open_after_the_first_step(loads: list[bool]) -> None:
    watches = SimpleNamespace(watching=asyncio.Event())
    first_step = asyncio.Event()
    opening = asyncio.create_task(
        Watches.open_watches(watches, after=(asyncio.Event(), first_step), at_most=60)  # type: ignore[arg-type]
    )
    await asyncio.sleep(0.05)
    assert not watches.watching.is_set() and loads == []
    first_step.set()
    await asyncio.wait_for(opening, 5)
    assert watches.watching.is_set()
    assert loads == [True]


async def test_watches_open_after_the_bound_without_a_step(loads: list[bool]) -> None:
    watches = SimpleNamespace(watching=asyncio.Event())
    await asyncio.wait_for(
        Watches.open_watches(watches, after=(asyncio.Event(),), at_most=0.05),  # type: ignore[arg-type]
        5,
    )
    assert watches.watching.is_set()
    assert loads == [True]
