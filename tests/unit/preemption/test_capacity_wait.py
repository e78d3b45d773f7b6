"""Grow before you evict (issue 32 item 2): a gang that only preemption would place waits a
bounded time for new nodes, then preempts. Time is a value: a fake clock, never a sleep."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import (
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING_ON_PREEMPTION,
    Event,
    Evict,
    GroupOutcome,
    Nominate,
    SetCondition,
)
from gangsched.core.preemption import KEP, MINCOST, build_preemptor
from gangsched.core.preemption.capacity_wait import CapacityWaitPreemptor, capacity_wait_of
from gangsched.core.scheduler import CycleReport, Scheduler
from tests.builders import SCHEDULER, cluster, gang_pods, group, node, pod

BOTH = pytest.mark.parametrize("strategy", [KEP, MINCOST])
LOW, HIGH = 10, 100
START = 1_000.0  # wall-clock seconds of the fake clock at the gang's first attempt


@dataclass
class FakeClock:
    now: float = START

    def __call__(self) -> float:
        return self.now


def crowded(wait: float | None, *, since: float | None = None) -> ClusterState:
    """Two 4-CPU nodes full of low-priority pods; a 2-pod gang of 4 CPU each (high priority)
    fits only by preempting. `wait`: the gang's annotation; `since`: its members'
    Unschedulable condition time (as a restarted scheduler reads it)."""
    gang = group("train", 2, priority=HIGH)
    gang.capacity_wait = wait
    members = gang_pods("train", 2, cpu=4, priority=HIGH)
    for member in members:
        member.unschedulable_since = since
    low = [pod(f"low-{i}", cpu=4, priority=LOW, node_name=f"n{i}") for i in (1, 2)]
    return cluster([node("n1", cpu=4), node("n2", cpu=4)], [*low, *members], [gang])


def scheduler(
    state: ClusterState, strategy: str, clock: FakeClock, default: float = 0.0
) -> Scheduler:
    inner = build_preemptor(strategy=strategy, scheduler_name=SCHEDULER)
    wrapped = CapacityWaitPreemptor(inner, clock=clock, default_seconds=default)
    sched = Scheduler(state, preemptor=wrapped)
    sched.enqueue_pending(0.0)
    return sched


def step(sched: Scheduler, now: float) -> CycleReport:
    report = sched.step(now)
    assert report is not None
    return report


def evictions(report: CycleReport) -> list[str]:
    return sorted(d.pod for d in report.decisions if isinstance(d, Evict))


@BOTH
def test_without_a_wait_it_preempts_at_once(strategy: str) -> None:
    sched = scheduler(crowded(None), strategy, FakeClock())
    report = step(sched, 0.0)
    assert report.result == WAITING_ON_PREEMPTION
    assert evictions(report) == ["default/low-1", "default/low-2"]


@BOTH
def test_while_it_waits_nothing_is_evicted_and_the_pods_say_unschedulable(strategy: str) -> None:
    clock = FakeClock()
    sched = scheduler(crowded(300), strategy, clock)
    report = step(sched, 5.0)
    assert report.result == UNSCHEDULABLE
    assert evictions(report) == []
    assert not any(isinstance(d, Nominate) and d.node for d in report.decisions)
    conditions = [d for d in report.decisions if isinstance(d, SetCondition)]
    assert {(c.pod, c.type, c.status, c.reason) for c in conditions} == {
        ("default/train-0", "PodScheduled", "False", "Unschedulable"),
        ("default/train-1", "PodScheduled", "False", "Unschedulable"),
    }
    said = "waiting up to 5m0s for new capacity before preempting (until 1970-01-01T00:21:40Z"
    [outcome] = [d for d in report.decisions if isinstance(d, GroupOutcome)]
    assert said in outcome.message
    [event] = [d for d in report.decisions if isinstance(d, Event)]
    assert (event.reason, said in event.note) == ("FailedScheduling", True)
    assert report.preemption is not None
    assert report.preemption.waiting_until == START + 300
    assert sorted(p.key for p in report.preemption.victims) == ["default/low-1", "default/low-2"]
    # Tried again when the wait ends, on the scheduler's own clock, even if nothing changes.
    assert sched.queue.next_retry_at() == 5.0 + 300


@BOTH
def test_the_wait_is_remembered_across_cycles_and_then_it_preempts(strategy: str) -> None:
    clock = FakeClock()
    sched = scheduler(crowded(300), strategy, clock)
    step(sched, 0.0)
    clock.now = START + 120
    sched.queue.cluster_changed(20.0)  # something unrelated changed: tried again, still waits
    again = step(sched, 20.0)
    assert again.result == UNSCHEDULABLE
    assert again.preemption is not None and again.preemption.waiting_until == START + 300
    assert sched.queue.next_retry_at() == 20.0 + 180
    clock.now = START + 300
    assert sched.step(199.0) is None  # not yet due on the scheduler's clock
    expired = step(sched, 200.0)
    assert expired.result == WAITING_ON_PREEMPTION
    assert evictions(expired) == ["default/low-1", "default/low-2"]
    assert "capacity did not arrive within 5m0s; preempting" in expired.message
    [event] = [d for d in expired.decisions if isinstance(d, Event) and d.reason == "Preempting"]
    assert "capacity did not arrive within 5m0s; preempting" in event.note


@BOTH
def test_new_nodes_during_the_wait_bind_the_gang_without_preemption(strategy: str) -> None:
    clock = FakeClock()
    state = crowded(600)
    sched = scheduler(state, strategy, clock)
    assert step(sched, 0.0).result == UNSCHEDULABLE
    clock.now = START + 90
    for name in ("new-1", "new-2"):
        state.upsert_node(node(name, cpu=4))
    sched.queue.cluster_changed(90.0)
    report = step(sched, 90.0)
    assert report.result == SCHEDULED
    assert sorted(b.node for b in report.bound) == ["new-1", "new-2"]
    assert evictions(report) == []


@BOTH
def test_a_restarted_scheduler_resumes_the_wait_from_the_pods_condition(strategy: str) -> None:
    # Unschedulable since 200 s before this (new) scheduler's first attempt: 100 s are left.
    sched = scheduler(crowded(300, since=START - 200), strategy, FakeClock())
    report = step(sched, 0.0)
    assert report.preemption is not None and report.preemption.waiting_until == START + 100
    assert sched.queue.next_retry_at() == 100.0
    # Past the whole wait already: it preempts at once.
    late = scheduler(crowded(300, since=START - 400), strategy, FakeClock())
    assert evictions(step(late, 0.0)) == ["default/low-1", "default/low-2"]


@BOTH
def test_the_configured_default_applies_and_a_group_may_opt_out(strategy: str) -> None:
    waits = scheduler(crowded(None), strategy, FakeClock(), default=60)
    report = step(waits, 0.0)
    assert report.result == UNSCHEDULABLE and "waiting up to 1m0s" in report.message
    opted_out = scheduler(crowded(0), strategy, FakeClock(), default=60)
    assert step(opted_out, 0.0).result == WAITING_ON_PREEMPTION


@BOTH
def test_a_gang_preemption_cannot_help_is_reported_as_before(strategy: str) -> None:
    gang = group("train", 2, priority=HIGH)
    gang.capacity_wait = 300
    state = cluster([node("n1", cpu=4)], gang_pods("train", 2, cpu=8, priority=HIGH), [gang])
    sched = scheduler(state, strategy, FakeClock())
    report = step(sched, 0.0)
    assert report.result == UNSCHEDULABLE
    assert "preemption cannot help" in report.message
    assert "waiting up to" not in report.message
    assert report.preemption is not None and report.preemption.waiting_until is None
    assert sched.queue.next_retry_at() is None


def test_the_longest_wait_of_a_units_groups_applies() -> None:
    state = crowded(300)
    sched = Scheduler(state)
    gang = sched.gang(next(iter(state.pending_refs())))
    assert capacity_wait_of(gang, 0.0) == 300
    gang.parts[0].group.capacity_wait = None
    assert capacity_wait_of(gang, 45.0) == 45.0


def test_a_placed_gang_is_forgotten() -> None:
    clock = FakeClock()
    state = crowded(600)
    sched = scheduler(state, MINCOST, clock)
    step(sched, 0.0)
    wrapped = sched.preemptor
    assert isinstance(wrapped, CapacityWaitPreemptor) and wrapped.started
    for name in ("new-1", "new-2"):
        state.upsert_node(node(name, cpu=4))
    sched.queue.cluster_changed(1.0)
    assert step(sched, 1.0).result == SCHEDULED
    # Any later attempt (another gang's) drops the placed gang's remembered start.
    other = group("other", 1, priority=HIGH)
    other.capacity_wait = 60
    state.upsert_group(other)
    state.upsert_pod(pod("other-0", cpu=4, priority=HIGH, group="other"))
    sched.enqueue_pending(2.0)
    step(sched, 2.0)
    assert [ref.name for ref in wrapped.started] == ["other"]
