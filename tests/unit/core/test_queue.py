"""The gang queue: order, backoff, unschedulable pool and wake-ups."""

from __future__ import annotations

from gangsched.core.model import Dialect, GroupRef
from gangsched.core.queue import SchedulingQueue, State


def ref(name: str) -> GroupRef:
    return GroupRef(Dialect.SIGS, "default", name)


def test_priority_then_age_then_name() -> None:
    q = SchedulingQueue()
    q.add(ref("old-low"), priority=1, created=1.0)
    q.add(ref("new-high"), priority=10, created=5.0)
    q.add(ref("old-high"), priority=10, created=2.0)
    q.add(ref("b-same"), priority=1, created=1.0)
    order = [q.pop(0.0) for _ in range(4)]
    assert order == [ref("old-high"), ref("new-high"), ref("b-same"), ref("old-low")]
    assert q.pop(0.0) is None


def test_unschedulable_gang_waits_for_a_change_then_respects_backoff() -> None:
    q2 = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0, pop_from_backoff=False)
    q2.add(ref("g"), priority=0, created=0.0)
    q2.pop(0.0)
    q2.unschedulable(ref("g"), now=0.0)
    assert q2.pop(100.0) is None, "without a change an unschedulable gang stays put"
    assert q2.state_of(ref("g")) is State.UNSCHEDULABLE
    assert q2.pop(0.5) is None
    assert q2.cluster_changed(0.5) == 1
    assert q2.state_of(ref("g")) is State.BACKOFF  # backoff (1 s) not over yet
    assert q2.pop(0.9) is None
    assert q2.pop(1.0) == ref("g")


def test_backoff_doubles_up_to_the_cap() -> None:
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0)
    assert [q.backoff_for(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_gang_not_ready_yet_does_not_grow_its_backoff() -> None:
    """Waiting for members, its PodGroup or its own victims is not a failed attempt: however
    many such cycles, the gang is back within initial_backoff of the change it waits for."""
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0, pop_from_backoff=False)
    q.add(ref("g"), priority=0, created=0.0)
    for now in (0.0, 2.0, 4.0, 6.0):
        assert q.pop(now) == ref("g")
        q.unschedulable(ref("g"), now=now, counted=False)
        q.cluster_changed(now + 1.5)
    assert q.attempts_of(ref("g")) == 0
    assert q.pop(8.0) == ref("g")
    q.unschedulable(ref("g"), now=8.0)  # a real failure counts and backs off as before
    q.unschedulable(ref("g"), now=8.0)
    assert q.attempts_of(ref("g")) == 2
    q.cluster_changed(8.0)
    assert q.pop(9.9) is None
    assert q.pop(10.0) == ref("g")


def test_a_failing_gang_never_blocks_the_others() -> None:
    q = SchedulingQueue()
    q.add(ref("stuck"), priority=100, created=0.0)
    q.add(ref("other"), priority=1, created=1.0)
    assert q.pop(0.0) == ref("stuck")
    q.unschedulable(ref("stuck"), now=0.0)
    assert q.pop(0.0) == ref("other")


def test_unschedulable_gangs_are_flushed_periodically() -> None:
    q = SchedulingQueue(unschedulable_flush=300.0)
    q.add(ref("g"), priority=0, created=0.0)
    q.pop(0.0)
    q.unschedulable(ref("g"), now=0.0)
    assert q.pop(299.0) is None
    assert q.pop(300.0) == ref("g")


def test_activate_and_done() -> None:
    q = SchedulingQueue()
    q.add(ref("g"), priority=0, created=0.0)
    q.pop(0.0)
    q.unschedulable(ref("g"), now=0.0)
    q.activate(ref("g"))
    assert q.pop(0.0) == ref("g")
    q.done(ref("g"))
    assert ref("g") not in q and len(q) == 0
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0}


def test_a_gang_scheduled_with_members_left_over_is_requeued_at_once() -> None:
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0)
    q.add(ref("g"), priority=5, created=3.0)
    q.add(ref("younger"), priority=5, created=4.0)
    for attempt in range(3):
        assert q.pop(100.0 * attempt) == ref("g")
        q.unschedulable(ref("g"), now=100.0 * attempt)
        q.cluster_changed(100.0 * attempt + 50)
    assert q.attempts_of(ref("g")) == 3
    assert q.pop(1000.0) == ref("g")
    q.requeue(ref("g"))
    # Active now, its history forgotten, and still ahead of the younger gang.
    assert q.state_of(ref("g")) is State.ACTIVE
    assert q.attempts_of(ref("g")) == 0
    assert q.pop(1000.0) == ref("g")
    q.requeue(ref("absent"))  # unknown gangs are ignored
    assert ref("absent") not in q


def test_with_nothing_active_a_gang_moved_by_a_change_skips_the_rest_of_its_backoff() -> None:
    """kube-scheduler's SchedulerPopFromBackoffQ: the backoff only orders gangs while the
    scheduler is busy. A preemptor whose victims just left is tried at once."""
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0)
    q.add(ref("g"), priority=0, created=0.0)
    assert q.pop(0.0) == ref("g")
    q.unschedulable(ref("g"), now=0.0)
    assert q.pop(0.5) is None, "no change yet: it stays in the unschedulable pool"
    q.cluster_changed(0.5)
    assert q.state_of(ref("g")) is State.BACKOFF
    assert q.pop(0.5) == ref("g")
    assert q.pop(0.5) is None  # in flight: popped once


def test_early_pops_come_after_active_gangs_in_upstream_backoff_order() -> None:
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0)
    for name, priority in (("low", 0), ("high", 100), ("later", 100)):
        q.add(ref(name), priority=priority, created=0.0)
        assert q.pop(0.0) == ref(name)
    q.unschedulable(ref("low"), now=0.0)  # backoff ends at 1.0
    q.unschedulable(ref("high"), now=0.2)  # at 1.2: same second as low's, higher priority
    q.unschedulable(ref("later"), now=0.2)
    q.unschedulable(ref("later"), now=1.0)  # second failure: 2 s, ends at 3.0
    q.add(ref("new"), priority=0, created=1.0)
    q.cluster_changed(0.3)
    assert [q.pop(0.3) for _ in range(5)] == [
        ref("new"),  # an active gang always first
        ref("high"),
        ref("low"),
        ref("later"),
        None,
    ]


def test_a_gang_backing_off_after_an_error_sits_it_out() -> None:
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0)
    q.add(ref("g"), priority=0, created=0.0)
    assert q.pop(0.0) == ref("g")
    q.backoff(ref("g"), now=0.0)  # e.g. a bind the API server refused
    q.cluster_changed(0.1)
    assert q.pop(0.5) is None
    assert q.pop(1.0) == ref("g")


def test_pop_from_backoff_can_be_turned_off() -> None:
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0, pop_from_backoff=False)
    q.add(ref("g"), priority=0, created=0.0)
    assert q.pop(0.0) == ref("g")
    q.unschedulable(ref("g"), now=0.0)
    q.cluster_changed(0.5)
    assert q.pop(0.5) is None
    assert q.pop(1.0) == ref("g")
