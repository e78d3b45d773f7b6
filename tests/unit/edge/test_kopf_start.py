"""kopf starts once the caches have synced and the first binds have settled (no write in
flight and no gang queued for its turn, at two looks in a row), or after KOPF_AFTER_S whatever
happens (issue 30)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from gangsched.core.model import Dialect, GroupRef
from gangsched.core.queue import SchedulingQueue
from gangsched.edge import app


@dataclass
class FakeActuator:
    in_flight: int = 0


@dataclass
class FakeScheduler:
    queue: SchedulingQueue = field(default_factory=SchedulingQueue)


@dataclass
class FakeOperator:
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    actuator: FakeActuator = field(default_factory=FakeActuator)
    scheduler: FakeScheduler = field(default_factory=FakeScheduler)


async def test_kopf_waits_for_the_sync_then_for_the_binds_to_settle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app, "SETTLED_POLL_S", 0.01)
    operator = FakeOperator(actuator=FakeActuator(in_flight=3))
    waiting = asyncio.create_task(app._until_settled({"operator": operator}, asyncio.Event()))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # not synced
    operator.synced.set()
    await asyncio.sleep(0.1)
    assert not waiting.done()  # binds in flight
    operator.actuator.in_flight = 0
    await asyncio.wait_for(waiting, timeout=5)


async def test_kopf_waits_while_gangs_are_queued_even_with_no_bind_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A large gang's cycle can outlast the binds before it: between them nothing is in
    flight, and the gangs still queued are what tells the start-up is not over."""
    monkeypatch.setattr(app, "SETTLED_POLL_S", 0.01)
    operator = FakeOperator()
    operator.synced.set()
    queue = operator.scheduler.queue
    ref = GroupRef(Dialect.SIGS, "default", "big")
    queue.add(ref, priority=0, created=0.0)
    waiting = asyncio.create_task(app._until_settled({"operator": operator}, asyncio.Event()))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # queued, though nothing is in flight
    assert queue.pop(0.0) == ref
    queue.done(ref)
    await asyncio.wait_for(waiting, timeout=5)


async def test_kopf_starts_after_the_deadline_whatever_happens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app, "SETTLED_POLL_S", 0.01)
    monkeypatch.setattr(app, "KOPF_AFTER_S", 0.2)
    never_synced = FakeOperator(actuator=FakeActuator(in_flight=1))
    await asyncio.wait_for(app._until_settled({"operator": never_synced}, asyncio.Event()), 5)
    busy = FakeOperator(actuator=FakeActuator(in_flight=1))
    busy.synced.set()
    await asyncio.wait_for(app._until_settled({"operator": busy}, asyncio.Event()), 5)


async def test_a_stop_or_no_operator_does_not_wait() -> None:
    stop = asyncio.Event()
    stop.set()
    busy = FakeOperator(actuator=FakeActuator(in_flight=1))
    await asyncio.wait_for(app._until_settled({"operator": busy}, stop), 5)
    await asyncio.wait_for(app._until_settled({}, asyncio.Event()), 5)
