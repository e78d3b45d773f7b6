"""`gangsched run` on a real control plane, as its own ServiceAccount (see operator_fixture).

Every test works in its own namespace on its own kwok nodes (labelled with the test's id and
selected by its pods), so tests share one scheduler process without sharing capacity.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from gangsched.core.quantity import to_milli

from .k8s import JSON, Kube, condition, fake_node, pod_manifest, unique_name, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

SIGS = "scheduling.sigs.k8s.io/v1alpha1"
X_K8S = "scheduling.x-k8s.io/v1alpha1"
UPSTREAM = "scheduling.k8s.io/v1beta1"
HIGH, LOW = "e2e-high", "e2e-low"


class Env:
    """One test's namespace, nodes and helpers."""

    def __init__(self, kube: Kube, sched: Gangsched) -> None:
        self.kube = kube
        self.sched = sched
        self.id = unique_name("t")
        self.ns = self.id
        self.nodes: list[str] = []

    async def setup(self) -> None:
        await self.kube.create_namespace(self.ns, {HIGH: 1_000_000, LOW: 1_000})

    async def add_nodes(self, count: int, cpu: str = "4") -> list[str]:
        names = [f"{self.id}-n{len(self.nodes) + i}" for i in range(count)]
        for name in names:
            await self.kube.create(
                "/api/v1/nodes", fake_node(name, cpu=cpu, labels={"e2e-test": self.id})
            )
        self.nodes += names
        for name in names:
            await self.kube.wait_for_object(
                f"/api/v1/nodes/{name}",
                lambda n: (condition(n, "Ready") or {}).get("status") == "True",
                timeout=90,
                what=f"node {name} Ready",
            )
        return names

    def pod(self, name: str, *, cpu: str, group: str | None = None, **kwargs: Any) -> JSON:
        labels = dict(kwargs.pop("labels", {}) or {})
        if group is not None:
            labels["pod-group.scheduling.sigs.k8s.io"] = group
        extra = dict(kwargs.pop("extra_spec", {}) or {})
        extra.setdefault("nodeSelector", {"e2e-test": self.id})
        extra.setdefault("terminationGracePeriodSeconds", 1)
        return pod_manifest(
            name, namespace=self.ns, cpu=cpu, labels=labels, extra_spec=extra, **kwargs
        )

    def pod_group(self, name: str, min_member: int, **spec: Any) -> JSON:
        return {
            "apiVersion": SIGS,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"minMember": min_member, **spec},
        }

    async def create_pod(self, body: JSON) -> JSON:
        return await self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", body)

    async def pods(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/api/v1/namespaces/{self.ns}/pods"))["items"]
        return {p["metadata"]["name"]: p for p in items}

    async def wait_bound(self, names: list[str], timeout: float = 60.0) -> dict[str, str]:
        async def check() -> dict[str, str] | None:
            pods = await self.pods()
            nodes = {n: (pods.get(n) or {}).get("spec", {}).get("nodeName") for n in names}
            return nodes if all(nodes.values()) else None

        self.sched.assert_alive()
        return await wait_for(check, timeout=timeout, interval=0.3, what=f"{names} bound")

    async def cleanup(self) -> None:
        # The test's pods and PodGroups are removed at once (the namespace controller would
        # take a while, and their retries would load later tests meanwhile).
        for path in (
            f"/api/v1/namespaces/{self.ns}/pods",
            f"/apis/{SIGS}/namespaces/{self.ns}/podgroups",
            f"/apis/{X_K8S}/namespaces/{self.ns}/podgroups",
            f"/apis/{UPSTREAM}/namespaces/{self.ns}/podgroups",
        ):
            await self.kube.delete(path, grace_period_seconds=0)
        for name in self.nodes:
            await self.kube.delete(f"/api/v1/nodes/{name}")
        await self.kube.delete(f"/api/v1/namespaces/{self.ns}")


@pytest.fixture
async def env(kube: Kube, gangsched: Gangsched) -> Any:  # noqa: F811
    e = Env(kube, gangsched)
    await e.setup()
    yield e
    await e.cleanup()


def node_usage(pods: dict[str, JSON]) -> dict[str, int]:
    used: dict[str, int] = defaultdict(int)
    for pod in pods.values():
        node = pod["spec"].get("nodeName")
        if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            for c in pod["spec"]["containers"]:
                used[node] += to_milli(c["resources"]["requests"]["cpu"])
    return used


async def test_seed_walkthrough_preempts_both_and_binds_one_per_node(env: Env) -> None:
    n1, n2 = await env.add_nodes(2, cpu="4")
    for i, node in enumerate((n1, n2), start=1):
        await env.create_pod(
            env.pod(
                f"lp-pod-{i}",
                cpu="4",
                scheduler_name="other",
                priority_class_name=LOW,
                node_name=node,
            )
        )
    await env.kube.create(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups",
        env.pod_group("hp-training-job", 2, scheduleTimeoutSeconds=300),
    )
    for i in (1, 2):
        await env.create_pod(
            env.pod(f"hp-worker-{i}", cpu="3", group="hp-training-job", priority_class_name=HIGH)
        )

    # Victims get the DisruptionTarget condition naming the gang, then go away.
    seen: dict[str, str] = {}

    async def victims_marked_or_gone() -> bool:
        pods = await env.pods()
        for name in ("lp-pod-1", "lp-pod-2"):
            cond = condition(pods[name], "DisruptionTarget") if name in pods else None
            if cond:
                seen[name] = f"{cond['reason']}|{cond['message']}"
        return len(seen) == 2 or not ({"lp-pod-1", "lp-pod-2"} & set(pods))

    await wait_for(victims_marked_or_gone, timeout=60, interval=0.1, what="victims marked")
    for text in seen.values():
        reason, message = text.split("|", 1)
        assert reason == "PreemptionByScheduler"
        assert message.startswith(
            "gangsched: preempting to accommodate a higher priority pod group, "
            f"preemptor: {env.ns}/hp-training-job, triggerpod: {env.ns}/hp-worker-"
        )
    bound = await env.wait_bound(["hp-worker-1", "hp-worker-2"], timeout=90)
    assert sorted(bound.values()) == sorted([n1, n2]), "one member per node"
    pods = await env.pods()
    assert "lp-pod-1" not in pods and "lp-pod-2" not in pods

    async def preempted_events() -> list[JSON] | None:
        # Posted after each eviction, on their own: the gang may be bound before both are.
        events = await env.kube.get(
            f"/apis/events.k8s.io/v1/namespaces/{env.ns}/events", fieldSelector="reason=Preempted"
        )
        items: list[JSON] = events["items"]
        victims = {e["regarding"]["name"] for e in items}
        return items if {"lp-pod-1", "lp-pod-2"} <= victims else None

    events = await wait_for(preempted_events, timeout=60, what="a Preempted event on each victim")
    related = {e.get("related", {}).get("name") for e in events}
    assert related == {"hp-training-job"}


async def test_gang_that_cannot_fit_reports_then_binds_whole_when_capacity_appears(
    env: Env,
) -> None:
    await env.add_nodes(1, cpu="4")
    await env.kube.create(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", env.pod_group("big", 3))
    names = [f"big-{i}" for i in range(3)]
    for name in names:
        await env.create_pod(env.pod(name, cpu="2", group="big"))

    async def reported() -> JSON | None:
        # Unschedulable on every member (a member created late on a loaded machine may first
        # say the gang waits for members: NotReadyForScheduling, then Unschedulable).
        pods = await env.pods()
        conds = [condition(pods[n], "PodScheduled") or {} for n in names]
        states = {(c.get("status"), c.get("reason")) for c in conds}
        return pods if states == {("False", "Unschedulable")} else None

    pods = await wait_for(reported, timeout=60, what="PodScheduled=False/Unschedulable on all")
    cond = condition(pods["big-0"], "PodScheduled") or {}
    assert cond["reason"] == "Unschedulable"
    assert "minCount (3) cannot be satisfied" in cond["message"]
    assert "Insufficient cpu" in cond["message"]
    assert not any(p["spec"].get("nodeName") for p in pods.values())
    # The group's status is its own write and may still hold an earlier verdict: wait for
    # Unschedulable there too.
    group = await env.kube.wait_for_object(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/big",
        lambda g: (condition(g, "PodGroupScheduled") or {}).get("reason") == "Unschedulable",
        what="PodGroup condition Unschedulable",
    )
    assert (condition(group, "PodGroupScheduled") or {})["status"] == "False"

    async def group_event() -> bool:
        # Events are posted on their own, not with the status: wait for the PodGroup's.
        events = await env.kube.get(
            f"/apis/events.k8s.io/v1/namespaces/{env.ns}/events",
            fieldSelector="reason=FailedScheduling",
        )
        return any(e["regarding"]["kind"] == "PodGroup" for e in events["items"])

    await wait_for(group_event, timeout=60, what="a FailedScheduling event on the PodGroup")

    await env.add_nodes(1, cpu="4")
    bound = await env.wait_bound(names, timeout=60)
    assert len(bound) == 3
    group = await env.kube.wait_for_object(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/big",
        lambda g: g.get("status", {}).get("scheduled") == 3,
        what="PodGroup status.scheduled=3",
    )
    assert group["status"]["phase"] in ("Scheduled", "Running")


async def test_members_created_one_by_one_bind_only_when_min_member_exist(env: Env) -> None:
    await env.add_nodes(1, cpu="8")
    await env.kube.create(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", env.pod_group("slow", 3))
    for i in range(2):
        await env.create_pod(env.pod(f"slow-{i}", cpu="1", group="slow"))
        await asyncio.sleep(2.0)
        pods = await env.pods()
        assert not any(p["spec"].get("nodeName") for p in pods.values()), "bound too early"
    # The waiting condition is written once the gang has waited a few seconds.
    pod = await env.kube.wait_for_object(
        f"/api/v1/namespaces/{env.ns}/pods/slow-0",
        lambda p: bool(condition(p, "PodScheduled")),
        timeout=60,
        what="PodScheduled condition on a waiting member",
    )
    cond = condition(pod, "PodScheduled") or {}
    assert "is waiting for its members: minMember 3" in cond.get("message", ""), cond
    # Waiting is not unschedulable: autoscalers add nodes for Unschedulable pods only.
    assert (cond["status"], cond["reason"]) == ("False", "NotReadyForScheduling"), cond
    group = await env.kube.wait_for_object(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/slow",
        lambda g: (
            "waiting for 1 more" in (condition(g, "PodGroupScheduled") or {}).get("message", "")
        ),
        what="PodGroup condition with the member count",
    )
    assert group["status"]["phase"] == "Pending"
    assert (condition(group, "PodGroupScheduled") or {})["reason"] == "NotReadyForScheduling"

    async def waiting_event() -> bool:
        events = await env.kube.get(
            f"/apis/events.k8s.io/v1/namespaces/{env.ns}/events",
            fieldSelector="reason=NotReadyForScheduling",
        )
        return any(e["regarding"]["name"] == "slow" for e in events["items"])

    await wait_for(waiting_event, timeout=60, what="a NotReadyForScheduling event on the group")
    pods = await env.pods()
    assert not any(
        c.get("reason") == "Unschedulable"
        for p in pods.values()
        for c in p.get("status", {}).get("conditions", [])
    )
    await env.create_pod(env.pod("slow-2", cpu="1", group="slow"))
    bound = await env.wait_bound(["slow-0", "slow-1", "slow-2"])
    assert len(bound) == 3


async def test_members_beyond_the_quorum_bind_first_then_preempt(env: Env) -> None:
    """kube-scheduler's "Binding first before preemption" on the live cluster (issue 19 item
    1): the quorum is bound, two more members arrive with room for one; that one binds, the
    other preempts the low-priority pod, and the group's condition stays Scheduled."""
    (node,) = await env.add_nodes(1, cpu="4")
    await env.create_pod(
        env.pod("low", cpu="1", scheduler_name="other", priority_class_name=LOW, node_name=node)
    )
    await env.kube.create(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups",
        env.pod_group("g", 2, priorityClassName=HIGH),
    )
    for i in (1, 2):
        await env.create_pod(env.pod(f"g-{i}", cpu="1", group="g", priority_class_name=HIGH))
    await env.wait_bound(["g-1", "g-2"])
    for i in (3, 4):
        await env.create_pod(env.pod(f"g-{i}", cpu="1", group="g", priority_class_name=HIGH))

    marked: dict[str, str] = {}

    async def victim_marked_or_gone() -> bool:
        pods = await env.pods()
        cond = condition(pods["low"], "DisruptionTarget") if "low" in pods else None
        if cond:
            marked["message"] = cond["message"]
        return bool(marked) or "low" not in pods

    await wait_for(victim_marked_or_gone, timeout=60, interval=0.1, what="low preempted")
    bound = await env.wait_bound(["g-1", "g-2", "g-3", "g-4"], timeout=90)
    assert set(bound.values()) == {node}
    pods = await env.pods()
    assert "low" not in pods
    if marked:
        assert f"preemptor: {env.ns}/g, triggerpod: {env.ns}/g-" in marked["message"]
    assert node_usage(pods)[node] <= 4000
    # The status writer runs on its own queue: wait for it rather than read it once.
    await env.kube.wait_for_object(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/g",
        lambda g: (condition(g, "PodGroupScheduled") or {}).get("status") == "True",
        timeout=60,
        what="PodGroupScheduled=True on g",
    )


async def test_a_gang_with_a_gated_member_binds_nothing_until_the_gate_goes(env: Env) -> None:
    """Issue 12 section 1 on the real API server: nothing bound, no Unschedulable anywhere,
    the API server's SchedulingGated condition untouched; removing the gate (with a narrower
    nodeSelector, as Kueue's topology ungater does) binds the whole gang at once."""
    first, second = await env.add_nodes(2, cpu="4")
    await env.kube.create(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", env.pod_group("job", 3))
    gate = "kueue.x-k8s.io/admission"
    for i in range(3):
        extra = {"schedulingGates": [{"name": gate}]} if i == 2 else {}
        await env.create_pod(env.pod(f"job-{i}", cpu="1", group="job", extra_spec=extra))
    group = await env.kube.wait_for_object(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/job",
        lambda g: "gated" in (condition(g, "PodGroupScheduled") or {}).get("message", ""),
        timeout=60,
        what="the PodGroup saying a member is gated",
    )
    cond = condition(group, "PodGroupScheduled") or {}
    assert cond["reason"] == "NotReadyForScheduling", cond
    assert f"1 member gated: {gate} (job-2)" in cond["message"], cond
    # Past the 5 s waiting delay: the ungated members say why they wait, never Unschedulable.
    await env.kube.wait_for_object(
        f"/api/v1/namespaces/{env.ns}/pods/job-0",
        lambda p: (condition(p, "PodScheduled") or {}).get("reason") == "NotReadyForScheduling",
        timeout=60,
        what="job-0 NotReadyForScheduling",
    )
    pods = await env.pods()
    assert not any(p["spec"].get("nodeName") for p in pods.values()), "bound while gated"
    gated = condition(pods["job-2"], "PodScheduled") or {}
    assert (gated.get("status"), gated.get("reason")) == ("False", "SchedulingGated"), gated
    assert not any(
        c.get("reason") == "Unschedulable"
        for p in pods.values()
        for c in p.get("status", {}).get("conditions", [])
    )
    # One update removes the gate and pins the pod to the second node.
    await env.kube.request(
        "PATCH",
        f"/api/v1/namespaces/{env.ns}/pods/job-2",
        [
            {"op": "remove", "path": "/spec/schedulingGates"},
            {"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1hostname", "value": second},
        ],
        content_type="application/json-patch+json",
    )
    bound = await env.wait_bound(["job-0", "job-1", "job-2"], timeout=60)
    assert bound["job-2"] == second
    assert set(bound.values()) <= {first, second}


async def test_upstream_and_x_k8s_dialects_are_gang_scheduled(env: Env) -> None:
    await env.add_nodes(2, cpu="4")
    await env.kube.create(
        f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups",
        {
            "apiVersion": UPSTREAM,
            "kind": "PodGroup",
            "metadata": {"name": "up", "namespace": env.ns},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        },
    )
    await env.kube.create(
        f"/apis/{X_K8S}/namespaces/{env.ns}/podgroups",
        {
            "apiVersion": X_K8S,
            "kind": "PodGroup",
            "metadata": {"name": "xk", "namespace": env.ns},
            "spec": {"minMember": 2},
        },
    )
    for i in range(2):
        await env.create_pod(
            env.pod(f"up-{i}", cpu="1", extra_spec={"schedulingGroup": {"podGroupName": "up"}})
        )
        await env.create_pod(
            env.pod(f"xk-{i}", cpu="1", labels={"scheduling.x-k8s.io/pod-group": "xk"})
        )
    bound = await env.wait_bound(["up-0", "up-1", "xk-0", "xk-1"], timeout=90)
    assert len(bound) == 4


async def test_many_gangs_of_mixed_sizes_and_priorities_fit_whole_without_overcommit(
    env: Env,
) -> None:
    await env.add_nodes(4, cpu="8")  # 32 CPUs
    sizes = [2, 3, 4, 5, 6, 8, 3, 2, 7, 4]  # 44 pods of 1 CPU: not all gangs fit
    for g, size in enumerate(sizes):
        name = f"g{g}"
        await env.kube.create(
            f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", env.pod_group(name, size)
        )
        for m in range(size):
            await env.create_pod(
                env.pod(
                    f"{name}-{m}",
                    cpu="1",
                    group=name,
                    priority_class_name=HIGH if g % 3 == 0 else LOW,
                )
            )

    # Most gangs bound, and then the placement settled: nothing terminating and the same pods
    # on the same nodes over three polls 2.5 s apart (a preemption or a gang's binds can still
    # be under way when 28 pods show bound; a pending gang is retried within the 2 s backoff).
    previous: frozenset[tuple[str, str]] | None = None
    stable = 0

    async def settled() -> dict[str, JSON] | None:
        nonlocal previous, stable
        pods = await env.pods()
        bound = frozenset(
            (n, p["spec"]["nodeName"]) for n, p in pods.items() if p["spec"].get("nodeName")
        )
        terminating = any(p["metadata"].get("deletionTimestamp") for p in pods.values())
        quiet = bound == previous and not terminating and len(bound) >= 28
        stable = stable + 1 if quiet else 0
        previous = bound
        return pods if stable >= 2 else None

    pods = await wait_for(settled, timeout=180, interval=2.5, what="most gangs bound and settled")
    per_group: dict[str, int] = defaultdict(int)
    existing: dict[str, int] = defaultdict(int)
    for name, pod in pods.items():
        existing[name.split("-")[0]] += 1
        if pod["spec"].get("nodeName"):
            per_group[name.split("-")[0]] += 1
    for g, size in enumerate(sizes):
        bound, left = per_group.get(f"g{g}", 0), existing.get(f"g{g}", 0)
        # All or nothing when placed; a Single-mode gang may later lose members to a
        # higher-priority gang's preemption (those pods are deleted, not left pending).
        assert bound in (0, left), f"g{g}: {bound} of {left} remaining members bound"
        if left < size:
            assert g % 3 != 0, f"high-priority g{g} lost members to preemption"
            assert bound == left
    for node, used in node_usage(pods).items():
        assert used <= 8000, f"{node} overcommitted: {used}m"
    free = 32 - sum(per_group.values())
    unplaced = [s for g, s in enumerate(sizes) if per_group.get(f"g{g}", 0) == 0]
    assert all(s > free for s in unplaced), "a gang that fits was left pending"
    high = [g for g in range(len(sizes)) if g % 3 == 0]
    assert all(per_group.get(f"g{g}", 0) == sizes[g] for g in high), "high gangs run whole"


async def test_schedule_timeout_is_reported_and_the_gang_keeps_being_retried(env: Env) -> None:
    await env.add_nodes(1, cpu="2")
    await env.kube.create(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups",
        env.pod_group("late", 2, scheduleTimeoutSeconds=2),
    )
    for i in range(2):
        await env.create_pod(env.pod(f"late-{i}", cpu="2", group="late"))
    group = await env.kube.wait_for_object(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/late",
        lambda g: (condition(g, "PodGroupScheduleTimeout") or {}).get("status") == "True",
        timeout=60,
        what="PodGroupScheduleTimeout condition",
    )
    assert (
        "scheduleTimeoutSeconds (2s)"
        in (condition(group, "PodGroupScheduleTimeout") or {})["message"]
    )

    async def timeout_events() -> list[JSON] | None:
        # The event is posted on its own, beside the status write that set the condition.
        events = await env.kube.get(
            f"/apis/events.k8s.io/v1/namespaces/{env.ns}/events",
            fieldSelector="reason=ScheduleTimeout",
        )
        items: list[JSON] = events["items"]
        return items or None

    events = await wait_for(timeout_events, timeout=60, what="a ScheduleTimeout event")
    assert [e["type"] for e in events] == ["Warning"]
    # Still retried: capacity appears, the gang binds and the timeout condition clears.
    await env.add_nodes(1, cpu="2")
    await env.wait_bound(["late-0", "late-1"], timeout=60)
    await env.kube.wait_for_object(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/late",
        lambda g: (condition(g, "PodGroupScheduleTimeout") or {}).get("status") == "False",
        timeout=60,
        what="timeout condition cleared",
    )
