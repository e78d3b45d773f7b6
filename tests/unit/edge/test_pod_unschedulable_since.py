"""The PodScheduled condition's lastTransitionTime says since when a pod is Unschedulable (issue
32: where a wait for new capacity starts, what gangsched_gang_new_capacity_bound_seconds counts
from): set when the reason becomes or stops being Unschedulable, kept across a restart."""

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
from tests.unit.edge.test_pod_conditions import PatchRecorder

pytestmark = pytest.mark.asyncio(loop_scope="function")


def writer(kube: PatchRecorder, pod: dict[str, Any]) -> PodWriter:
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"))
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    cache.pods().replace([pod])
    return PodWriter(
        kube=kube,  # type: ignore[arg-type]
        scheduler=scheduler,
        cache=cache,
        events=EventRecorder(kube=kube),  # type: ignore[arg-type]
        metrics=Metrics(),
        may_write=lambda: True,
        api_versions={},
        message_refresh=0.0,
    )


async def write(pods: PodWriter, reason: str, message: str) -> None:
    cond = SetCondition("default/p", "uid-p", "PodScheduled", "False", reason, message)
    pods.latest_condition[cond.pod] = cond
    await asyncio.wait_for(pods.pod_condition(cond), timeout=5)


def transitions(kube: PatchRecorder) -> list[tuple[str, bool]]:
    return [(c["reason"], "lastTransitionTime" in c) for c in kube.conditions]


async def test_becoming_unschedulable_after_waiting_for_members_is_a_new_time() -> None:
    kube = PatchRecorder()
    pods = writer(kube, raw_pod("p"))
    await write(pods, "NotReadyForScheduling", "waiting for 2 more members")
    await write(pods, "Unschedulable", "no room")
    await write(pods, "Unschedulable", "still no room")
    await write(pods, "NotReadyForScheduling", "a member was deleted")
    assert transitions(kube) == [
        ("NotReadyForScheduling", True),
        ("Unschedulable", True),
        ("Unschedulable", False),
        ("NotReadyForScheduling", True),
    ]


async def test_a_restarted_writer_keeps_the_time_of_a_pod_already_unschedulable() -> None:
    since = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "lastTransitionTime": "2026-01-31T12:00:00Z",
    }
    kube = PatchRecorder()
    pods = writer(kube, raw_pod("p", status={"conditions": [since]}))
    await write(pods, "Unschedulable", "no room, as before the restart")
    assert transitions(kube) == [("Unschedulable", False)]
    fresh = PatchRecorder()
    await write(writer(fresh, raw_pod("p")), "Unschedulable", "no room")
    assert transitions(fresh) == [("Unschedulable", True)]
