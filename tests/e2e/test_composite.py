"""CompositePodGroup trees on a real kube-apiserver (1.37, gates CompositePodGroup and
TopologyAwareWorkloadScheduling on, scheduling.k8s.io/v1alpha3 served): a 3-level tree binds
whole or not at all, and every level shows CompositePodGroupInitiallyScheduled (or, for the
PodGroups, PodGroupInitiallyScheduled) as kube-scheduler 1.38 writes it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .harness import eventually
from .k8s import JSON, Kube, condition
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_explain import explain_json
from .test_operator import UPSTREAM, Env

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

COMPOSITE = "scheduling.k8s.io/v1alpha3"
CPG_CONDITION = "CompositePodGroupInitiallyScheduled"
PG_CONDITION = "PodGroupInitiallyScheduled"
#: job (gang of 2 children) -> slices (gang of 2: s1, s2, 2 pods each) and head (basic).
TREE_PODS = ["s1-0", "s1-1", "s2-0", "s2-1", "head-0"]


@pytest.fixture
async def env(kube: Kube, gangsched: Gangsched) -> Any:  # noqa: F811
    e = Env(kube, gangsched)
    await e.setup()
    yield e
    await e.kube.delete(
        f"/apis/{COMPOSITE}/namespaces/{e.ns}/compositepodgroups", grace_period_seconds=0
    )
    await e.cleanup()


def composite(env: Env, name: str, min_groups: int | None, parent: str | None = None) -> JSON:
    policy = {"gang": {"minGroupCount": min_groups}} if min_groups else {"basic": {}}
    spec: JSON = {
        "schedulingPolicy": policy,
        "workloadRef": {"workloadName": "job", "templateName": name},
    }
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    return {
        "apiVersion": COMPOSITE,
        "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": env.ns},
        "spec": spec,
    }


def leaf(env: Env, name: str, min_count: int | None, parent: str) -> JSON:
    policy = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    return {
        "apiVersion": UPSTREAM,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": env.ns},
        "spec": {
            "schedulingPolicy": policy,
            "parentCompositePodGroupName": parent,
            "workloadRef": {"workloadName": "job", "templateName": name},
        },
    }


async def create_tree(env: Env) -> None:
    cpgs = f"/apis/{COMPOSITE}/namespaces/{env.ns}/compositepodgroups"
    pgs = f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups"
    await env.kube.create(cpgs, composite(env, "job", 2))
    await env.kube.create(cpgs, composite(env, "slices", 2, parent="job"))
    for name, count, parent in (("s1", 2, "slices"), ("s2", 2, "slices"), ("head", None, "job")):
        await env.kube.create(pgs, leaf(env, name, count, parent))
    for name in TREE_PODS:
        group = name.rpartition("-")[0]
        await env.create_pod(
            env.pod(name, cpu="1", extra_spec={"schedulingGroup": {"podGroupName": group}})
        )


def state(obj: JSON, type_: str) -> tuple[str, str]:
    found = condition(obj, type_) or {}
    return str(found.get("status", "")), str(found.get("reason", ""))


async def test_a_three_level_tree_binds_whole_or_not_at_all(env: Env) -> None:
    # Room for 4 of the 5 pods: every level but one could fit, so nothing may bind.
    await env.add_nodes(1, cpu="4")
    await create_tree(env)
    cpg_path = f"/apis/{COMPOSITE}/namespaces/{env.ns}/compositepodgroups"
    job = await env.kube.wait_for_object(
        f"{cpg_path}/job",
        lambda g: state(g, CPG_CONDITION) == ("False", "Unschedulable"),
        timeout=90,
        what="job CompositePodGroupInitiallyScheduled=False/Unschedulable",
    )
    found = condition(job, CPG_CONDITION) or {}
    assert found.get("observedGeneration", 0) == job["metadata"].get("generation", 0)
    assert "minGroupCount (2) cannot be satisfied" in found["message"], found
    # Each level's status is its own write: wait for the inner one too.
    await env.kube.wait_for_object(
        f"{cpg_path}/slices",
        lambda g: state(g, CPG_CONDITION)[0] == "False",
        timeout=60,
        what="slices CompositePodGroupInitiallyScheduled=False",
    )
    await asyncio.sleep(3)  # a few more cycles: still nothing of the tree may be bound
    pods = await env.pods()
    bound = {name: pods[name]["spec"].get("nodeName") for name in TREE_PODS}
    assert not any(bound.values()), f"part of the tree was bound: {bound}"

    async def members_unschedulable() -> bool:
        # The pods' conditions are written apart from the groups' status (and a member that
        # arrived late may first have said it waits for the others): wait for Unschedulable
        # on all, nothing bound meanwhile.
        pods = await env.pods()
        bound = {name: pods[name]["spec"].get("nodeName") for name in TREE_PODS}
        assert not any(bound.values()), f"part of the tree was bound: {bound}"
        states = {state(pods[name], "PodScheduled") for name in TREE_PODS}
        return states == {("False", "Unschedulable")}

    await eventually(members_unschedulable, timeout=60, what="every member Unschedulable")

    # `gangsched explain` on the live cluster shows the tree and the level that fails.
    explained = await explain_json(f"{env.ns}/job", kubeconfig=env.sched.kubeconfig)
    levels = {level["name"].rpartition("/")[2]: level for level in explained["tree"]}
    assert set(levels) == {"job", "slices", "s1", "s2", "head"}, explained["tree"]
    assert levels["job"]["kind"] == "CompositePodGroup" and levels["job"]["depth"] == 0
    assert levels["s1"]["depth"] == 2
    assert explained["result"] == "unschedulable", explained["message"]
    assert "minGroupCount (2) cannot be satisfied" in levels["job"]["message"]

    # Room for all: the whole tree binds and every level turns True/Scheduled.
    await env.add_nodes(1, cpu="4")
    nodes = await env.wait_bound(TREE_PODS, timeout=120)
    assert set(nodes) == set(TREE_PODS)
    for name in ("job", "slices"):
        group = await env.kube.wait_for_object(
            f"{cpg_path}/{name}",
            lambda g: state(g, CPG_CONDITION) == ("True", "Scheduled"),
            timeout=60,
            what=f"{name} CompositePodGroupInitiallyScheduled=True",
        )
        found = condition(group, CPG_CONDITION) or {}
        assert found.get("observedGeneration", 0) == group["metadata"].get("generation", 0)
    pg_path = f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups"
    for name in ("s1", "s2", "head"):
        await env.kube.wait_for_object(
            f"{pg_path}/{name}",
            lambda g: state(g, PG_CONDITION) == ("True", "Scheduled"),
            timeout=60,
            what=f"{name} PodGroupInitiallyScheduled=True",
        )


async def test_a_cycle_of_parents_is_reported_on_the_objects_and_nothing_binds(env: Env) -> None:
    await env.add_nodes(1, cpu="4")
    cpgs = f"/apis/{COMPOSITE}/namespaces/{env.ns}/compositepodgroups"
    await env.kube.create(cpgs, composite(env, "a", 1, parent="b"))
    await env.kube.create(cpgs, composite(env, "b", 1, parent="a"))
    await env.kube.create(
        f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups", leaf(env, "g", None, "a")
    )
    await env.create_pod(
        env.pod("g-0", cpu="1", extra_spec={"schedulingGroup": {"podGroupName": "g"}})
    )
    broken = await env.kube.wait_for_object(
        f"{cpgs}/a",
        lambda g: state(g, CPG_CONDITION) == ("False", "CompositePodGroupError"),
        timeout=90,
        what="a CompositePodGroupInitiallyScheduled=False/CompositePodGroupError",
    )
    assert "cycle of parent references" in (condition(broken, CPG_CONDITION) or {})["message"]
    pods = await env.pods()
    assert pods["g-0"]["spec"].get("nodeName") is None


async def test_a_tree_whose_minimum_is_met_stays_scheduled_while_an_extra_child_fits_nowhere(
    env: Env,
) -> None:
    """Issue 29 item 6: a gang root (minGroupCount 2) over three PodGroups of minCount 2, one
    of which never fits. The two that fit bind, and the root and both of them say
    True/Scheduled (not the requeued attempt's "satisfied by its bound members, but none of
    the pending pods fits"), and keep saying it, same transition time, while the attempts for
    the third go on; the third alone is False/Unschedulable, with its own reason."""
    await env.add_nodes(1, cpu="4")
    cpgs = f"/apis/{COMPOSITE}/namespaces/{env.ns}/compositepodgroups"
    pgs = f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups"
    await env.kube.create(cpgs, composite(env, "root", 2))
    for name in ("a", "b", "c"):
        await env.kube.create(pgs, leaf(env, name, 2, "root"))
    for name, cpu in (("a", "1"), ("b", "1"), ("c", "8")):  # c: more than any node has
        for i in range(2):
            await env.create_pod(
                env.pod(
                    f"{name}-{i}", cpu=cpu, extra_spec={"schedulingGroup": {"podGroupName": name}}
                )
            )
    fitting = ["a-0", "a-1", "b-0", "b-1"]
    await env.wait_bound(fitting, timeout=90)

    def scheduled(obj: JSON, type_: str) -> bool:
        return state(obj, type_) == ("True", "Scheduled")

    root = await env.kube.wait_for_object(
        f"{cpgs}/root",
        lambda g: scheduled(g, CPG_CONDITION),
        timeout=60,
        what="root CompositePodGroupInitiallyScheduled=True/Scheduled",
    )
    held = {"root": condition(root, CPG_CONDITION)}
    for name in ("a", "b"):
        group = await env.kube.wait_for_object(
            f"{pgs}/{name}",
            lambda g: scheduled(g, PG_CONDITION),
            timeout=60,
            what=f"{name} PodGroupInitiallyScheduled=True/Scheduled",
        )
        held[name] = condition(group, PG_CONDITION)

    def unschedulable_for_cpu(obj: JSON) -> bool:
        # An attempt that saw only c-0 (c-1 not created yet) says "1 of minCount 2 pods"
        # first; the reason that must follow, with both members, is c's own cpu.
        found = condition(obj, PG_CONDITION) or {}
        return state(obj, PG_CONDITION) == ("False", "Unschedulable") and (
            "Insufficient cpu" in str(found.get("message", ""))
        )

    extra = await env.kube.wait_for_object(
        f"{pgs}/c",
        unschedulable_for_cpu,
        timeout=60,
        what="c PodGroupInitiallyScheduled=False/Unschedulable, Insufficient cpu",
    )

    # Later attempts for c (backoff at most 2 s here) change none of the three conditions.
    await asyncio.sleep(8)
    assert condition(await env.kube.get(f"{cpgs}/root"), CPG_CONDITION) == held["root"]
    for name in ("a", "b"):
        assert condition(await env.kube.get(f"{pgs}/{name}"), PG_CONDITION) == held[name], name
    extra = await env.kube.get(f"{pgs}/c")
    assert state(extra, PG_CONDITION) == ("False", "Unschedulable"), extra
    pods = await env.pods()
    assert all(pods[name]["spec"].get("nodeName") for name in fitting)
    assert not any(pods[f"c-{i}"]["spec"].get("nodeName") for i in range(2))
    assert state(pods["c-0"], "PodScheduled") == ("False", "Unschedulable")
