"""Kubernetes 1.37's workload API on a real kube-apiserver: the PodGroupInitiallyScheduled
condition exactly as kube-scheduler writes it, scheduler-plugins' phases on
scheduling.x-k8s.io, and status writes that leave other writers' conditions alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .k8s import JSON, Kube, condition, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_operator import SIGS, UPSTREAM, X_K8S, Env

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

INITIALLY = "PodGroupInitiallyScheduled"
THEIRS = "example.com/Audited"


@pytest.fixture
async def env(kube: Kube, gangsched: Gangsched) -> Any:  # noqa: F811
    e = Env(kube, gangsched)
    await e.setup()
    yield e
    await e.cleanup()


def upstream_group(env: Env, name: str, min_count: int) -> JSON:
    return {
        "apiVersion": UPSTREAM,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": env.ns},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def member(env: Env, name: str, group: str, cpu: str) -> JSON:
    return env.pod(name, cpu=cpu, extra_spec={"schedulingGroup": {"podGroupName": group}})


def their_condition(status: str, message: str) -> JSON:
    return {
        "type": THEIRS,
        "status": status,
        "reason": "Checked",
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def managers_of(obj: JSON, condition_type: str) -> set[str]:
    """Field managers owning the given condition (from metadata.managedFields)."""
    key = f'k:{{"type":"{condition_type}"}}'
    owners = set()
    for entry in obj["metadata"].get("managedFields") or []:
        conditions = ((entry.get("fieldsV1") or {}).get("f:status") or {}).get("f:conditions")
        if isinstance(conditions, dict) and key in conditions:
            owners.add(entry["manager"])
    return owners


async def test_upstream_condition_is_kube_schedulers_and_other_conditions_survive(
    env: Env,
) -> None:
    await env.add_nodes(1, cpu="4")
    path = f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups"
    await env.kube.create(path, upstream_group(env, "train", 2))
    group_path = f"{path}/train"
    for i in range(2):
        await env.create_pod(member(env, f"train-{i}", "train", cpu="3"))

    def initially(status: str) -> Any:
        return lambda g: (condition(g, INITIALLY) or {}).get("status") == status

    def unschedulable(g: JSON) -> bool:
        # The verdict on both members (not one written while the second was still arriving).
        found = condition(g, INITIALLY) or {}
        return found.get("status") == "False" and "Insufficient cpu" in found.get("message", "")

    group = await env.kube.wait_for_object(
        group_path, unschedulable, timeout=60, what="PodGroupInitiallyScheduled=False, no cpu"
    )
    mine = condition(group, INITIALLY) or {}
    assert mine["reason"] == "Unschedulable"
    # observedGeneration is metadata.generation, which the 1.37 API server never sets on a
    # PodGroup (its strategy does not): 0, omitted, exactly as kube-scheduler's patch leaves it.
    assert mine.get("observedGeneration", 0) == group["metadata"].get("generation", 0)
    assert "Insufficient cpu" in mine["message"]
    assert condition(group, "PodGroupScheduled") is None, "the 1.36 type is gone"
    assert "phase" not in (group.get("status") or {}), "upstream PodGroups have no phase"
    assert managers_of(group, INITIALLY) == {"gangsched"}

    # Another controller writes its own condition (a strategic merge patch by type).
    await env.kube.patch(
        f"{group_path}/status",
        {"status": {"conditions": [their_condition("True", "first look")]}},
        kind="strategic",
        fieldManager="auditor",
    )
    # Capacity appears: the gang binds, the condition turns True once and for all.
    await env.add_nodes(1, cpu="4")
    await env.wait_bound(["train-0", "train-1"], timeout=90)
    group = await env.kube.wait_for_object(
        group_path, initially("True"), timeout=60, what="PodGroupInitiallyScheduled=True"
    )
    mine = condition(group, INITIALLY) or {}
    assert mine["reason"] == "Scheduled"
    assert mine.get("observedGeneration", 0) == group["metadata"].get("generation", 0)
    theirs = condition(group, THEIRS) or {}
    assert theirs.get("message") == "first look", "our writes erased another writer's condition"

    # They update theirs between our writes; an extra member that does not fit makes us
    # write again (the cycle fails) but the condition stays True and theirs stays too.
    await env.kube.patch(
        f"{group_path}/status",
        {"status": {"conditions": [their_condition("False", "second look")]}},
        kind="strategic",
        fieldManager="auditor",
    )
    await env.create_pod(member(env, "train-2", "train", cpu="3"))
    await env.kube.wait_for_object(
        f"/api/v1/namespaces/{env.ns}/pods/train-2",
        lambda p: (condition(p, "PodScheduled") or {}).get("status") == "False",
        timeout=60,
        what="the extra member reported unschedulable",
    )
    await asyncio.sleep(3)  # a status sweep (every 2 s) has run since
    group = await env.kube.get(group_path)
    mine = condition(group, INITIALLY) or {}
    assert (mine["status"], mine["reason"]) == ("True", "Scheduled"), "never back to False"
    assert (condition(group, THEIRS) or {}).get("message") == "second look"
    assert managers_of(group, THEIRS) == {"auditor"}


async def test_sigs_status_writes_leave_other_conditions_alone(env: Env) -> None:
    await env.add_nodes(1, cpu="4")
    path = f"/apis/{SIGS}/namespaces/{env.ns}/podgroups"
    await env.kube.create(path, env.pod_group("g", 2))
    group_path = f"{path}/g"
    await env.create_pod(env.pod("g-0", cpu="1", group="g"))
    group = await env.kube.wait_for_object(
        group_path,
        lambda g: (condition(g, "PodGroupScheduled") or {}).get("status") == "False",
        timeout=60,
        what="PodGroupScheduled=False while a member is missing",
    )
    # A CRD's objects have a generation (1 at creation): observedGeneration carries it.
    assert (condition(group, "PodGroupScheduled") or {})["observedGeneration"] == 1
    await env.kube.patch(group_path, {"spec": {"scheduleTimeoutSeconds": 600}})
    group = await env.kube.wait_for_object(
        group_path,
        lambda g: (condition(g, "PodGroupScheduled") or {}).get("observedGeneration") == 2,
        timeout=60,
        what="observedGeneration 2 after a spec change",
    )
    # Another writer appends its condition with a JSON patch (CRDs take no strategic merge).
    append = [{"op": "add", "path": "/status/conditions/-", "value": their_condition("True", "hi")}]
    await env.kube.request(
        "PATCH",
        f"{group_path}/status",
        append,
        query={"fieldManager": "auditor"},
        content_type="application/json-patch+json",
    )
    await env.create_pod(env.pod("g-1", cpu="1", group="g"))
    await env.wait_bound(["g-0", "g-1"])
    group = await env.kube.wait_for_object(
        group_path,
        # The count follows the binds the scheduler has seen: wait for both with the condition.
        lambda g: (
            (condition(g, "PodGroupScheduled") or {}).get("status") == "True"
            and (g.get("status") or {}).get("scheduled") == 2
        ),
        timeout=60,
        what="PodGroupScheduled=True and scheduled 2",
    )
    assert group["status"]["scheduled"] == 2
    assert (condition(group, THEIRS) or {}).get("message") == "hi"


async def test_x_k8s_phases_are_scheduler_plugins(env: Env) -> None:
    await env.add_nodes(1, cpu="4")
    path = f"/apis/{X_K8S}/namespaces/{env.ns}/podgroups"
    await env.kube.create(
        path,
        {
            "apiVersion": X_K8S,
            "kind": "PodGroup",
            "metadata": {"name": "xk", "namespace": env.ns},
            "spec": {"minMember": 2},
        },
    )
    await env.create_pod(env.pod("xk-0", cpu="1", labels={"scheduling.x-k8s.io/pod-group": "xk"}))

    async def phase_is(phase: str) -> JSON | None:
        status: JSON = (await env.kube.get(f"{path}/xk")).get("status") or {}
        return status if status.get("phase") == phase else None

    pending = await wait_for(lambda: phase_is("Pending"), timeout=60, what="xk Pending")
    assert pending is not None
    assert "conditions" not in pending and "scheduled" not in pending
    await env.create_pod(env.pod("xk-1", cpu="1", labels={"scheduling.x-k8s.io/pod-group": "xk"}))
    await env.wait_bound(["xk-0", "xk-1"])
    # kwok marks bound pods Running: scheduler-plugins' Running needs running >= minMember.
    running = await wait_for(lambda: phase_is("Running"), timeout=60, what="xk Running")
    assert running is not None
    assert (running["running"], running["succeeded"], running["failed"]) == (2, 0, 0)
