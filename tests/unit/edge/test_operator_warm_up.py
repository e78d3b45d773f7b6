"""The connections a new leader opens ahead of its first binds (`Operator._warm_connections`):
one warm-up per leadership won, which leaves the operator's tasks once it is done (a replica
that wins and loses the lease for weeks kept every one), and which `stop` still cancels while
it runs."""

from __future__ import annotations

import asyncio

import pytest

from gangsched.config import Config
from gangsched.edge.operator import Operator

pytestmark = pytest.mark.asyncio(loop_scope="function")


class WarmingKube:
    """Of the API client, what building an Operator and warming connections use: each warm-up
    is recorded and lasts until `answered` is set."""

    def __init__(self) -> None:
        self.warmed: list[int] = []
        self.answered = asyncio.Event()

    async def warm(self, *, in_flight: int) -> None:
        self.warmed.append(in_flight)
        await self.answered.wait()


def follower(kube: WarmingKube) -> Operator:
    return Operator(config=Config(), kube=kube, may_write=lambda: False)  # type: ignore[arg-type]


async def test_finished_warm_ups_leave_the_operators_tasks() -> None:
    kube = WarmingKube()
    kube.answered.set()
    operator = follower(kube)
    for _ in range(4):
        operator.on_leadership(True)
        warming = list(operator._tasks)
        assert len(warming) == 1  # the one just started
        await asyncio.gather(*warming)
        operator.on_leadership(False)
    assert kube.warmed == [Config().bindConcurrency] * 4
    assert not operator._tasks, operator._tasks


async def test_a_warm_up_still_running_is_cancelled_at_stop() -> None:
    kube = WarmingKube()  # never answered
    operator = follower(kube)
    operator.on_leadership(True)
    (warming,) = operator._tasks
    await asyncio.sleep(0)  # under way
    assert kube.warmed == [Config().bindConcurrency] and not warming.done()
    await operator.stop()
    assert warming.cancelled()
    assert not operator._tasks, operator._tasks
