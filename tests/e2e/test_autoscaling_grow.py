"""Grow before you evict, under Karpenter (issue 32 items 2 and 5): a gang that fits only by
preempting lower-priority running work waits for the nodes Karpenter adds when its PodGroup
asks for it (`gangsched.io/wait-for-capacity-seconds`), and is bound there with nothing
preempted; without it (the default, `preempt`), it preempts at once.

Harness: tests/e2e/karpenter.py. Run with `make e2e-autoscaling` (marker `autoscaling`). The
policy: docs/concepts/capacity-wait.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re

import pytest

from gangsched.core.api.capacity_wait import WAIT_FOR_CAPACITY_ANNOTATION

from .k8s import JSON, condition, wait_for
from .karpenter import (  # noqa: F401  (fixtures)
    AutoscalingEnv,
    autoscaling_env,
    karpenter,
)
from .operator_fixture import gangsched  # noqa: F401  (fixture)
from .test_operator import HIGH, LOW, SIGS

pytestmark = [pytest.mark.e2e, pytest.mark.autoscaling, pytest.mark.asyncio(loop_scope="session")]

#: One 12-CPU pod per 16-CPU node (15.9 allocatable): two low-priority pods hold two nodes
#: with 3.9 CPUs free each, and a two-member gang of 12-CPU pods fits only in their place, or
#: on two new nodes.
POD_CPU = "12"
MEMBERS = 2
WAIT_SECONDS = 300
WAITING = "for new capacity before preempting"


def record(result: JSON) -> None:
    """Print the figures and add them to GANGSCHED_AUTOSCALING_RESULTS when it is set (as the
    other autoscaling cases do; bench/autoscaling.py keeps them)."""
    print(json.dumps(result, sort_keys=True))
    path = os.environ.get("GANGSCHED_AUTOSCALING_RESULTS")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(result, sort_keys=True) + "\n")


def histogram(metrics: str, name: str) -> tuple[float, float]:
    """(count, sum) of an unlabelled histogram in a Prometheus text exposition."""
    found = {
        kind: float(value)
        for kind, value in re.findall(rf"^{name}_(count|sum) (\S+)$", metrics, re.MULTILINE)
    }
    return found.get("count", 0.0), found.get("sum", 0.0)


async def running_low_work(env: AutoscalingEnv) -> dict[str, str]:
    """Two low-priority 12-CPU pods, bound on two nodes Karpenter added for them."""
    await env.with_pool(consolidation_policy="WhenEmpty", consolidate_after="10m")
    names = [f"low-{i}" for i in range(MEMBERS)]
    for name in names:
        await env.create_pod(env.pod(name, cpu=POD_CPU, priority_class_name=LOW))
    env.karpenter.assert_alive()
    placed = await env.wait_bound(names, timeout=180)
    assert len(set(placed.values())) == MEMBERS, placed
    return placed


async def podgroup_says(env: AutoscalingEnv, name: str) -> str:
    group = await env.kube.get(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/{name}")
    return json.dumps(group.get("status") or {})


async def event_notes(env: AutoscalingEnv, kind: str) -> list[str]:
    events = await env.kube.get(f"/api/v1/namespaces/{env.ns}/events")
    return [
        str(e.get("message") or "") for e in events["items"] if e["involvedObject"]["kind"] == kind
    ]


async def grow_or_preempt(env: AutoscalingEnv, *, wait: int | None) -> JSON:
    """Low-priority work running, then a high-priority gang that fits only by preempting it;
    `wait`: the gang's annotation (None: the configured default, preempt at once). Returns
    what happened: where the gang was bound, the victims, the nodes Karpenter added after the
    gang arrived, and the seconds from its last member to its last bind."""
    low = await running_low_work(env)
    claims_before = {c["metadata"]["name"] for c in await env.claims()}
    metrics_before = env.sched.metrics()
    group = env.pod_group("train", MEMBERS)
    if wait is not None:
        group["metadata"]["annotations"] = {WAIT_FOR_CAPACITY_ANNOTATION: str(wait)}
    await env.kube.create(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", group)
    names = [f"train-{i}" for i in range(MEMBERS)]
    loop = asyncio.get_running_loop()
    for name in names:
        await env.create_pod(env.pod(name, cpu=POD_CPU, group="train", priority_class_name=HIGH))
    started = loop.time()
    status_said_waiting = False

    async def all_bound() -> dict[str, str] | None:
        nonlocal status_said_waiting
        if not status_said_waiting and WAITING in await podgroup_says(env, "train"):
            status_said_waiting = True
        pods = await env.pods()
        nodes = {n: str(pods[n]["spec"].get("nodeName") or "") for n in names if n in pods}
        return nodes if len(nodes) == MEMBERS and all(nodes.values()) else None

    env.karpenter.assert_alive()
    placed = await wait_for(all_bound, timeout=240, interval=0.25, what="the gang bound")
    seconds = loop.time() - started
    pods = await env.pods()
    evicted = sorted(
        name
        for name in low
        if name not in pods
        or (condition(pods[name], "DisruptionTarget") or {}).get("status") == "True"
        or pods[name]["metadata"].get("deletionTimestamp")
    )
    claims_after = {c["metadata"]["name"] for c in await env.claims()}
    metrics_after = env.sched.metrics()
    count = [
        histogram(m, "gangsched_gang_new_capacity_bound_seconds")
        for m in (metrics_before, metrics_after)
    ]
    nodes = [
        histogram(m, "gangsched_gang_new_capacity_nodes") for m in (metrics_before, metrics_after)
    ]
    return {
        "case": "grow before evict" if wait else "preempt at once",
        "scheduler": "gangsched",
        "wait_for_capacity_seconds": wait or 0,
        "members": MEMBERS,
        "member_cpu": int(POD_CPU),
        "low_priority_nodes": sorted(set(low.values())),
        "gang_nodes": sorted(set(placed.values())),
        "gang_on_new_nodes": not set(placed.values()) & set(low.values()),
        "victims": evicted,
        "nodeclaims_added_for_the_gang": len(claims_after - claims_before),
        "seconds_last_member_to_last_bind": round(seconds, 2),
        "podgroup_status_said_waiting": status_said_waiting,
        "podgroup_events_said_waiting": any(
            WAITING in n for n in await event_notes(env, "PodGroup")
        ),
        "metric_new_capacity_gangs": count[1][0] - count[0][0],
        "metric_new_capacity_seconds": round(count[1][1] - count[0][1], 2),
        "metric_new_capacity_nodes": nodes[1][1] - nodes[0][1],
        "load": os.getloadavg()[0],
    }


async def test_a_gang_that_waits_for_capacity_binds_on_new_nodes_and_preempts_nothing(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    result = await grow_or_preempt(autoscaling_env, wait=WAIT_SECONDS)
    record(result)
    assert result["victims"] == [], result
    assert result["gang_on_new_nodes"], result
    assert result["nodeclaims_added_for_the_gang"] >= 1, result
    assert result["podgroup_status_said_waiting"] or result["podgroup_events_said_waiting"], result
    assert result["metric_new_capacity_gangs"] == 1, result
    assert result["metric_new_capacity_nodes"] == len(result["gang_nodes"]), result


async def test_without_a_wait_the_gang_preempts_at_once(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    result = await grow_or_preempt(autoscaling_env, wait=None)
    record(result)
    assert result["victims"] == ["low-0", "low-1"], result
    assert not result["podgroup_status_said_waiting"], result
    assert not result["podgroup_events_said_waiting"], result
