"""Gang protection and stale-gang release on the plain local control plane (issue 32 items 3
and 4; docs/concepts/gang-protection.md), with kube-controller-manager's disruption controller
computing the budgets' status as in a real cluster.

- `kubectl drain` of a node holding a running gang's members waits (the Eviction API refuses),
  while the node of a gang that opted out drains, breaking that gang: what every gang got
  before gangsched protected them.
- A gang whose node is deleted is released after its grace period (DisruptionTarget reason
  StaleGangReleased, events), and scheduled again whole once its members are recreated.
- A replacement bound within the grace period cancels the release.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Cluster
from .harness import Replica, eventually, install, manifest_config
from .k8s import JSON, Kube, condition, pod_manifest, unique_name
from .workload import GROUP_LABEL, SIGS, Workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

PROTECTION = "gangsched.io/disruption-protection"
GRACE = "gangsched.io/stale-gang-grace-seconds"


class Env:
    def __init__(self, cluster: Cluster, kube: Kube, workload: Workload, replica: Replica):
        self.cluster, self.kube, self.workload, self.replica = cluster, kube, workload, replica

    @property
    def ns(self) -> str:
        return self.workload.ns

    async def gang(
        self, name: str, nodes: list[str], *, cpu: str = "3", annotations: dict[str, str]
    ) -> None:
        """A PodGroup of len(nodes) members, minMember all of them, member i pinned to
        nodes[i] by a node selector."""
        await self.kube.create(
            f"/apis/{SIGS}/namespaces/{self.ns}/podgroups",
            {
                "apiVersion": SIGS,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": self.ns, "annotations": annotations},
                "spec": {"minMember": len(nodes)},
            },
        )
        for i, node in enumerate(nodes):
            await self.member(name, i, node, cpu=cpu)

    async def member(self, gang: str, index: int, node: str, *, cpu: str = "3") -> JSON:
        return await self.kube.create(
            f"/api/v1/namespaces/{self.ns}/pods",
            pod_manifest(
                f"{gang}-{index}",
                namespace=self.ns,
                cpu=cpu,
                labels={GROUP_LABEL: gang},
                extra_spec={
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "terminationGracePeriodSeconds": 1,
                },
            ),
        )

    async def pod(self, name: str) -> JSON | None:
        return await self.kube.get_or_none(f"/api/v1/namespaces/{self.ns}/pods/{name}")

    async def bound(self, *names: str) -> bool:
        for name in names:
            pod = await self.pod(name)
            if pod is None or not pod["spec"].get("nodeName"):
                return False
            if pod["metadata"].get("deletionTimestamp"):
                return False
        return True

    async def budget(self, name: str) -> JSON | None:
        return await self.kube.get_or_none(
            f"/apis/policy/v1/namespaces/{self.ns}/poddisruptionbudgets/{name}"
        )

    async def event_reasons(self, regarding: str) -> list[str]:
        events = await self.kube.get(f"/apis/events.k8s.io/v1/namespaces/{self.ns}/events")
        return [
            e.get("reason", "")
            for e in events.get("items", [])
            if e.get("regarding", {}).get("name") == regarding
        ]

    def drain(self, node: str, timeout: str) -> Any:
        """kubectl drain; --force because these members are bare pods (it still evicts
        through the Eviction API, which honours budgets)."""
        return self.cluster.kubectl(
            "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force",
            f"--timeout={timeout}", check=False, timeout=120,
        )  # fmt: skip


@pytest.fixture
async def env(cluster: Cluster, kube: Kube) -> AsyncIterator[Env]:
    install(cluster)
    workload = Workload(kube, unique_name("protect"))
    await workload.setup({})
    await workload.add_nodes(4)
    workdir = cluster.dir / f"e2e-{workload.id}"
    config = manifest_config(leaderElection={"leaseName": workload.id})
    replica = Replica(cluster, f"gangsched-{workload.id}", workdir, config).start()
    try:
        await replica.wait_ready()
        yield Env(cluster, kube, workload, replica)
    finally:
        await replica.stop()
        for node in workload.nodes:
            cluster.kubectl("uncordon", node, check=False)
        await workload.cleanup()


async def test_drain_waits_for_a_protected_gang_and_breaks_one_that_opted_out(env: Env) -> None:
    a, b, c, d = env.workload.nodes
    await env.gang("guarded", [a, b], annotations={})
    await env.gang("free", [c, d], annotations={PROTECTION: "false", GRACE: "never"})
    await eventually(
        lambda: env.bound("guarded-0", "guarded-1", "free-0", "free-1"),
        timeout=60,
        what="both gangs bound",
    )
    group = await env.kube.get(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/guarded")

    async def budget_counted() -> JSON | None:
        budget = await env.budget("gang-sigs-guarded")
        status = (budget or {}).get("status") or {}
        return budget if status.get("currentHealthy") == 2 else None

    budget = await eventually(budget_counted, timeout=60, what="the gang's budget, counted")
    assert budget["spec"]["minAvailable"] == 2
    assert budget["spec"]["selector"] == {"matchLabels": {GROUP_LABEL: "guarded"}}
    assert budget["status"]["disruptionsAllowed"] == 0
    owner = budget["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("PodGroup", group["metadata"]["uid"])
    assert await env.budget("gang-sigs-free") is None  # opted out
    assert env.replica.metric("gangsched_protected_gangs") == 1

    started = time.monotonic()
    refused = env.drain(a, "10s")
    waited = time.monotonic() - started
    assert refused.returncode != 0, refused.stdout
    assert "disruption budget" in refused.stderr + refused.stdout, refused.stderr
    assert await env.bound("guarded-0", "guarded-1"), "drain broke a protected gang"
    print(f"drain of {a} refused after {waited:.1f}s; guarded-0 still bound")

    drained = env.drain(c, "30s")
    assert drained.returncode == 0, drained.stderr
    free = await env.pod("free-0")
    assert free is None or free["metadata"].get("deletionTimestamp"), "free-0 not evicted"
    assert await env.bound("free-1")  # the opted-out gang is now below minMember: broken

    async def broken_told() -> bool:
        return "GangBroken" in await env.event_reasons("free")

    await eventually(broken_told, timeout=30, what="GangBroken on the opted-out gang")
    assert env.replica.metric("gangsched_gangs_broken_total") == 1
    assert env.replica.metric("gangsched_stale_gangs_released_total") == 0  # grace: never

    # The group deleted, its budget goes with it (gangsched's review; the GC by ownership).
    await env.kube.delete(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/guarded")
    await env.kube.wait_gone(
        f"/apis/policy/v1/namespaces/{env.ns}/poddisruptionbudgets/gang-sigs-guarded",
        timeout=60,
    )


async def test_gang_on_a_lost_node_is_released_then_scheduled_again_whole(env: Env) -> None:
    a, b, c, _ = env.workload.nodes
    await env.gang("lost", [a, b], annotations={GRACE: "5"})
    await eventually(lambda: env.bound("lost-0", "lost-1"), timeout=60, what="gang bound")
    await eventually(lambda: env.budget("gang-sigs-lost"), timeout=30, what="the gang's budget")
    deleted = time.monotonic()
    await env.kube.delete(f"/api/v1/nodes/{a}")  # the instance died
    env.workload.nodes.remove(a)

    async def released() -> JSON | None:
        survivor = await env.pod("lost-1")
        if survivor is None:
            return {"gone": True}
        target = condition(survivor, "DisruptionTarget")
        return survivor if target and target.get("reason") == "StaleGangReleased" else None

    await eventually(released, timeout=60, what="lost-1 released (DisruptionTarget)")
    release_seconds = time.monotonic() - deleted
    assert release_seconds >= 5, f"released after {release_seconds:.1f}s, before its grace"
    await env.kube.wait_gone(f"/api/v1/namespaces/{env.ns}/pods/lost-1", timeout=60)
    # lost-0's node is gone, so nothing finishes its deletion but the pod GC: do its job.
    await env.kube.delete(f"/api/v1/namespaces/{env.ns}/pods/lost-0", grace_period_seconds=0)
    await env.kube.wait_gone(f"/api/v1/namespaces/{env.ns}/pods/lost-0", timeout=60)
    reasons = await env.event_reasons("lost")
    assert "GangBroken" in reasons and "StaleGangReleased" in reasons, reasons
    assert env.replica.metric("gangsched_stale_gangs_released_total") == 1
    assert await env.budget("gang-sigs-lost") is None

    # The owner recreates both members: scheduled again whole, on the nodes left.
    recreated = time.monotonic()
    await env.member("lost", 0, c)
    await env.member("lost", 1, b)
    await eventually(lambda: env.bound("lost-0", "lost-1"), timeout=60, what="gang bound again")
    print(
        f"node deleted -> released {release_seconds:.1f}s (grace 5s); "
        f"recreated -> bound whole {time.monotonic() - recreated:.1f}s"
    )
    await eventually(
        lambda: env.budget("gang-sigs-lost"), timeout=30, what="protected again once running"
    )


async def test_a_replacement_bound_within_the_grace_period_cancels_the_release(env: Env) -> None:
    a, b, _, _ = env.workload.nodes
    await env.gang("heal", [a, b], annotations={GRACE: "30"})
    await eventually(lambda: env.bound("heal-0", "heal-1"), timeout=60, what="gang bound")
    await eventually(lambda: env.budget("gang-sigs-heal"), timeout=30, what="the budget")
    await env.kube.delete(f"/api/v1/namespaces/{env.ns}/pods/heal-0", grace_period_seconds=0)
    await env.kube.wait_gone(f"/api/v1/namespaces/{env.ns}/pods/heal-0", timeout=30)

    async def broken_told() -> bool:
        return "GangBroken" in await env.event_reasons("heal")

    await eventually(broken_told, timeout=30, what="GangBroken")
    await env.member("heal", 0, a)  # the owner's replacement
    await eventually(lambda: env.bound("heal-0"), timeout=30, what="replacement bound")

    async def recovered() -> bool:
        return "GangRecovered" in await env.event_reasons("heal")

    await eventually(recovered, timeout=30, what="GangRecovered")
    survivor = await env.pod("heal-1")
    assert survivor is not None and condition(survivor, "DisruptionTarget") is None
    assert env.replica.metric("gangsched_stale_gangs_released_total") == 0
    assert env.replica.metric("gangsched_gangs_broken_total") == 1


async def test_a_member_on_a_node_gone_unreachable_counts_lost_until_the_node_is_back(
    env: Env,
) -> None:
    """The node lifecycle controller's unreachable taint (NoExecute) takes the member's place at
    once, not when the taint manager evicts it 300 s later; the node Ready again gives it back."""
    a, b, _, _ = env.workload.nodes
    await env.gang("down", [a, b], annotations={GRACE: "60"})
    await eventually(lambda: env.bound("down-0", "down-1"), timeout=60, what="gang bound")
    await eventually(lambda: env.budget("gang-sigs-down"), timeout=30, what="the budget")
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    await env.kube.patch(f"/api/v1/nodes/{a}", {"spec": {"taints": [unreachable]}})

    async def broken_note() -> str | None:
        events = await env.kube.get(f"/apis/events.k8s.io/v1/namespaces/{env.ns}/events")
        for event in events.get("items", []):
            if event.get("regarding", {}).get("name") == "down" and (
                event.get("reason") == "GangBroken"
            ):
                return str(event.get("note", ""))
        return None

    note = await eventually(broken_note, timeout=30, what="GangBroken")
    assert f"{env.ns}/down-0 (node {a} not ready)" in note, note
    assert await env.budget("gang-sigs-down") is not None  # what is left stays protected
    await env.kube.patch(f"/api/v1/nodes/{a}", {"spec": {"taints": None}})

    async def recovered() -> bool:
        return "GangRecovered" in await env.event_reasons("down")

    await eventually(recovered, timeout=30, what="GangRecovered")
    for name in ("down-0", "down-1"):
        member = await env.pod(name)
        assert member is not None and condition(member, "DisruptionTarget") is None
    assert env.replica.metric("gangsched_stale_gangs_released_total") == 0
