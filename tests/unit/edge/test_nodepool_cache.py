"""Karpenter's NodePools in the cluster state (edge/nodepool_cache.py): read from their JSON,
a change of limit or usage retries waiting gangs, an unreadable one is reported and limits
nothing."""

from __future__ import annotations

from gangsched.core.autoscaling_room import NODE_POOL_LIMIT_REACHED
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SetCondition
from gangsched.core.scheduler import CycleReport, Scheduler
from gangsched.edge.cache import ClusterCache
from gangsched.edge.kube import JSON
from tests.builders import raw_node, raw_pod, raw_pod_group


def raw_pool(name: str, *, cpu_limit: str, used_cpu: str = "0") -> JSON:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"limits": {"cpu": cpu_limit}, "template": {"spec": {"requirements": []}}},
        "status": {"resources": {"cpu": used_cpu}},
    }


def make() -> tuple[ClusterCache, Scheduler, list[bool]]:
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"))
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    woken: list[bool] = []
    cache.on_change = lambda: woken.append(True)
    cache.nodes().replace([raw_node("n1", cpu="4")])
    cache.pod_groups().replace([raw_pod_group("g", 3)])
    cache.pods().replace([raw_pod(f"g-{i}", cpu="2", group="g") for i in range(3)])
    return cache, scheduler, woken


def pod_reasons(report: CycleReport | None) -> set[str]:
    assert report is not None
    return {d.reason for d in report.decisions if isinstance(d, SetCondition)}


def test_pools_are_read_and_a_gang_beyond_their_room_is_not_unschedulable() -> None:
    cache, scheduler, _ = make()
    cache.node_pools.handler().replace([raw_pool("small", cpu_limit="1")])
    assert scheduler.cluster.node_pools["small"].limits == {"cpu": 1000}
    assert pod_reasons(scheduler.step(0.0)) == {NODE_POOL_LIMIT_REACHED}


def test_a_raised_limit_retries_the_waiting_gang_which_becomes_unschedulable() -> None:
    cache, scheduler, woken = make()
    cache.node_pools.handler().replace([raw_pool("small", cpu_limit="1")])
    assert pod_reasons(scheduler.step(0.0)) == {NODE_POOL_LIMIT_REACHED}
    woken.clear()
    cache.node_pools.handler().upsert(raw_pool("small", cpu_limit="2"))
    assert woken and scheduler.queue.counts()["unschedulable"] == 0
    assert pod_reasons(scheduler.step(100.0)) == {"Unschedulable"}


def test_an_unchanged_pool_wakes_nothing() -> None:
    cache, _, woken = make()
    cache.node_pools.handler().replace([raw_pool("small", cpu_limit="1")])
    woken.clear()
    cache.node_pools.handler().upsert(raw_pool("small", cpu_limit="1"))
    assert not woken


def test_a_deleted_pool_gives_back_the_old_behaviour() -> None:
    cache, scheduler, _ = make()
    cache.node_pools.handler().replace([raw_pool("small", cpu_limit="1")])
    cache.node_pools.handler().delete(raw_pool("small", cpu_limit="1"))
    assert scheduler.cluster.node_pools == {}
    assert pod_reasons(scheduler.step(0.0)) == {"Unschedulable"}


def test_an_unreadable_pool_is_reported_and_limits_nothing() -> None:
    problems: list[tuple[str, str, str]] = []
    cache, scheduler, _ = make()
    cache.on_problem = lambda kind, key, message: problems.append((kind, key, message))
    cache.node_pools.handler().replace([raw_pool("bad", cpu_limit="lots")])
    assert problems and problems[0][:2] == ("NodePool", "bad")
    assert "spec.limits.cpu" in problems[0][2]
    assert pod_reasons(scheduler.step(0.0)) == {"Unschedulable"}
