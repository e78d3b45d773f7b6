"""The cache feeder: raw objects in, ClusterState and queue updates out (no API server)."""

from __future__ import annotations

from typing import Any

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED
from gangsched.core.scheduler import Scheduler
from gangsched.edge.cache import ClusterCache
from tests.builders import OTHER_SCHEDULER as OTHER
from tests.builders import SCHEDULER, raw_node, raw_pod, raw_pod_group


def make() -> tuple[ClusterCache, Scheduler]:
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"))
    return ClusterCache(scheduler, clock=lambda: 0.0), scheduler


def test_relist_builds_state_and_queues_pending_gangs() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1"), raw_node("n2")])
    cache.pod_groups().replace([raw_pod_group("g", 2)])
    cache.pods().replace(
        [
            raw_pod("g-0", group="g"),
            raw_pod("g-1", group="g"),
            raw_pod("other", node_name="n1", scheduler=OTHER),
        ]
    )
    assert set(scheduler.cluster.nodes) == {"n1", "n2"}
    assert len(scheduler.queue) == 1
    report = scheduler.step(0.0)
    assert report is not None and report.result == SCHEDULED
    assert len(report.bound) == 2


def test_the_start_lists_queue_nothing_until_queueing_starts_then_every_pending_gang() -> None:
    """`gangsched run`'s cache starts without queueing: its lists walk no pending pod, and
    the gangs they brought are queued once, at the sync; a relist after it queues again."""
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"))
    cache = ClusterCache(scheduler, clock=lambda: 0.0, queueing=False)
    cache.nodes().replace([raw_node("n1"), raw_node("n2")])
    cache.pods().replace([raw_pod("g-0", group="g"), raw_pod("g-1", group="g")])
    cache.pod_groups().replace([raw_pod_group("g", 2)])
    assert len(scheduler.queue) == 0
    cache.start_queueing()
    assert len(scheduler.queue) == 1
    report = scheduler.step(0.0)
    assert report is not None and report.result == SCHEDULED
    cache.pods().replace([raw_pod("h-0", group="h"), raw_pod("h-1", group="h")])
    cache.pod_groups().replace([raw_pod_group("h", 2)])
    assert len(scheduler.queue) == 1


def test_relist_forgets_pods_deleted_while_disconnected() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    cache.pods().replace(
        [
            raw_pod("a", node_name="n1", scheduler=SCHEDULER),
            raw_pod("b", node_name="n1", scheduler=SCHEDULER),
        ]
    )
    assert int(scheduler.cluster.snapshot.requested[0, 0]) == 2000
    cache.pods().replace([raw_pod("a", node_name="n1", scheduler=SCHEDULER)])
    assert set(scheduler.cluster.pods) == {"default/a"}
    assert int(scheduler.cluster.snapshot.requested[0, 0]) == 1000


def test_assumed_bind_survives_a_stale_pending_event() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1", cpu="1")])
    cache.pods().replace([raw_pod("a"), raw_pod("b")])
    report = scheduler.step(0.0)
    assert report is not None and len(report.bound) == 1
    placed = report.bound[0]
    cache.assumed[placed.pod] = placed.node
    # The watch still shows the pod pending (the binding is in flight): capacity stays taken.
    cache.pods().upsert(raw_pod(placed.pod.split("/")[1]))
    assert scheduler.cluster.pods[placed.pod].node_name == "n1"
    assert int(scheduler.cluster.snapshot.requested[0, 0]) == 1000
    # Once the pod shows up bound, the assumption is dropped.
    cache.pods().upsert(raw_pod(placed.pod.split("/")[1], node_name="n1", scheduler=SCHEDULER))
    assert placed.pod not in cache.assumed
    assert int(scheduler.cluster.snapshot.requested[0, 0]) == 1000


def test_deleting_a_bound_pod_frees_capacity_and_wakes_unschedulable_gangs() -> None:
    woken: list[bool] = []
    cache, scheduler = make()
    cache.on_change = lambda: woken.append(True)
    cache.nodes().replace([raw_node("n1", cpu="1")])
    cache.pods().replace([raw_pod("busy", node_name="n1", scheduler=OTHER), raw_pod("wants")])
    report = scheduler.step(0.0)
    assert report is not None and report.result == "unschedulable"
    assert scheduler.queue.counts()["unschedulable"] == 1
    woken.clear()
    cache.pods().delete(raw_pod("busy", node_name="n1", scheduler=OTHER))
    assert woken
    assert scheduler.queue.counts()["unschedulable"] == 0
    report = scheduler.step(100.0)
    assert report is not None and report.result == SCHEDULED


def test_a_podgroup_created_after_its_members_wakes_the_loop_and_schedules_them() -> None:
    """Members first, PodGroup last (as some controllers write them): the group's arrival
    must wake the scheduling loop, which otherwise slept until its next tick (up to 1 s)."""
    woken: list[bool] = []
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1", cpu="4")])
    cache.pods().replace([raw_pod(f"g-{i}", group="g") for i in range(2)])
    report = scheduler.step(0.0)
    assert report is not None and report.result == "waiting"  # PodGroup not found
    cache.on_change = lambda: woken.append(True)
    cache.pod_groups().upsert(raw_pod_group("g", 2))
    assert woken
    report = scheduler.step(0.0)
    assert report is not None and report.result == SCHEDULED and len(report.bound) == 2
    woken.clear()
    cache.pod_groups().upsert(raw_pod_group("g", 2))  # unchanged: nothing to wake for
    assert not woken
    cache.pod_groups().delete(raw_pod_group("g", 2))
    assert woken


def test_unreadable_pod_is_reported_not_crashing() -> None:
    problems: list[tuple[str, str, str]] = []
    cache, scheduler = make()
    cache.on_problem = lambda kind, key, message: problems.append((kind, key, message))
    bad = raw_pod("bad")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    cache.pods().upsert(bad)
    assert "default/bad" not in scheduler.cluster.pods
    assert problems and problems[0][0] == "Pod" and "cpu" in problems[0][2]


def test_pdb_without_status_gets_computed_disruptions() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    pods = [raw_pod(f"p{i}", node_name="n1", scheduler=OTHER) for i in range(3)]
    for p in pods:
        p["metadata"]["labels"] = {"app": "db"}
    cache.pods().replace(pods)
    cache.budgets().replace(
        [
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db", "namespace": "default"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
            }
        ]
    )
    assert scheduler.cluster.budgets["default/db"].disruptions_allowed == 1


def test_computed_budget_follows_its_pods_and_others_are_not_read_again() -> None:
    """A pod event re-counts only the budgets computed here that select it; a gang budget of
    gangsched's own is never one of the cluster's budgets."""
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    cache.pods().replace([])

    def budget(name: str, selects: dict[str, str], **extra: object) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default", **extra},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": selects}},
        }

    reported = budget("web", {"app": "web"})
    reported["status"] = {"disruptionsAllowed": 7, "observedGeneration": 1}
    reported["metadata"]["generation"] = 1
    gang = budget("gang", {"app": "db"}, labels={"gangsched.io/gang-protection": "true"})
    cache.budgets().replace([budget("db", {"app": "db"}), reported, gang])
    assert set(scheduler.cluster.budgets) == {"default/db", "default/web"}
    assert scheduler.cluster.budgets["default/db"].disruptions_allowed == 0

    def db_pod(name: str, node: str | None) -> dict[str, Any]:
        p = raw_pod(name, node_name=node, scheduler=OTHER)
        p["metadata"]["labels"] = {"app": "db"}
        return p

    cache.pods().upsert(db_pod("a", "n1"))
    cache.pods().upsert(db_pod("b", "n1"))
    assert scheduler.cluster.budgets["default/db"].disruptions_allowed == 1
    cache.pods().upsert(db_pod("pending", None))  # not running: not counted
    assert scheduler.cluster.budgets["default/db"].disruptions_allowed == 1
    cache.pods().delete(db_pod("a", "n1"))
    assert scheduler.cluster.budgets["default/db"].disruptions_allowed == 0
    assert scheduler.cluster.budgets["default/web"].disruptions_allowed == 7
    cache.budgets().delete(budget("db", {"app": "db"}))
    cache.pods().upsert(db_pod("c", "n1"))
    assert set(scheduler.cluster.budgets) == {"default/web"}


def _preempting() -> tuple[ClusterCache, Scheduler]:
    from gangsched.core.preemption import build_preemptor

    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"), preemptor=build_preemptor())
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    cache.nodes().replace([raw_node("n1", cpu="4")])
    low = raw_pod("low", cpu="4", node_name="n1", scheduler=SCHEDULER)
    high = raw_pod("high", cpu="4")
    high["spec"]["priority"] = 1000
    cache.pods().replace([low, high])
    return cache, scheduler


def _evictions(scheduler: Scheduler) -> list[str]:
    from gangsched.core.decisions import Evict

    scheduler.queue.activate(scheduler.cluster.group_of(scheduler.cluster.pods["default/high"]))
    report = scheduler.step(1000.0)
    assert report is not None
    return [d.pod for d in report.decisions if isinstance(d, Evict)]


def test_a_victim_being_evicted_is_not_preempted_again_before_the_watch_shows_it() -> None:
    cache, scheduler = _preempting()
    assert _evictions(scheduler) == ["default/low"]
    cache.evict("default/low", "uid-default-low")  # what the actuator does as it sends the eviction
    # The DisruptionTarget condition arrives first, still without a deletionTimestamp.
    update = raw_pod("low", cpu="4", node_name="n1", scheduler=SCHEDULER)
    update["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    cache.pods().upsert(update)
    assert scheduler.cluster.pods["default/low"].terminating
    assert _evictions(scheduler) == []  # waits for its victim instead of evicting it twice
    # Then the deletion lands: the overlay is no longer needed.
    cache.pods().upsert(
        raw_pod(
            "low",
            cpu="4",
            node_name="n1",
            scheduler=SCHEDULER,
            metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"},
        )
    )
    assert "default/low" not in cache.evicting


def test_a_failed_eviction_makes_the_victim_eligible_again() -> None:
    cache, scheduler = _preempting()
    assert _evictions(scheduler) == ["default/low"]
    cache.evict("default/low", "uid-default-low")
    cache.eviction_failed("default/low", "uid-default-low")
    assert not scheduler.cluster.pods["default/low"].terminating
    assert _evictions(scheduler) == ["default/low"]


def test_removing_the_last_gate_requeues_the_gang_at_once() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    cache.pod_groups().replace([raw_pod_group("g", 2)])
    gated = raw_pod("g-1", group="g")
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    cache.pods().replace([raw_pod("g-0", group="g"), gated])
    report = scheduler.step(0.0)
    assert report is not None and report.result == "waiting"
    assert scheduler.step(0.0) is None
    cache.nodes().upsert(raw_node("n2"))  # unrelated: the gang keeps waiting
    assert scheduler.step(0.0) is None
    # The update that removes the gate also narrows the nodeSelector (KEP-3838, as Kueue's
    # topology ungater does): the gang is retried at once, and with the new spec.
    ungated = raw_pod("g-1", group="g")
    ungated["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n2"}
    cache.pods().upsert(ungated)
    report = scheduler.step(0.0)
    assert report is not None and report.result == SCHEDULED
    assert {b.pod: b.node for b in report.bound}["default/g-1"] == "n2"


def test_a_gated_pod_whose_gates_do_not_change_is_left_alone() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    gated = raw_pod("solo")
    gated["spec"]["schedulingGates"] = [{"name": "a"}, {"name": "b"}]
    cache.pods().replace([gated])
    assert len(scheduler.queue) == 0
    still = raw_pod("solo")
    still["spec"]["schedulingGates"] = [{"name": "b"}]  # one gate of two removed
    cache.pods().upsert(still)
    assert scheduler.step(0.0) is None
    assert scheduler.cluster.pods["default/solo"].scheduling_gates == ("b",)


def test_a_resize_reported_in_status_changes_what_the_pod_holds() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    running = raw_pod("big", node="n1", cpu="1")
    cache.pods().replace([running])
    assert scheduler.cluster.pods["default/big"].requests["cpu"] == 1000
    resized = raw_pod("big", node="n1", cpu="1")
    resized["status"]["containerStatuses"] = [{"name": "c", "allocatedResources": {"cpu": "3"}}]
    cache.pods().upsert(resized)  # a status-only update: still read
    assert scheduler.cluster.pods["default/big"].requests["cpu"] == 3000


def test_a_gated_member_arriving_updates_why_a_waiting_gang_waits() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    cache.pod_groups().replace([raw_pod_group("g", 3)])
    cache.pods().replace([raw_pod("g-0", group="g"), raw_pod("g-1", group="g")])
    report = scheduler.step(0.0)
    assert report is not None and report.result == "waiting" and "gated" not in report.message
    late = raw_pod("g-2", group="g")
    late["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    cache.pods().upsert(late)
    report = scheduler.step(0.0)
    assert report is not None and report.result == "waiting"
    assert "1 member gated: example.com/quota (g-2)" in report.message


def test_a_relist_that_brings_the_missing_members_retries_a_waiting_gang() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1")])
    cache.pod_groups().replace([raw_pod_group("g", 2)])
    cache.pods().replace([raw_pod("g-0", group="g")])
    report = scheduler.step(0.0)
    assert report is not None and report.result == "waiting"
    # The watch broke; the relist shows the second member (no per-pod event for it).
    cache.pods().replace([raw_pod("g-0", group="g"), raw_pod("g-1", group="g")])
    report = scheduler.step(0.0)
    assert report is not None and report.result == SCHEDULED
