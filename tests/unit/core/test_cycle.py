"""The PodGroup cycle: upstream semantics, then the search that beats the fixed order."""

from __future__ import annotations

import pytest

from gangsched.core.decisions import (
    ERROR,
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING,
    Bind,
    GroupOutcome,
    SetCondition,
)
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.scheduler import Scheduler, SchedulerConfig
from tests.builders import cluster, gang_pods, group, node, pod


def run_all(sched: Scheduler) -> list[str]:
    sched.enqueue_pending()
    results = []
    while (report := sched.step(0.0)) is not None:
        results.append(report.result)
    return results


def bound_nodes(state, prefix: str) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    return {k: p.node_name for k, p in state.pods.items() if p.name.startswith(prefix)}


def test_gang_is_bound_whole_when_it_fits() -> None:
    state = cluster([node("n1"), node("n2")], gang_pods("g", 3, cpu=2), [group("g", 3)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == SCHEDULED
    binds = [d for d in report.decisions if isinstance(d, Bind)]
    assert len(binds) == 3
    assert all(p.node_name for p in state.pods.values())
    # Least-allocated spreads: two nodes used, none overcommitted.
    assert (state.snapshot.requested[:, 0] <= state.snapshot.allocatable[:, 0]).all()


def test_gang_that_does_not_fit_binds_nothing_and_leaves_no_trace() -> None:
    state = cluster([node("n1", cpu=4)], gang_pods("g", 3, cpu=2), [group("g", 3)])
    before = state.snapshot.requested.copy()
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == UNSCHEDULABLE
    assert "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining" in report.message
    assert "0/1 nodes are available: 1 Insufficient cpu." in report.message
    assert not [d for d in report.decisions if isinstance(d, Bind)]
    assert (state.snapshot.requested == before).all()
    assert all(p.node_name is None for p in state.pods.values())
    conditions = [d for d in report.decisions if isinstance(d, SetCondition)]
    assert {c.pod for c in conditions} == {"default/g-0", "default/g-1", "default/g-2"}
    assert all(c.reason == "Unschedulable" and c.status == "False" for c in conditions)


def test_two_competing_gangs_never_both_partial() -> None:
    pods = gang_pods("a", 3) + gang_pods("b", 3)
    state = cluster([node("n1", cpu=4)], pods, [group("a", 3), group("b", 3)])
    results = run_all(Scheduler(state))
    assert sorted(results) == [SCHEDULED, UNSCHEDULABLE]
    placed = {
        g: sum(1 for p in state.pods.values() if p.group and p.group.name == g and p.node_name)
        for g in "ab"
    }
    assert sorted(placed.values()) == [0, 3]


def test_fewer_members_than_min_member_waits_with_count() -> None:
    state = cluster([node("n1")], gang_pods("g", 2), [group("g", 3)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == WAITING
    assert report.message == "pod group default/g has 2 of minMember 3 pods; waiting for 1 more"
    assert all(p.node_name is None for p in state.pods.values())


def test_bound_members_count_toward_min_member() -> None:
    pods = [pod("g-0", group="g", node_name="n1"), *gang_pods("g", 2)[1:]]
    state = cluster([node("n1", cpu=2), node("n2", cpu=1)], pods, [group("g", 2)])
    results = run_all(Scheduler(state))
    assert results == [SCHEDULED]
    assert state.pods["default/g-1"].node_name is not None


def test_extra_members_that_do_not_fit_stay_pending() -> None:
    state = cluster([node("n1", cpu=2)], gang_pods("g", 3), [group("g", 2)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == SCHEDULED
    assert sum(1 for p in state.pods.values() if p.node_name) == 2
    left = [d for d in report.decisions if isinstance(d, SetCondition)]
    assert [c.pod for c in left] == ["default/g-2"]
    # Retrying the leftover alone changes nothing and does not loop.
    assert run_all(sched) == [UNSCHEDULABLE]


def test_mixed_priorities_in_a_group_are_a_scheduler_error() -> None:
    pods = [pod("g-0", group="g", priority=1), pod("g-1", group="g", priority=2)]
    state = cluster([node("n1")], pods, [group("g", 2)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == ERROR
    assert "same priority" in report.message
    assert any(
        isinstance(d, SetCondition) and d.reason == "SchedulerError" for d in report.decisions
    )


def test_group_priority_must_match_pods() -> None:
    state = cluster([node("n1")], gang_pods("g", 2, priority=5), [group("g", 2, priority=7)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == ERROR
    assert report.message == (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 5 and 7"  # upstream order: the pod's, then the group's
    )


def test_mixed_scheduler_names_are_a_scheduler_error() -> None:
    pods = [pod("g-0", group="g"), pod("g-1", group="g", scheduler_name="other")]
    pods[1].node_name = None
    state = cluster([node("n1")], pods, [group("g", 2)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == ERROR
    assert "schedulerName" in report.message


def test_missing_pod_group_waits_with_message() -> None:
    state = cluster([node("n1")], [pod("x", group="nowhere")])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == WAITING
    assert report.message == "scheduling.sigs.k8s.io PodGroup default/nowhere not found"


def test_heterogeneous_gang_found_by_search_where_fixed_order_fails() -> None:
    # Upstream order (first seen) places the two small pods first; least-allocated puts them
    # on different nodes, leaving no room for the big one. The search finds 2+2 / 4.
    pods = [
        pod("g-0", group="g", cpu=1, created=0),
        pod("g-1", group="g", cpu=1, created=1),
        pod("g-2", group="g", cpu=4, created=2),
    ]
    state = cluster([node("n1", cpu=4), node("n2", cpu=4)], pods, [group("g", 3)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == SCHEDULED
    assert report.strategy in ("largest-first", "bin-packing", "backtracking")
    assert (state.snapshot.requested <= state.snapshot.allocatable).all()


def test_backtracking_solves_a_packing_that_greedy_orders_miss() -> None:
    # Nodes 5 and 5; pods 3,3,2,2 CPU: largest-first least-allocated gives 3|3 then 2|2: ok.
    # Nodes 6 and 4; pods 3,3,2,2: greedy may put 3,3 on the 6-node... search must find
    # 3+3 | 2+2.
    pods = [pod(f"g-{i}", group="g", cpu=c, created=i) for i, c in enumerate([2, 2, 3, 3])]
    state = cluster([node("n1", cpu=6), node("n2", cpu=4)], pods, [group("g", 4)])
    results = run_all(Scheduler(state))
    assert results == [SCHEDULED]
    assert (state.snapshot.requested <= state.snapshot.allocatable).all()


def test_gang_group_is_placed_only_if_every_group_fits() -> None:
    pods = gang_pods("a", 1) + gang_pods("b", 2, cpu=3)
    groups = [group("a", 1, gang_group=("a", "b")), group("b", 2, gang_group=("a", "b"))]
    state = cluster([node("n1", cpu=4)], pods, groups)
    results = run_all(Scheduler(state))
    assert results == [UNSCHEDULABLE]
    assert all(p.node_name is None for p in state.pods.values())

    state = cluster(
        [node("n1", cpu=4), node("n2", cpu=4)], gang_pods("a", 1) + gang_pods("b", 2, cpu=3), groups
    )
    report_results = run_all(Scheduler(state))
    assert report_results == [SCHEDULED]
    assert all(p.node_name for p in state.pods.values())


def test_lone_pod_is_a_group_of_one() -> None:
    state = cluster([node("n1")], [pod("solo")])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == SCHEDULED
    assert report.gang == GroupRef(Dialect.LONE_POD, "default", "solo")
    outcomes = [d for d in report.decisions if isinstance(d, GroupOutcome)]
    assert outcomes and outcomes[0].result == SCHEDULED


def test_higher_priority_gang_goes_first() -> None:
    pods = gang_pods("low", 2, priority=1) + [
        pod(f"high-{i}", group="high", priority=10, created=100 + i) for i in range(2)
    ]
    state = cluster([node("n1", cpu=2)], pods, [group("low", 2), group("high", 2)])
    run_all(Scheduler(state))
    assert all(p.node_name for p in state.pods.values() if p.name.startswith("high"))
    assert all(p.node_name is None for p in state.pods.values() if p.name.startswith("low"))


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_scoring_strategy_spreads_or_packs(strategy: str) -> None:
    from gangsched.core.plugins import ScoringConfig

    state = cluster([node("n1"), node("n2")], gang_pods("g", 2), [group("g", 2)])
    config = SchedulerConfig(scoring=ScoringConfig(strategy=strategy))
    run_all(Scheduler(state, config))
    nodes = {p.node_name for p in state.pods.values()}
    assert len(nodes) == (2 if strategy == "LeastAllocated" else 1)


def test_search_is_skipped_when_it_cannot_help() -> None:
    from gangsched.core.gang_placer import _search_can_help

    state = cluster([node("n1", cpu=4), node("n2", cpu=4)], [], [group("g", 3)])
    sched = Scheduler(state)

    def gang_of(pods: list) -> object:  # type: ignore[type-arg]
        for p in pods:
            state.upsert_pod(p)
        return sched.gang(GroupRef(Dialect.SIGS, "default", "g"))

    # Identical members: greedy already placed as many as any order could.
    identical = gang_of(gang_pods("g", 3, cpu=3))
    assert not _search_can_help(identical, state.snapshot)  # type: ignore[arg-type]
    for key in list(state.pods):
        state.delete_pod(key)
    # Mixed sizes that together exceed the free CPU of the whole cluster: hopeless.
    too_big = gang_of(
        [pod("g-0", group="g", cpu=4), pod("g-1", group="g", cpu=3), pod("g-2", group="g", cpu=2)]
    )
    assert not _search_can_help(too_big, state.snapshot)  # type: ignore[arg-type]
    for key in list(state.pods):
        state.delete_pod(key)
    # Mixed sizes that fit in total: another order may succeed.
    mixed = gang_of(
        [pod("g-0", group="g", cpu=1), pod("g-1", group="g", cpu=1), pod("g-2", group="g", cpu=4)]
    )
    assert _search_can_help(mixed, state.snapshot)  # type: ignore[arg-type]
