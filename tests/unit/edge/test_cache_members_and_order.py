"""The live scheduler's cache feeds the core what issue 19 items 1-3 need: a member that
finishes frees its capacity and stops counting, extra members preempt once the quorum is
bound, and gangs are queued by their dialect's timestamp (creationTimestamp from metadata)."""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, WAITING, WAITING_ON_PREEMPTION, Evict
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.preemption import build_preemptor
from gangsched.core.scheduler import Scheduler
from gangsched.edge.cache import ClusterCache
from tests.builders import raw_node, raw_pod, raw_pod_group, raw_priority_class


def make() -> tuple[ClusterCache, Scheduler]:
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"), preemptor=build_preemptor())
    return ClusterCache(scheduler, clock=lambda: 0.0), scheduler


def test_a_member_that_finishes_frees_its_node_and_no_longer_counts() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1", 2)])
    cache.pod_groups().replace([raw_pod_group("g", 2)])
    cache.pods().replace(
        [
            raw_pod("g-0", 2, group="g", node_name="n1"),
            raw_pod("g-1", 1, group="g", node_name="n1", phase="Pending"),
        ]
    )
    # Over capacity in the input (3 CPUs asked of 2): both hold until g-0 finishes.
    cache.pods().upsert(raw_pod("g-0", 2, group="g", node_name="n1", phase="Succeeded"))
    cpu = scheduler.cluster.snapshot.columns["cpu"]
    assert scheduler.cluster.snapshot.requested[0, cpu] == 1000
    cache.pods().upsert(raw_pod("g-2", 1, group="g"))
    report = scheduler.step(0.0)
    # g-1 (bound) and g-2 (pending) are the two live members: minMember 2 is met by them.
    assert report is not None and report.result == SCHEDULED
    assert [b.pod for b in report.bound] == ["default/g-2"]
    cache.pods().upsert(raw_pod("g-1", 1, group="g", node_name="n1", phase="Failed"))
    cache.pods().upsert(raw_pod("g-3", 1, group="g"))
    report = scheduler.step(1.0)
    assert report is not None and report.result == SCHEDULED  # g-2 bound + g-3


def test_extra_members_preempt_through_the_live_cache() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1", 3)])
    cache.priority_classes().replace(
        [raw_priority_class("high", 100), raw_priority_class("low", 1)]
    )
    cache.pod_groups().replace([raw_pod_group("g", 1, priority_class="high")])
    cache.pods().replace(
        [
            raw_pod("g-0", 1, group="g", node_name="n1", priorityClassName="high"),
            raw_pod("low", 2, node_name="n1", priorityClassName="low", scheduler="default"),
            raw_pod("g-1", 1, group="g", priorityClassName="high"),
        ]
    )
    report = scheduler.step(0.0)
    assert report is not None and report.result == WAITING_ON_PREEMPTION
    assert [d.pod for d in report.decisions if isinstance(d, Evict)] == ["default/low"]


def test_gangs_are_queued_by_their_dialects_timestamp() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1", 4)])

    def stamped(raw: dict[str, object], second: int) -> dict[str, object]:
        meta = raw["metadata"]
        assert isinstance(meta, dict)
        meta["creationTimestamp"] = f"2026-01-01T00:00:{second:02d}Z"
        return raw

    up = raw_pod_group("pg1", 3, dialect=Dialect.UPSTREAM, priority=100)
    cache.pod_groups(Dialect.UPSTREAM).replace([stamped(up, 1)])
    cache.pods().replace(
        [
            stamped(raw_pod("blocker", 2, priority=100), 2),
            *(
                stamped(
                    raw_pod(f"p{i}", 1, group="pg1", dialect=Dialect.UPSTREAM, priority=100), 2 + i
                )
                for i in (1, 2, 3)
            ),
        ]
    )
    first = scheduler.step(0.0)
    assert first is not None and first.gang == GroupRef(Dialect.LONE_POD, "default", "blocker")
    second = scheduler.step(0.0)
    assert second is not None and second.gang == GroupRef(Dialect.UPSTREAM, "default", "pg1")
    assert second.result != WAITING


def test_a_podgroup_read_before_its_priority_class_is_read_again_when_the_class_arrives() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1", 4)])
    cache.priority_classes().replace([])
    cache.pod_groups().replace([raw_pod_group("g", 2, priority_class="late")])
    # The members carry spec.priority 10 (set by admission, or by hand).
    members = [raw_pod(f"g-{i}", 1, group="g", priority=10) for i in range(2)]
    cache.pods().replace(members)
    assert "PodGroup/default/g" in cache.problems
    report = scheduler.step(0.0)
    assert report is None or report.result != SCHEDULED
    cache.priority_classes().upsert(raw_priority_class("late", 10))
    assert "PodGroup/default/g" not in cache.problems
    assert not cache.unreadable_groups
    group = scheduler.cluster.groups[GroupRef(Dialect.SIGS, "default", "g")]
    assert group.priority == 10
    report = scheduler.step(1.0)
    assert report is not None and report.result == SCHEDULED
    assert sorted(b.pod for b in report.bound) == ["default/g-0", "default/g-1"]


def test_a_deleted_unreadable_podgroup_is_not_read_again() -> None:
    cache, scheduler = make()
    raw = raw_pod_group("g", 2, priority_class="late")
    cache.pod_groups().replace([raw])
    assert cache.unreadable_groups
    cache.pod_groups().delete(raw)
    cache.priority_classes().upsert(raw_priority_class("late", 10))
    assert not cache.unreadable_groups
    assert not scheduler.cluster.groups
