"""The queue's `retry_by`: an unschedulable gang tried again at a time even if nothing changes
(the end of its wait for new capacity, core/preemption/capacity_wait.py)."""

from __future__ import annotations

from gangsched.core.model import Dialect, GroupRef
from gangsched.core.queue import SchedulingQueue, State

G = GroupRef(Dialect.SIGS, "default", "g")


def parked(at: float | None) -> SchedulingQueue:
    q = SchedulingQueue(pop_from_backoff=False)
    q.add(G, priority=0, created=0.0)
    assert q.pop(0.0) == G
    q.unschedulable(G, now=0.0)
    if at is not None:
        q.retry_by(G, at)
    return q


def test_a_gang_comes_back_at_its_retry_time_without_any_change() -> None:
    q = parked(30.0)
    assert q.next_retry_at() == 30.0
    assert q.next_ready_at() == 30.0  # the driver's sleep ends then, not at the 300 s flush
    assert q.pop(29.0) is None
    assert q.state_of(G) is State.UNSCHEDULABLE
    assert q.pop(30.0) == G
    assert q.next_retry_at() is None


def test_without_a_retry_time_only_the_flush_brings_it_back() -> None:
    q = parked(None)
    assert q.next_retry_at() is None
    assert q.next_ready_at() == q.unschedulable_flush
    assert q.pop(30.0) is None


def test_a_new_failure_clears_the_old_retry_time() -> None:
    q = parked(30.0)
    q.cluster_changed(10.0)
    assert q.pop(10.0) == G
    q.unschedulable(G, now=10.0)
    assert q.next_retry_at() is None
    assert q.pop(30.0) is None


def test_only_an_unschedulable_gang_takes_a_retry_time() -> None:
    q = SchedulingQueue()
    q.add(G, priority=0, created=0.0)
    q.retry_by(G, 5.0)  # active: nothing to retry
    assert q.next_retry_at() is None
