"""PodScheduled conditions written by the actuator: a new status or reason goes out at once, a
new message alone at most every `message_refresh` seconds (the newest one), and a rewrite that
keeps the status keeps the condition's lastTransitionTime."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SetCondition
from gangsched.core.scheduler import Scheduler
from gangsched.edge.cache import ClusterCache
from gangsched.edge.events import EventRecorder
from gangsched.edge.metrics import Metrics
from gangsched.edge.pod_writes import PodWriter
from tests.builders import raw_pod

pytestmark = pytest.mark.asyncio(loop_scope="function")


class PatchRecorder:
    def __init__(self) -> None:
        self.conditions: list[dict[str, Any]] = []

    async def patch(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.conditions.extend(body["status"].get("conditions", []))
        return {}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def writer(
    kube: PatchRecorder, clock: Clock, refresh: float, names: tuple[str, ...] = ("p",)
) -> PodWriter:
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"))
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    cache.pods().replace([raw_pod(name) for name in names])
    return PodWriter(
        kube=kube,  # type: ignore[arg-type]
        scheduler=scheduler,
        cache=cache,
        events=EventRecorder(kube=kube),  # type: ignore[arg-type]
        metrics=Metrics(),
        may_write=lambda: True,
        api_versions={},
        message_refresh=refresh,
        clock=clock,
    )


async def decide(pods: PodWriter, reason: str, message: str, name: str = "p") -> asyncio.Task[None]:
    """What the actuator does with a SetCondition decision."""
    cond = SetCondition(f"default/{name}", f"uid-{name}", "PodScheduled", "False", reason, message)
    pods.latest_condition[cond.pod] = cond
    task = asyncio.get_running_loop().create_task(pods.pod_condition(cond))
    await asyncio.sleep(0)
    return task


async def test_a_new_message_alone_waits_for_the_refresh_and_only_the_newest_goes() -> None:
    kube, clock = PatchRecorder(), Clock()
    pods = writer(kube, clock, refresh=0.2)
    await (await decide(pods, "Unschedulable", "3 racks too small"))
    assert [c["message"] for c in kube.conditions] == ["3 racks too small"]
    clock.now += 0.05
    second = await decide(pods, "Unschedulable", "2 racks too small")
    third = await decide(pods, "Unschedulable", "1 rack too small")
    await asyncio.sleep(0.05)
    assert len(kube.conditions) == 1  # held: same status and reason, written 0.05 s ago
    await asyncio.wait_for(asyncio.gather(second, third), timeout=5)
    assert [c["message"] for c in kube.conditions] == ["3 racks too small", "1 rack too small"]
    assert "lastTransitionTime" in kube.conditions[0]
    assert "lastTransitionTime" not in kube.conditions[1]  # status unchanged: time kept


async def test_a_new_reason_is_written_at_once() -> None:
    kube, clock = PatchRecorder(), Clock()
    pods = writer(kube, clock, refresh=60.0)
    await (await decide(pods, "Unschedulable", "no room"))
    await asyncio.wait_for(await decide(pods, "SchedulerError", "binding failed"), timeout=5)
    assert [c["reason"] for c in kube.conditions] == ["Unschedulable", "SchedulerError"]


async def test_an_unchanged_condition_is_not_rewritten_and_a_bound_pod_is_forgotten() -> None:
    kube, clock = PatchRecorder(), Clock()
    pods = writer(kube, clock, refresh=0.1)
    await (await decide(pods, "Unschedulable", "no room"))
    await asyncio.wait_for(await decide(pods, "Unschedulable", "no room"), timeout=5)
    assert len(kube.conditions) == 1
    held = await decide(pods, "Unschedulable", "still no room")
    pods.forget("default/p")  # bound meanwhile: the held message is dropped
    await asyncio.wait_for(held, timeout=5)
    assert len(kube.conditions) == 1
    assert "default/p" not in pods.written


async def test_condition_writes_never_hold_more_than_their_few_connections() -> None:
    """Binds and evictions must find a connection: 20 conditions decided at once (a gang's
    members) go out `condition_concurrency` at a time, and a pod bound while its write
    waited for a slot gets none."""
    names = tuple(f"p{i}" for i in range(20))
    in_flight, most = 0, 0
    release = asyncio.Event()

    class SlowKube(PatchRecorder):
        async def patch(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await release.wait()
            in_flight -= 1
            return await super().patch(path, body)

    kube = SlowKube()
    pods = writer(kube, Clock(), refresh=5.0, names=names)
    tasks = [await decide(pods, "Unschedulable", "no room", name) for name in names]
    await asyncio.sleep(0.05)
    assert most == pods.condition_concurrency == 4
    pods.scheduler.cluster.pods["default/p19"].node_name = "n1"  # bound meanwhile
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)
    assert most == 4
    assert len(kube.conditions) == 19
