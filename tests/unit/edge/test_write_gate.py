"""The deferred writes' gate: held while binds are unanswered until they have waited max_wait,
then a few at a time, many once every bind is answered; granted in arrival order, and no slot
lost to a write cancelled while waiting."""

from __future__ import annotations

import asyncio

import pytest

from gangsched.edge.write_gate import WriteGate

pytestmark = pytest.mark.asyncio(loop_scope="function")


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class _Writes:
    """Writes through a gate, each noting its start and holding its slot until released."""

    def __init__(self, gate: WriteGate) -> None:
        self.gate = gate
        self.started: list[int] = []
        self.release = asyncio.Event()

    def start(self, *numbers: int) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(self._write(i)) for i in numbers]

    async def _write(self, i: int) -> None:
        async with self.gate.slot():
            self.started.append(i)
            await self.release.wait()


@pytest.mark.parametrize(
    ("max_wait", "while_binding"),
    [(60.0, []), (0.0, [0, 1])],
    ids=["held-until-the-last-bind", "no-wait-few-while-binding"],
)
async def test_while_binding_then_more_once_every_bind_is_answered(
    max_wait: float, while_binding: list[int]
) -> None:
    """While binds are unanswered, writes are held (max_wait 0: `while_binding` go at once);
    the last bind answered lets `otherwise` go."""
    binding = [True]
    gate = WriteGate(binding=lambda: binding[0], max_wait=max_wait, while_binding=2, otherwise=5)
    writes = _Writes(gate)
    tasks = writes.start(*range(8))
    await asyncio.sleep(0.05)
    assert writes.started == while_binding and gate.in_flight == len(while_binding)
    binding[0] = False
    gate.wake()  # the actuator's last bind answered
    await _settle()
    assert writes.started == [0, 1, 2, 3, 4] and gate.in_flight == 5
    writes.release.set()
    await asyncio.gather(*tasks)
    assert writes.started == list(range(8)) and gate.in_flight == 0


async def test_a_write_held_max_wait_goes_while_binds_go_on() -> None:
    """Binds that never stop do not hold a budget for good: once the oldest write has waited
    max_wait, it and those as old go, `while_binding` at a time; a later one waits its own."""
    gate = WriteGate(binding=lambda: True, max_wait=0.5, while_binding=2, otherwise=5)
    writes = _Writes(gate)
    early = writes.start(0, 1, 2)
    await asyncio.sleep(0.3)
    late = writes.start(3)[0]
    await _settle()
    assert writes.started == []
    await asyncio.sleep(0.3)  # the first three have waited 0.6 s, the last 0.3 s
    assert writes.started == [0, 1] and gate.in_flight == 2
    writes.release.set()
    await asyncio.gather(*early)
    assert writes.started == [0, 1, 2] and not late.done()
    await asyncio.wait_for(late, timeout=5)
    assert writes.started == [0, 1, 2, 3] and gate.in_flight == 0


async def test_a_write_cancelled_while_waiting_takes_no_slot() -> None:
    gate = WriteGate(while_binding=1, otherwise=1)
    release = asyncio.Event()
    done: list[int] = []

    async def write(i: int) -> None:
        async with gate.slot():
            await release.wait()
            done.append(i)

    first = asyncio.create_task(write(0))
    await _settle()
    waiting = [asyncio.create_task(write(i)) for i in (1, 2)]
    await _settle()
    waiting[0].cancel()
    await _settle()
    release.set()
    await asyncio.gather(first, waiting[1])
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]
    assert done == [0, 2] and gate.in_flight == 0


async def test_a_write_cancelled_as_its_slot_was_granted_hands_it_on() -> None:
    gate = WriteGate(while_binding=1, otherwise=1)
    gate.in_flight = 1  # a write holds the only slot
    done: list[int] = []

    async def write(i: int) -> None:
        async with gate.slot():
            done.append(i)

    second = asyncio.create_task(write(1))
    third = asyncio.create_task(write(2))
    await _settle()
    assert done == [] and gate.in_flight == 1
    gate.in_flight -= 1  # the holder is done: its slot goes to `second`...
    gate.wake()
    second.cancel()  # ...cancelled before it could run
    await _settle()
    with pytest.raises(asyncio.CancelledError):
        await second
    await asyncio.wait_for(third, timeout=5)  # a lost slot would leave it waiting
    assert done == [2] and gate.in_flight == 0
