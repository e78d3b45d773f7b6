"""gangsched under Karpenter (its kwok provider, built from its Go module): pods gangsched finds
no room for make Karpenter add nodes, and gangsched binds them there.

Harness: tests/e2e/karpenter.py. Run with `make e2e-autoscaling` (marker `autoscaling`; not part
of `make test`). The behaviour measured and the design: docs/concepts/autoscaling.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os

import pytest

from gangsched.core.domain_pinning import DOMAIN_GATE

from .conftest import Cluster
from .k8s import JSON, Kube, KubeError, condition, pod_manifest, unique_name, wait_for
from .karpenter import (  # noqa: F401  (fixtures)
    NODEPOOL_LABEL,
    ZONE_LABEL,
    AutoscalingEnv,
    autoscaling_env,
    karpenter,
)
from .operator_fixture import gangsched  # noqa: F401  (fixture)
from .test_operator import SIGS, UPSTREAM
from .test_volumes_side_by_side import BASELINE, baseline_scheduler

pytestmark = [pytest.mark.e2e, pytest.mark.autoscaling, pytest.mark.asyncio(loop_scope="session")]


def deployment(env: AutoscalingEnv, name: str, replicas: int, cpu: str) -> JSON:
    template = env.pod(name, cpu=cpu, labels={"app": name})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": env.ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


async def test_unschedulable_pods_make_karpenter_add_a_node_gangsched_binds_them(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    env = autoscaling_env
    await env.with_pool(cpu_limit=64)
    assert await env.claims() == []
    await env.kube.create(
        f"/apis/apps/v1/namespaces/{env.ns}/deployments", deployment(env, "web", 2, "4")
    )

    async def bound() -> dict[str, str] | None:
        pods = list((await env.pods()).values())
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        return nodes if len(nodes) == 2 and all(nodes.values()) else None

    env.karpenter.assert_alive()
    placed = await wait_for(bound, timeout=120, interval=0.5, what="both replicas bound")
    pool_nodes = {n["metadata"]["name"]: n for n in await env.pool_nodes()}
    assert set(placed.values()) <= set(pool_nodes), (placed, sorted(pool_nodes))
    for name in set(placed.values()):
        assert pool_nodes[name]["metadata"]["labels"][NODEPOOL_LABEL] == env.pool
    claims = await env.claims()
    assert 1 <= len(claims) <= 2, [c["metadata"]["name"] for c in claims]
    # Karpenter provisioned because gangsched said Unschedulable (its only trigger).
    events = await env.kube.get(f"/api/v1/namespaces/{env.ns}/events")
    reasons = {e["reason"] for e in events["items"] if e["involvedObject"]["kind"] == "Pod"}
    assert "Nominated" in reasons, sorted(reasons)
    for pod in (await env.pods()).values():
        scheduled = condition(pod, "PodScheduled") or {}
        assert scheduled.get("status") == "True", scheduled


# ------------------------------------------------------------------ one gang, new nodes
#: Longer than Karpenter's batch window (batchMaxDuration 10 s, batchIdleDuration 1 s): had the
#: first members been provisionable, Karpenter would have launched nodes for them by then.
HOLD_SECONDS = 15.0
PROVISIONED = "computed new nodeclaim(s) to fit pod(s)"


def provisioning_decisions(log: str) -> list[JSON]:
    """Karpenter's provisioning decisions in its (JSON) log: one line per scheduling round
    that launched NodeClaims, with how many and for how many pods."""
    decisions = []
    for line in log.splitlines():
        if PROVISIONED not in line:
            continue
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            decisions.append({"nodeclaims": entry.get("nodeclaims"), "pods": entry.get("pods")})
    return decisions


def scheduled_reasons(pods: dict[str, JSON]) -> dict[str, int]:
    """How many pods carry each PodScheduled reason ("" for none)."""
    reasons: dict[str, int] = {}
    for pod in pods.values():
        reason = str((condition(pod, "PodScheduled") or {}).get("reason") or "")
        reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


async def create_gang(env: AutoscalingEnv, scheduler: str, name: str, names: list[str]) -> None:
    """The gang's PodGroup: ours for gangsched, upstream's scheduling.k8s.io (kube-scheduler's
    GangScheduling, gate GenericWorkload) for the baseline."""
    if scheduler == "gangsched":
        await env.kube.create(
            f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", env.pod_group(name, len(names))
        )
        return
    await env.kube.create(
        f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups",
        {
            "apiVersion": UPSTREAM,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": env.ns},
            "spec": {"schedulingPolicy": {"gang": {"minCount": len(names)}}},
        },
    )


def member(env: AutoscalingEnv, scheduler: str, group: str, name: str, cpu: str) -> JSON:
    if scheduler == "gangsched":
        return env.pod(name, cpu=cpu, group=group)
    return env.pod(
        name,
        cpu=cpu,
        scheduler_name=BASELINE,
        extra_spec={"schedulingGroup": {"podGroupName": group}},
    )


async def scale_up_whole(env: AutoscalingEnv, scheduler: str, size: int = 16) -> JSON:
    """A gang of `size` 4-CPU pods on an empty NodePool: its first `size - 1` members wait
    HOLD_SECONDS, then the last one arrives. Returns what happened (the figures the bench
    records): NodeClaims before the last member, seconds from it to the first NodeClaim and
    to the last bind, NodeClaims and Karpenter decisions."""
    await env.with_pool()
    names = [f"train-{i}" for i in range(size)]
    await create_gang(env, scheduler, "train", names)
    for name in names[:-1]:
        await env.create_pod(member(env, scheduler, "train", name, "4"))
    await asyncio.sleep(HOLD_SECONDS)
    claims_before = len(await env.claims())
    reasons_before = scheduled_reasons(await env.pods())
    log_offset = len(env.karpenter.log())
    loop = asyncio.get_running_loop()
    await env.create_pod(member(env, scheduler, "train", names[-1], "4"))
    started = loop.time()
    first_claim: float | None = None

    async def all_bound() -> dict[str, str] | None:
        nonlocal first_claim
        if first_claim is None and await env.claims():
            first_claim = loop.time() - started
        pods = await env.pods()
        nodes = {n: str(pods[n]["spec"].get("nodeName") or "") for n in names if n in pods}
        return nodes if len(nodes) == size and all(nodes.values()) else None

    env.karpenter.assert_alive()
    placed = await wait_for(all_bound, timeout=240, interval=0.25, what=f"{size} members bound")
    last_bind = loop.time() - started
    pool_nodes = {n["metadata"]["name"] for n in await env.pool_nodes()}
    return {
        "scheduler": scheduler,
        "members": size,
        "member_cpu": 4,
        "nodeclaims_before_last_member": claims_before,
        "podscheduled_reasons_before_last_member": reasons_before,
        "seconds_last_member_to_first_nodeclaim": round(first_claim or 0.0, 2),
        "seconds_last_member_to_last_bind": round(last_bind, 2),
        "nodeclaims": len(await env.claims()),
        "nodes_used": len(set(placed.values())),
        "all_on_new_nodes": set(placed.values()) <= pool_nodes,
        "karpenter_decisions": provisioning_decisions(env.karpenter.log()[log_offset:]),
    }


def record(result: JSON) -> None:
    """Add `result` to the file named by GANGSCHED_AUTOSCALING_RESULTS (bench/autoscaling.py
    sets it and keeps the figures); without it the figures are only printed."""
    print(json.dumps(result, sort_keys=True))
    path = os.environ.get("GANGSCHED_AUTOSCALING_RESULTS")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(result, sort_keys=True) + "\n")


async def test_a_gang_scales_up_whole_and_nothing_before_its_last_member(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    result = await scale_up_whole(autoscaling_env, "gangsched")
    record(result)
    assert result["nodeclaims_before_last_member"] == 0, result
    assert result["all_on_new_nodes"], result
    # Three 4-CPU pods fit a 16-CPU node (15.9 allocatable): six nodes are the fewest.
    assert result["nodes_used"] == 6, result


async def test_kube_scheduler_gang_under_the_same_karpenter(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
    cluster: Cluster,
) -> None:
    """The same case under kube-scheduler's GangScheduling, for the side-by-side figures."""
    with baseline_scheduler(cluster):
        result = await scale_up_whole(autoscaling_env, BASELINE)
    record(result)
    assert result["all_on_new_nodes"], result


# ------------------------------------------------------------- a gang over the pool's limit
#: The pool's consolidateAfter in the over-the-limit case, and how long past it nodes may take
#: to go (Karpenter's disruption loop polls every 10 s, then drains and deletes).
CONSOLIDATE_AFTER = 10
CONSOLIDATION_GRACE = 60.0


async def over_the_pool_limit(env: AutoscalingEnv, size: int = 16) -> JSON:
    """A gang of `size` 4-CPU pods under a NodePool limited to 48 CPUs (three 16-CPU nodes:
    room for 9 members): what Karpenter launches, what binds, and whether the nodes it
    launched go again after consolidateAfter."""
    await env.with_pool(cpu_limit=48, consolidate_after=f"{CONSOLIDATE_AFTER}s")

    # gangsched finds the NodePool CRD at its next API discovery (up to 30 s after Karpenter
    # installed it, when it started first): the case starts once it watches NodePools.
    async def watching_node_pools() -> bool:
        return 'resource="nodepools.karpenter.sh"' in env.sched.metrics()

    await wait_for(watching_node_pools, timeout=60, what="gangsched watching NodePools")
    names = await env.gang("big", size)
    loop = asyncio.get_running_loop()
    started = loop.time()
    most_claims = 0
    claims_seen_at: float | None = None
    gone_at: float | None = None
    bound = 0
    deadline = started + HOLD_SECONDS + CONSOLIDATE_AFTER + CONSOLIDATION_GRACE
    while loop.time() < deadline:
        claims = len(await env.claims())
        pods = await env.pods()
        bound = max(bound, sum(1 for n in names if pods[n]["spec"].get("nodeName")))
        if claims and claims_seen_at is None:
            claims_seen_at = loop.time() - started
        most_claims = max(most_claims, claims)
        if most_claims and not claims and gone_at is None:
            gone_at = loop.time() - started
            break
        await asyncio.sleep(1)
    group = await env.kube.get(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/big")
    return {
        "scheduler": "gangsched",
        "members": size,
        "pool_cpu_limit": 48,
        "consolidate_after_seconds": CONSOLIDATE_AFTER,
        "most_nodeclaims": most_claims,
        "seconds_to_first_nodeclaim": round(claims_seen_at or 0.0, 2),
        "seconds_until_nodes_gone": gone_at,
        "nodeclaims_at_end": len(await env.claims()),
        "observed_seconds": round(loop.time() - started, 1),
        "members_bound": bound,
        "podscheduled_reasons": scheduled_reasons(await env.pods()),
        "podgroup_conditions": [
            {k: c.get(k) for k in ("type", "status", "reason", "message")}
            for c in (group.get("status") or {}).get("conditions") or []
        ],
    }


async def test_a_gang_over_the_pool_limit_binds_nothing_and_leaves_no_idle_node(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    result = await over_the_pool_limit(autoscaling_env)
    record(result)
    assert result["members_bound"] == 0, result
    assert result["nodeclaims_at_end"] == 0, result
    # Not Unschedulable (Karpenter's trigger), and the PodGroup says which pool is at its limit.
    assert result["podscheduled_reasons"] == {"NodePoolLimitReached": 16}, result
    messages = " ".join(str(c["message"]) for c in result["podgroup_conditions"])
    assert (
        f"needs 64 cpu, more than the 0 free on its nodes and the 48 the NodePools can still "
        f"add: pool {autoscaling_env.pool} has 48 of its cpu limit 48 left"
    ) in messages, result


# ------------------------------------------------------------------- a gang kept in one zone
#: The kwok provider's zones; the pool names them, so gangsched knows where it may launch.
KWOK_ZONES = ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")


async def one_zone(env: AutoscalingEnv, size: int = 9, wait: float = 120.0) -> JSON:
    """A gang of `size` 4-CPU pods whose PodGroup requires one zone, created held by
    gangsched's `gangsched.io/topology-domain` gate, under a NodePool that may launch in any of
    the kwok provider's four zones: the zones of the nodes Karpenter launches, each member's
    narrowed affinity, and whether the gang binds within `wait` seconds."""
    await env.with_pool(zones=KWOK_ZONES)

    async def watching_node_pools() -> bool:
        return 'resource="nodepools.karpenter.sh"' in env.sched.metrics()

    await wait_for(watching_node_pools, timeout=60, what="gangsched watching NodePools")
    await env.kube.create(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups",
        env.pod_group("zonal", size, topology={"required": ZONE_LABEL}),
    )
    names = [f"zonal-{i}" for i in range(size)]
    for name in names:
        pod = env.pod(name, cpu="4", group="zonal")
        pod["spec"]["schedulingGates"] = [{"name": DOMAIN_GATE}]
        await env.create_pod(pod)
    loop = asyncio.get_running_loop()
    started = loop.time()
    bound_after: float | None = None
    while loop.time() < started + wait:
        pods = await env.pods()
        if all(pods[n]["spec"].get("nodeName") for n in names):
            bound_after = loop.time() - started
            break
        await asyncio.sleep(1)
    pods = await env.pods()
    zones = sorted(str(n["metadata"]["labels"].get(ZONE_LABEL)) for n in await env.pool_nodes())
    pinned = sorted(
        {
            json.dumps(pods[n]["spec"].get("affinity", {}).get("nodeAffinity"), sort_keys=True)
            for n in names
        }
    )
    return {
        "scheduler": "gangsched",
        "members": size,
        "required_topology": ZONE_LABEL,
        "nodeclaims": len(await env.claims()),
        "node_zones": zones,
        "node_affinities": pinned,
        "gates_left": sorted(
            {g["name"] for n in names for g in pods[n]["spec"].get("schedulingGates") or []}
        ),
        "bound_zones": sorted(
            {
                str(n["metadata"]["labels"].get(ZONE_LABEL))
                for n in await env.pool_nodes()
                if any(pods[p]["spec"].get("nodeName") == n["metadata"]["name"] for p in names)
            }
        ),
        "seconds_to_bound": bound_after,
        "observed_seconds": round(loop.time() - started, 1),
        "podscheduled_reasons": scheduled_reasons(pods),
    }


async def test_a_gang_kept_in_one_zone_gets_its_new_nodes_in_one_zone(
    autoscaling_env: AutoscalingEnv,  # noqa: F811
) -> None:
    """Its members are created gated; gangsched narrows every member's node affinity to one
    zone, then lifts its gate, so Karpenter launches all the gang's nodes in that zone."""
    result = await one_zone(autoscaling_env)
    record(result)
    assert result["seconds_to_bound"] is not None, result
    assert result["nodeclaims"] > 0 and len(set(result["node_zones"])) == 1, result
    assert result["bound_zones"] == result["node_zones"][:1], result
    assert result["gates_left"] == [], result
    # One affinity for every member, naming the zone its nodes are in.
    assert len(result["node_affinities"]) == 1, result
    assert f'"values": ["{result["node_zones"][0]}"]' in result["node_affinities"][0], result


# ------------------------------------------------ what may be narrowed while a pod is gated
HOLD_GATE = "scheduling.sigs.k8s.io/topology"


def required_terms(*terms: list[JSON]) -> JSON:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
            }
        }
    }


async def test_a_gated_pods_node_affinity_may_be_narrowed_and_only_while_gated(
    kube: Kube,
) -> None:
    """The API rule a topology-aware gang under an autoscaler rests on (KEP-3838, GA in 1.30):
    while a pod has scheduling gates its required node affinity may be narrowed (expressions
    added to its terms, a nodeSelector entry added), never widened; once ungated, never."""
    ns = unique_name("gated")
    await kube.create_namespace(ns, {})
    try:
        mine = {"key": "e2e-test", "operator": "In", "values": [ns]}
        zone_a = {"key": ZONE_LABEL, "operator": "In", "values": ["test-zone-a"]}
        pod = pod_manifest("m-0", namespace=ns, extra_spec={"affinity": required_terms([mine])})
        pod["spec"]["schedulingGates"] = [{"name": HOLD_GATE}]
        path = f"/api/v1/namespaces/{ns}/pods/m-0"
        await kube.create(f"/api/v1/namespaces/{ns}/pods", pod)

        async def patch_affinity(affinity: JSON) -> int:
            try:
                await kube.patch(path, {"spec": {"affinity": affinity}})
            except KubeError as error:
                return error.status
            return 200

        narrowed = required_terms([mine, zone_a])
        assert await patch_affinity(narrowed) == 200
        zone_ab = {**zone_a, "values": ["test-zone-a", "test-zone-b"]}
        assert await patch_affinity(required_terms([mine, zone_ab])) == 422, "widened a value"
        assert await patch_affinity(required_terms([mine, zone_a], [mine])) == 422, "OR term"
        await kube.patch(path, {"spec": {"nodeSelector": {ZONE_LABEL: "test-zone-a"}}})
        await kube.patch(path, {"spec": {"schedulingGates": None}})
        rack = {"key": "topology.example.com/rack", "operator": "In", "values": ["r1"]}
        assert await patch_affinity(required_terms([mine, zone_a, rack])) == 422, "ungated"
        got = await kube.get(path)
        assert got["spec"]["affinity"] == narrowed
        assert got["spec"]["nodeSelector"] == {ZONE_LABEL: "test-zone-a"}
    finally:
        await kube.delete(f"/api/v1/namespaces/{ns}/pods", grace_period_seconds=0)
        await kube.delete(f"/api/v1/namespaces/{ns}")
