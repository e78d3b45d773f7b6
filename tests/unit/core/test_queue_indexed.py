"""The queue's timers and per-state index decide exactly what looking at every gang decided.

The reference below is the queue as it was before the index (every pop looked at every gang:
quadratic in a burst): the same rules, written as scans. Random operation sequences drive
both; every answer and every gang's state, attempts and the counts must agree at each step.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.model import Dialect, GroupRef
from gangsched.core.queue import STALE_TIMERS_SLACK, SchedulingQueue, State


@dataclass
class _Gang:
    ref: GroupRef
    priority: int
    created: float
    name: str
    state: State = State.ACTIVE
    attempts: int = 0
    ready_at: float = 0.0
    since: float = 0.0
    seq: int = 0
    waiting: bool = False
    errored: bool = False
    retry_at: float = math.inf


@dataclass
class ScanningQueue:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    unschedulable_flush: float = 300.0
    gangs: dict[GroupRef, _Gang] = field(default_factory=dict)
    heap: list[tuple[int, float, str, int, GroupRef]] = field(default_factory=list)
    seq: int = 0

    def add(self, ref: GroupRef, priority: int, created: float, now: float) -> None:
        gang = self.gangs.get(ref)
        if gang is None:
            self.gangs[ref] = gang = _Gang(ref, priority, created, ref.key, since=now)
            self._push(gang)
        elif (gang.priority, gang.created) != (priority, created):
            gang.priority, gang.created = priority, created
            if gang.state is State.ACTIVE:
                self._push(gang)

    def pop(self, now: float) -> GroupRef | None:
        for gang in self.gangs.values():
            if gang.state is State.BACKOFF and gang.ready_at <= now:
                gang.state = State.ACTIVE
                self._push(gang)
            elif gang.state is State.UNSCHEDULABLE and (
                now - gang.since >= self.unschedulable_flush or now >= gang.retry_at
            ):
                gang.retry_at, gang.state, gang.since = math.inf, State.ACTIVE, now
                self._push(gang)
        while self.heap:
            _, _, _, seq, ref = heapq.heappop(self.heap)
            top = self.gangs.get(ref)
            if top is not None and top.state is State.ACTIVE and top.seq == seq:
                return self._take(top)
        early = [
            g
            for g in self.gangs.values()
            if g.state is State.BACKOFF and not g.errored and g.ready_at != math.inf
        ]
        if early:
            return self._take(
                min(early, key=lambda g: (math.floor(g.ready_at), -g.priority, g.created, g.name))
            )
        return None

    def unschedulable(self, ref: GroupRef, now: float, counted: bool, waiting: bool) -> None:
        gang = self.gangs.get(ref)
        if gang is None:
            return
        gang.attempts += counted
        gang.state, gang.waiting, gang.since, gang.retry_at = (
            State.UNSCHEDULABLE,
            waiting,
            now,
            math.inf,
        )
        gang.ready_at = now + (self.backoff_for(gang.attempts) if counted else self.initial_backoff)

    def retry_by(self, ref: GroupRef, at: float) -> None:
        gang = self.gangs.get(ref)
        if gang is not None and gang.state is State.UNSCHEDULABLE:
            gang.retry_at = at

    def backoff(self, ref: GroupRef, now: float) -> None:
        gang = self.gangs.get(ref)
        if gang is not None:
            gang.attempts += 1
            gang.state, gang.waiting, gang.errored = State.BACKOFF, False, True
            gang.ready_at = now + self.backoff_for(gang.attempts)

    def activate(self, ref: GroupRef) -> None:
        gang = self.gangs.get(ref)
        if gang is not None and gang.state is not State.ACTIVE:
            gang.state, gang.waiting = State.ACTIVE, False
            self._push(gang)

    def activate_waiting(self, ref: GroupRef) -> None:
        gang = self.gangs.get(ref)
        if gang is not None and gang.waiting and gang.state is State.UNSCHEDULABLE:
            self.activate(ref)

    def wake_waiting(self) -> None:
        for ref in [r for r, g in self.gangs.items() if g.waiting]:
            self.activate_waiting(ref)

    def requeue(self, ref: GroupRef) -> None:
        gang = self.gangs.get(ref)
        if gang is not None:
            gang.attempts, gang.state, gang.waiting = 0, State.ACTIVE, False
            self._push(gang)

    def cluster_changed(self, now: float) -> int:
        moved = 0
        for gang in self.gangs.values():
            if gang.state is State.UNSCHEDULABLE and not gang.waiting:
                moved += 1
                if gang.ready_at <= now:
                    gang.state = State.ACTIVE
                    self._push(gang)
                else:
                    gang.state = State.BACKOFF
        return moved

    def next_ready_at(self) -> float | None:
        times = [g.ready_at for g in self.gangs.values() if g.state is State.BACKOFF]
        times += [
            min(g.since + self.unschedulable_flush, g.retry_at)
            for g in self.gangs.values()
            if g.state is State.UNSCHEDULABLE
        ]
        finite = [t for t in times if t != math.inf]
        return min(finite) if finite else None

    def next_retry_at(self) -> float | None:
        times = [g.retry_at for g in self.gangs.values() if g.state is State.UNSCHEDULABLE]
        finite = [t for t in times if t != math.inf]
        return min(finite) if finite else None

    def counts(self) -> dict[str, int]:
        result = {state.value: 0 for state in State}
        for gang in self.gangs.values():
            result[gang.state.value] += 1
        return result

    def backoff_for(self, attempts: int) -> float:
        return float(min(self.max_backoff, self.initial_backoff * 2 ** max(attempts - 1, 0)))

    def _take(self, gang: _Gang) -> GroupRef:
        gang.state, gang.ready_at, gang.errored = State.BACKOFF, math.inf, False
        return gang.ref

    def _push(self, gang: _Gang) -> None:
        self.seq += 1
        gang.seq = self.seq
        heapq.heappush(self.heap, (-gang.priority, gang.created, gang.name, gang.seq, gang.ref))


REFS = [GroupRef(Dialect.SIGS, "default", f"g{i}") for i in range(3)]
gang = st.sampled_from(REFS)
# Whole-second steps with halves between: backoffs (1, 2, 4, 8, 10 s) end on them, and a
# flush of 5 s comes round within a sequence.
step = st.sampled_from([0.0, 0.5, 1.0, 2.0, 6.0])
operation = st.one_of(
    st.tuples(st.just("add"), gang, st.integers(0, 2), st.sampled_from([0.0, 1.0])),
    st.tuples(st.just("pop")),
    st.tuples(st.just("unschedulable"), gang, st.booleans(), st.booleans()),
    st.tuples(st.just("retry_by"), gang, st.sampled_from([0.5, 3.0, 20.0])),
    st.tuples(st.just("backoff"), gang),
    st.tuples(st.just("activate"), gang),
    st.tuples(st.just("activate_waiting"), gang),
    st.tuples(st.just("wake_waiting")),
    st.tuples(st.just("requeue"), gang),
    st.tuples(st.just("cluster_changed")),
    st.tuples(st.just("done"), gang),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(step, operation), min_size=20, max_size=80))
def test_the_indexed_queue_decides_as_a_scan_of_every_gang(
    script: list[tuple[float, tuple[object, ...]]],
) -> None:
    queue = SchedulingQueue(unschedulable_flush=5.0)
    reference = ScanningQueue(unschedulable_flush=5.0)
    now = 0.0
    for i, ref in enumerate(REFS):  # every gang known from the start: most steps then act
        queue.add(ref, priority=i % 2, created=0.0, now=now)
        reference.add(ref, i % 2, 0.0, now)
    for advance, (name, *args) in script:
        now += advance
        target = args[0] if args else None
        assert target is None or isinstance(target, GroupRef)
        if name == "add":
            priority, created = args[1:]
            assert target is not None and isinstance(priority, int)
            assert isinstance(created, float)
            queue.add(target, priority=priority, created=created, now=now)
            reference.add(target, priority, created, now)
        elif name == "pop":
            assert queue.pop(now) == reference.pop(now)
        elif name == "unschedulable":
            counted, waiting = bool(args[1]), bool(args[2])
            assert target is not None
            queue.unschedulable(target, now, counted=counted, waiting=waiting)
            reference.unschedulable(target, now, counted, waiting)
        elif name == "retry_by":
            later = args[1]
            assert target is not None and isinstance(later, float)
            queue.retry_by(target, now + later)
            reference.retry_by(target, now + later)
        elif name == "cluster_changed":
            assert queue.cluster_changed(now) == reference.cluster_changed(now)
        elif name == "wake_waiting":
            queue.wake_waiting()
            reference.wake_waiting()
        elif name == "done":
            assert target is not None
            queue.done(target)
            reference.gangs.pop(target, None)
        else:  # backoff, activate, activate_waiting, requeue: one gang, maybe a time
            assert target is not None and isinstance(name, str)
            if name == "backoff":
                queue.backoff(target, now)
                reference.backoff(target, now)
            else:
                getattr(queue, name)(target)
                getattr(reference, name)(target)
        assert queue.counts() == reference.counts()
        assert queue.next_ready_at() == reference.next_ready_at()
        assert queue.next_retry_at() == reference.next_retry_at()
        assert len(queue) == len(reference.gangs)
        for ref in REFS:
            known = reference.gangs.get(ref)
            assert queue.state_of(ref) == (known.state if known else None)
            assert queue.attempts_of(ref) == (known.attempts if known else 0)
            assert queue.is_waiting(ref) == (known is not None and known.waiting)
    # Drained to the end, both give the same gangs in the same order.
    later = now + 1000.0
    assert [queue.pop(later) for _ in REFS] == [reference.pop(later) for _ in REFS]


def test_stale_timers_do_not_pile_up() -> None:
    # Each retry re-arms a gang's timer; the item it replaces would otherwise wait in the
    # heap until the flush interval (300 s) ran out.
    queue = SchedulingQueue()
    refs = [GroupRef(Dialect.SIGS, "default", f"s{i}") for i in range(100)]
    for ref in refs:
        queue.add(ref, priority=0, created=0.0)
    now = 0.0
    for _ in range(50):
        while (taken := queue.pop(now)) is not None:
            queue.unschedulable(taken, now)
        queue.cluster_changed(now)
        now += 10.0
        assert len(queue._timers) <= 2 * len(refs) + STALE_TIMERS_SLACK + 1
    assert queue.next_ready_at() is not None and len(queue) == len(refs)
