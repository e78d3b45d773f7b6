"""gangsched under Karpenter (its kwok provider, built from its Go module): pods gangsched finds
no room for make Karpenter add nodes, and gangsched binds them there.

Harness: tests/e2e/karpenter.py. Run with `make e2e-autoscaling` (marker `autoscaling`; not part
of `make test`). The behaviour measured and the design: docs/concepts/autoscaling.md.
"""

from __future__ import annotations

import pytest

from .k8s import JSON, condition, wait_for
from .karpenter import (  # noqa: F401  (fixtures)
    NODEPOOL_LABEL,
    AutoscalingEnv,
    autoscaling_env,
    karpenter,
)
from .operator_fixture import gangsched  # noqa: F401  (fixture)

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
