"""Karpenter's consolidation and running gangs (issue 32 item 3; docs/concepts/gang-protection.md).

Three 12-CPU filler pods make Karpenter launch three 16-CPU nodes; a gang of two 3.5-CPU
members then binds one member on each of two of them (3.9 CPUs are left per node). The
fillers are deleted: one node is empty, and the two gang nodes are underutilized (7 CPUs in
all fit one node), so consolidation wants all three. With gangsched's budget the empty node is
removed and the gang is left whole; with protection opted out (what every gang got before), the
same consolidation evicts a member and breaks the gang.

Harness: tests/e2e/karpenter.py. Run with `make e2e-autoscaling` (marker `autoscaling`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .harness import metric_value
from .k8s import JSON, condition
from .karpenter import AutoscalingEnv, autoscaling_env, karpenter  # noqa: F401  (fixtures)
from .operator_fixture import gangsched  # noqa: F401  (fixture)
from .test_autoscaling import record
from .test_operator import SIGS

pytestmark = [pytest.mark.e2e, pytest.mark.autoscaling, pytest.mark.asyncio(loop_scope="session")]

PROTECTION = "gangsched.io/disruption-protection"
GRACE = "gangsched.io/stale-gang-grace-seconds"
CONSOLIDATE_AFTER = 10
#: How long to watch after the fillers go: consolidateAfter, Karpenter's 10 s disruption poll,
#: its 15 s validation of an underutilized candidate, then drain and delete, with room to spare.
WATCH_SECONDS = 90.0
MEMBERS = ("train-0", "train-1")


async def running_gang_beside_idle_capacity(env: AutoscalingEnv, *, protected: bool) -> None:
    await env.with_pool(consolidate_after=f"{CONSOLIDATE_AFTER}s")
    fillers = [f"filler-{i}" for i in range(3)]
    for name in fillers:
        await env.create_pod(env.pod(name, cpu="12"))
    await env.wait_bound(fillers, timeout=180)
    group = env.pod_group("train", len(MEMBERS))
    if not protected:
        group["metadata"]["annotations"] = {PROTECTION: "false", GRACE: "never"}
    await env.kube.create(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", group)
    for name in MEMBERS:
        await env.create_pod(env.pod(name, cpu="3500m", group="train"))
    placed = await env.wait_bound(list(MEMBERS), timeout=60)
    assert len(set(placed.values())) == 2, placed  # one member per node: capacity forces it
    budget = f"/apis/policy/v1/namespaces/{env.ns}/poddisruptionbudgets/gang-sigs-train"
    if protected:

        async def counted() -> bool:
            status = ((await env.kube.get_or_none(budget)) or {}).get("status") or {}
            return status.get("currentHealthy") == 2 and status.get("disruptionsAllowed") == 0

        await env.kube.wait_for_object(budget, lambda b: True, timeout=30, what="gang budget")
        for _ in range(60):
            if await counted():
                break
            await asyncio.sleep(0.5)
        assert await counted(), await env.kube.get_or_none(budget)
    else:
        assert await env.kube.get_or_none(budget) is None
    for name in fillers:
        await env.kube.delete(f"/api/v1/namespaces/{env.ns}/pods/{name}", grace_period_seconds=0)


def member_state(pods: dict[str, JSON], name: str) -> str:
    pod = pods.get(name)
    if pod is None:
        return "gone"
    if pod["metadata"].get("deletionTimestamp"):
        return "terminating"
    target = condition(pod, "DisruptionTarget")
    if target is not None:
        return f"DisruptionTarget:{target.get('reason')}"
    return "bound" if pod["spec"].get("nodeName") else "pending"


async def watch(env: AutoscalingEnv, *, stop_when_broken: bool) -> JSON:
    """Nodes and the gang's members, once a second for WATCH_SECONDS."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    nodes_before = len(await env.pool_nodes())
    fewest_nodes = nodes_before
    first_node_gone: float | None = None
    broken_at: float | None = None
    states: dict[str, str] = {}
    while loop.time() < started + WATCH_SECONDS:
        live = [n for n in await env.pool_nodes() if not n["metadata"].get("deletionTimestamp")]
        if len(live) < fewest_nodes:
            fewest_nodes = len(live)
            if first_node_gone is None:
                first_node_gone = round(loop.time() - started, 1)
        pods = await env.pods()
        states = {name: member_state(pods, name) for name in MEMBERS}
        if broken_at is None and any(s != "bound" for s in states.values()):
            broken_at = round(loop.time() - started, 1)
            if stop_when_broken:
                break
        await asyncio.sleep(1)
    return {
        "pool_nodes_after_fillers_deleted": nodes_before,
        "fewest_live_pool_nodes": fewest_nodes,
        "seconds_to_first_node_removed": first_node_gone,
        "seconds_to_gang_broken": broken_at,
        "member_states": states,
        "observed_seconds": round(loop.time() - started, 1),
    }


async def blocked_reasons(env: AutoscalingEnv) -> list[str]:
    """Karpenter's events on the nodes of the pool (DisruptionBlocked and the like)."""
    names = {n["metadata"]["name"] for n in await env.pool_nodes()}
    events = (await env.kube.get("/api/v1/events"))["items"]
    return sorted(
        {
            f"{e.get('reason')}: {e.get('message')}"[:160]
            for e in events
            if e["involvedObject"].get("name") in names and "Disrupt" in str(e.get("reason"))
        }
    )


async def test_consolidation_removes_the_idle_node_and_breaks_no_protected_gang(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    env = autoscaling_env
    await running_gang_beside_idle_capacity(env, protected=True)
    result: dict[str, Any] = {"case": "consolidation", "protected": True}
    result |= await watch(env, stop_when_broken=True)
    result["karpenter_node_events"] = await blocked_reasons(env)
    record(result)
    assert result["seconds_to_gang_broken"] is None, result
    assert set(result["member_states"].values()) == {"bound"}, result
    # The empty node went; the two nodes holding the gang stayed.
    assert result["fewest_live_pool_nodes"] == 2, result
    assert metric_value(env.sched.metrics(), "gangsched_gangs_broken_total") == 0


async def test_consolidation_breaks_a_gang_that_opted_out(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    """What every gang got before gangsched protected it: the same consolidation evicts a
    member, and the gang is left below minMember."""
    env = autoscaling_env
    await running_gang_beside_idle_capacity(env, protected=False)
    result: dict[str, Any] = {"case": "consolidation", "protected": False}
    result |= await watch(env, stop_when_broken=True)
    record(result)
    assert result["seconds_to_gang_broken"] is not None, result

    async def told() -> bool:
        events = await env.kube.get(f"/apis/events.k8s.io/v1/namespaces/{env.ns}/events")
        return any(
            e.get("reason") == "GangBroken" and e["regarding"].get("name") == "train"
            for e in events["items"]
        )

    for _ in range(60):
        if await told():
            break
        await asyncio.sleep(0.5)
    assert await told(), "no GangBroken event on the broken gang"


# --------------------------------------------------------------- a gang whose instance dies
async def test_a_gang_whose_node_dies_is_released_and_bound_whole_on_a_new_node(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    """Four 4-CPU members on Karpenter's 16-CPU nodes (two nodes); one node's instance dies
    (the Node deleted without a drain). After its 5 s grace the gang is released; its members,
    recreated as an owner would, need a new node, which Karpenter adds, and bind whole there."""
    env = autoscaling_env
    await env.with_pool(consolidate_after="300s")
    group = env.pod_group("job", 4)
    group["metadata"]["annotations"] = {GRACE: "5"}
    await env.kube.create(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", group)
    names = [f"job-{i}" for i in range(4)]
    for name in names:
        await env.create_pod(env.pod(name, cpu="4", group="job"))
    placed = await env.wait_bound(names, timeout=180)
    budget = f"/apis/policy/v1/namespaces/{env.ns}/poddisruptionbudgets/gang-sigs-job"
    await env.kube.wait_for_object(budget, lambda b: True, timeout=30, what="gang budget")
    loop = asyncio.get_running_loop()
    dead = placed["job-0"]
    path = f"/api/v1/nodes/{dead}"
    await env.kube.patch(path, {"metadata": {"finalizers": None}})
    await env.kube.delete(path)
    died = loop.time()
    on_dead = [n for n, node in placed.items() if node == dead]
    survivors = [n for n in names if n not in on_dead]

    async def released() -> bool:
        pods = await env.pods()
        return all(
            n not in pods
            or (condition(pods[n], "DisruptionTarget") or {}).get("reason") == "StaleGangReleased"
            for n in survivors
        )

    for _ in range(120):
        if await released():
            break
        await asyncio.sleep(0.5)
    if not await released():
        pods = await env.pods()
        states = {n: (member_state(pods, n), pods[n]["spec"].get("nodeName")) for n in pods}
        node = await env.kube.get_or_none(path)
        raise AssertionError(
            f"not released: {states}; node {dead}: {node and node['metadata']}\n"
            + env.sched.log_tail(40)
        )
    released_after = loop.time() - died
    for name in names:  # the pod GC's part for the dead node's pods, then the owner's
        await env.kube.delete(f"/api/v1/namespaces/{env.ns}/pods/{name}", grace_period_seconds=0)
    for name in names:
        await env.kube.wait_gone(f"/api/v1/namespaces/{env.ns}/pods/{name}", timeout=60)
    claims_before = len(await env.claims())
    recreated = loop.time()
    for name in names:
        await env.create_pod(env.pod(name, cpu="4", group="job"))
    again = await env.wait_bound(names, timeout=180)
    result = {
        "case": "node_lost",
        "grace_seconds": 5,
        "members": 4,
        "members_on_dead_node": len(on_dead),
        "seconds_node_deleted_to_released": round(released_after, 1),
        "seconds_recreated_to_bound_whole": round(loop.time() - recreated, 1),
        "nodeclaims_before_recreate": claims_before,
        "nodeclaims_after": len(await env.claims()),
        "nodes_used_again": len(set(again.values())),
    }
    record(result)
    assert dead not in again.values()
    assert released_after >= 5, result
    assert metric_value(env.sched.metrics(), "gangsched_stale_gangs_released_total") >= 1
