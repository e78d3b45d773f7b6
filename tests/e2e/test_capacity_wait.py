"""Grow before you evict on the plain control plane (issue 32 item 2), nodes added by the test
as an autoscaler would add them: a gang that fits only by preempting waits for them and binds
there with nothing preempted; when none come, it preempts once its wait is over, though nothing
in the cluster changed; without a wait it preempts at once. The same under Karpenter:
tests/e2e/test_autoscaling_grow.py."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from gangsched.core.api.capacity_wait import WAIT_FOR_CAPACITY_ANNOTATION

from .k8s import JSON, condition, wait_for
from .operator_fixture import gangsched  # noqa: F401  (fixture)
from .test_operator import HIGH, LOW, SIGS, Env, env  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

WAITING = "for new capacity before preempting"
EXPIRED = "capacity did not arrive within"


async def crowded(where: Env, wait: int | None) -> tuple[dict[str, str], list[str]]:
    """Two 4-CPU nodes, each running a low-priority 4-CPU pod, then a high-priority 2-pod gang
    of 4-CPU pods (its PodGroup's wait: `wait`, None for the configured default of 0)."""
    await where.add_nodes(2, cpu="4")
    low = ["low-0", "low-1"]
    for name in low:
        await where.create_pod(where.pod(name, cpu="4", priority_class_name=LOW))
    placed = await where.wait_bound(low)
    group = where.pod_group("train", 2)
    if wait is not None:
        group["metadata"]["annotations"] = {WAIT_FOR_CAPACITY_ANNOTATION: str(wait)}
    await where.kube.create(f"/apis/{SIGS}/namespaces/{where.ns}/podgroups", group)
    members = ["train-0", "train-1"]
    for name in members:
        await where.create_pod(where.pod(name, cpu="4", group="train", priority_class_name=HIGH))
    return placed, members


async def status_of(where: Env) -> str:
    group = await where.kube.get(f"/apis/{SIGS}/namespaces/{where.ns}/podgroups/train")
    return json.dumps(group.get("status") or {})


async def notes(where: Env) -> list[str]:
    events = await where.kube.get(f"/api/v1/namespaces/{where.ns}/events")
    return [
        str(e.get("message") or "")
        for e in events["items"]
        if e["involvedObject"]["kind"] == "PodGroup"
    ]


def new_capacity(metrics: str) -> tuple[float, float, float]:
    """gangsched_gang_new_capacity_bound_seconds' count and sum, and
    gangsched_gang_new_capacity_nodes' sum."""

    def value(name: str) -> float:
        found = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    seconds = "gangsched_gang_new_capacity_bound_seconds"
    return (
        value(f"{seconds}_count"),
        value(f"{seconds}_sum"),
        value("gangsched_gang_new_capacity_nodes_sum"),
    )


def victims(pods: dict[str, JSON], low: dict[str, str]) -> list[str]:
    return sorted(
        name
        for name in low
        if name not in pods
        or pods[name]["metadata"].get("deletionTimestamp")
        or (condition(pods[name], "DisruptionTarget") or {}).get("status") == "True"
    )


async def test_new_nodes_during_the_wait_bind_the_gang_and_nothing_is_preempted(env: Env) -> None:  # noqa: F811
    low, members = await crowded(env, wait=600)

    async def waiting() -> bool:
        return WAITING in await status_of(env)

    await wait_for(waiting, timeout=30, interval=0.3, what="the PodGroup says it waits")
    pods = await env.pods()
    for name in members:
        scheduled = condition(pods[name], "PodScheduled") or {}
        assert (scheduled.get("status"), scheduled.get("reason")) == ("False", "Unschedulable")
        assert not pods[name].get("status", {}).get("nominatedNodeName")
    assert victims(pods, low) == []
    assert any(WAITING in note for note in await notes(env))
    before = new_capacity(env.sched.metrics())
    await asyncio.sleep(1.1)  # creation times have whole seconds: the nodes come later
    added = await env.add_nodes(2, cpu="4")  # as an autoscaler would
    placed = await env.wait_bound(members)
    assert set(placed.values()) == set(added), placed
    assert victims(await env.pods(), low) == []
    # Seen from outside: one more gang bound on new capacity, on two new nodes.
    after = new_capacity(env.sched.metrics())
    assert (after[0] - before[0], after[2] - before[2]) == (1, 2), (before, after)
    assert after[1] - before[1] > 1.0, (before, after)


async def test_with_no_new_capacity_the_gang_preempts_when_its_wait_is_over(env: Env) -> None:  # noqa: F811
    low, members = await crowded(env, wait=5)

    async def waiting() -> bool:
        return WAITING in await status_of(env)

    await wait_for(waiting, timeout=30, interval=0.3, what="the PodGroup says it waits")
    assert victims(await env.pods(), low) == []
    # Nothing changes in the cluster: the end of the wait alone brings the gang back.
    placed = await env.wait_bound(members, timeout=60)
    assert set(placed.values()) == set(low.values()), placed
    assert any(EXPIRED in note for note in await notes(env))


async def test_without_a_wait_the_gang_preempts_at_once(env: Env) -> None:  # noqa: F811
    low, members = await crowded(env, wait=None)
    placed = await env.wait_bound(members, timeout=60)
    assert set(placed.values()) == set(low.values()), placed
    assert not any(WAITING in note for note in await notes(env))
