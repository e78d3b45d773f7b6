"""The scheduling queue of gangs: active, backoff and unschedulable, as in kube-scheduler.

Pure and clock-free: callers pass `now`. Gangs are ordered by priority, then a timestamp,
then a name, which each dialect's rules supply (core/queue_order.py), so a high-priority
gang is never stuck behind a low one; a gang that cannot be placed goes to
the unschedulable pool and comes back only when the cluster changes in a way that may help
(or after a flush interval), so it never blocks the others.

A backoff is a penalty for when the scheduler is busy, not a wait for its own sake: with
nothing active, the gang a cluster change moved to backoff is tried at once (kube-scheduler's
SchedulerPopFromBackoffQ, on by default since 1.33). A preemptor is the common case: its
victims gone, it used to sit out the rest of its one-second backoff with the loop idle.

Every gang waiting for a time (its backoff, the unschedulable flush, a `retry_by`) has one
live item in a heap of timers, and the gangs are indexed by state, so taking the next gang,
a cluster change and the counts cost what they touch, not the whole queue: each pop used to
look at every gang, and a burst of 5,000 gangs took 25 million looks to drain.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from enum import StrEnum

from gangsched.core.model import GroupRef

ACTIVE, BACKOFF, UNSCHEDULABLE = "active", "backoff", "unschedulable"
#: Stale timer items tolerated beyond one per gang before the heap is rebuilt (`_arm`).
STALE_TIMERS_SLACK = 64


class State(StrEnum):
    ACTIVE = ACTIVE
    BACKOFF = BACKOFF
    UNSCHEDULABLE = UNSCHEDULABLE


@dataclass(slots=True)
class _Entry:
    ref: GroupRef
    priority: int
    created: float
    name: str
    state: State = State.ACTIVE
    attempts: int = 0
    ready_at: float = 0.0
    since: float = 0.0
    seq: int = 0
    #: Held before the cycle (members or PodGroup missing): only a change to the gang itself
    #: can help, so other cluster changes leave it where it is.
    waiting: bool = False
    #: In backoff after an error (not after a cluster change): sits it out whatever happens.
    errored: bool = False
    #: Unschedulable, but tried again by then whatever happens (a wait for capacity ends).
    retry_at: float = math.inf
    #: The stamp of this gang's live item in the queue's timers (older items are stale).
    timer: int = 0


@dataclass(slots=True)
class SchedulingQueue:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    #: Unschedulable gangs are retried at least this often even without a helpful event.
    unschedulable_flush: float = 300.0
    #: With nothing active, pop a gang moved to backoff by a cluster change before its
    #: backoff is over (not one backing off after an error).
    pop_from_backoff: bool = True
    _entries: dict[GroupRef, _Entry] = field(default_factory=dict)
    _heap: list[tuple[int, float, str, int, GroupRef]] = field(default_factory=list)
    _seq: int = 0
    #: The gangs of each state (a gang in flight is in BACKOFF with no end).
    _by_state: dict[State, dict[GroupRef, _Entry]] = field(
        default_factory=lambda: {state: {} for state in State}
    )
    #: (when, stamp, gang): when a gang in BACKOFF or UNSCHEDULABLE is due (`_due`).
    _timers: list[tuple[float, int, GroupRef]] = field(default_factory=list)
    _stamp: int = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, ref: GroupRef) -> bool:
        return ref in self._entries

    def add(
        self,
        ref: GroupRef,
        *,
        priority: int,
        created: float,
        name: str | None = None,
        now: float = 0.0,
    ) -> None:
        """A gang has pending pods. New gangs become active; known ones keep their state.
        `created` and `name` order gangs of equal priority (`name` defaults to the ref's)."""
        order_name = ref.key if name is None else name
        entry = self._entries.get(ref)
        if entry is None:
            entry = _Entry(ref, priority, created, order_name, since=now)
            self._entries[ref] = entry
            self._by_state[entry.state][ref] = entry
            self._push(entry)
        elif (entry.priority, entry.created, entry.name) != (priority, created, order_name):
            entry.priority, entry.created, entry.name = priority, created, order_name
            if entry.state is State.ACTIVE:
                self._push(entry)

    def remove(self, ref: GroupRef) -> None:
        entry = self._entries.pop(ref, None)
        if entry is not None:
            del self._by_state[entry.state][ref]

    def pop(self, now: float) -> GroupRef | None:
        """The most important gang ready to be tried, or None."""
        self._release(now)
        while self._heap:
            _, _, _, seq, ref = heapq.heappop(self._heap)
            entry = self._entries.get(ref)
            if entry is None or entry.state is not State.ACTIVE or entry.seq != seq:
                continue  # stale heap item
            return self._take(entry)
        if self.pop_from_backoff:
            early = [
                e
                for e in self._by_state[State.BACKOFF].values()
                if not e.errored and e.ready_at != math.inf
            ]
            if early:
                # Upstream's backoff order: by the second the backoff ends, then as the
                # active queue orders.
                return self._take(
                    min(
                        early,
                        key=lambda e: (math.floor(e.ready_at), -e.priority, e.created, e.name),
                    )
                )
        return None

    def _take(self, entry: _Entry) -> GroupRef:
        entry.ready_at = math.inf
        entry.errored = False
        self._set_state(entry, State.BACKOFF)  # in flight: not poppable until requeued
        return entry.ref

    def attempts_of(self, ref: GroupRef) -> int:
        """Failed attempts so far (0 for a gang tried for the first time)."""
        entry = self._entries.get(ref)
        return entry.attempts if entry is not None else 0

    def done(self, ref: GroupRef) -> None:
        """Scheduled (or no longer pending): forget it and its backoff history."""
        self.remove(ref)

    def requeue(self, ref: GroupRef) -> None:
        """Scheduled, with members left over: active again at once, its backoff history
        forgotten and its place in the order kept (upstream's requeue after a successful
        pod group attempt, which preserves the timestamp so the rest can preempt at once)."""
        entry = self._entries.get(ref)
        if entry is None:
            return
        entry.attempts = 0
        entry.waiting = False
        self._set_state(entry, State.ACTIVE)
        self._push(entry)

    def unschedulable(
        self, ref: GroupRef, now: float, *, counted: bool = True, waiting: bool = False
    ) -> None:
        """Tried and not placed: back when the cluster changes, after the backoff.

        `counted=False` for a gang that is not ready rather than failed (members or its
        PodGroup still missing, its own preemption victims still terminating): the attempt
        does not grow the backoff, so it is retried within `initial_backoff` of the event
        that makes it ready, however long it waited (kube-scheduler's PreEnqueue does not
        count such pods as attempts either). `waiting=True` (members or PodGroup missing,
        members gated): only `activate_waiting` or `activate` brings it back, as
        upstream's queueing hints wake a PreEnqueue-held gang only for its own pods and
        PodGroup; a node added or a pod deleted elsewhere cannot complete it."""
        entry = self._entries.get(ref)
        if entry is None:
            return
        if counted:
            entry.attempts += 1
        entry.waiting = waiting
        entry.since = now
        entry.retry_at = math.inf
        entry.ready_at = now + (
            self.backoff_for(entry.attempts) if counted else self.initial_backoff
        )
        self._set_state(entry, State.UNSCHEDULABLE)

    def retry_by(self, ref: GroupRef, at: float) -> None:
        """An unschedulable gang is tried again at `at` even if nothing changes: its wait for
        new capacity ends then, and it may preempt (core/preemption/capacity_wait.py)."""
        entry = self._entries.get(ref)
        if entry is not None and entry.state is State.UNSCHEDULABLE:
            entry.retry_at = at
            self._arm(entry)

    def next_retry_at(self) -> float | None:
        """The earliest `retry_by` time of an unschedulable gang (simulate's virtual clock
        jumps there when nothing else is left to do)."""
        times = [e.retry_at for e in self._by_state[State.UNSCHEDULABLE].values()]
        finite = [t for t in times if t != math.inf]
        return min(finite) if finite else None

    def backoff(self, ref: GroupRef, now: float) -> None:
        """Retry after the backoff interval whatever happens (errors, lost binds)."""
        entry = self._entries.get(ref)
        if entry is None:
            return
        entry.attempts += 1
        entry.waiting = False
        entry.errored = True
        entry.ready_at = now + self.backoff_for(entry.attempts)
        self._set_state(entry, State.BACKOFF)

    def activate(self, ref: GroupRef) -> None:
        """Retry now (e.g. its preemption victims are gone)."""
        entry = self._entries.get(ref)
        if entry is not None and entry.state is not State.ACTIVE:
            entry.waiting = False
            self._set_state(entry, State.ACTIVE)
            self._push(entry)

    def activate_waiting(self, ref: GroupRef) -> None:
        """One of the gang's own pods changed: retry now if it was held waiting for its
        members (a gate removed, a min-available annotation changed); a gang in backoff
        for any other reason keeps its backoff."""
        entry = self._entries.get(ref)
        if entry is not None and entry.waiting and entry.state is State.UNSCHEDULABLE:
            self.activate(ref)

    def wake_waiting(self) -> None:
        """Membership may have changed without per-pod events (a relist): retry every gang
        held waiting for its members."""
        for ref in [r for r, e in self._by_state[State.UNSCHEDULABLE].items() if e.waiting]:
            self.activate_waiting(ref)

    def is_waiting(self, ref: GroupRef) -> bool:
        entry = self._entries.get(ref)
        return entry is not None and entry.waiting

    def cluster_changed(self, now: float) -> int:
        """Something that may help happened: unschedulable gangs go to backoff or active."""
        moved = 0
        for entry in list(self._by_state[State.UNSCHEDULABLE].values()):
            if not entry.waiting:
                moved += 1
                if entry.ready_at <= now:
                    self._set_state(entry, State.ACTIVE)
                    self._push(entry)
                else:
                    self._set_state(entry, State.BACKOFF)
        return moved

    def backoff_for(self, attempts: int) -> float:
        return float(min(self.max_backoff, self.initial_backoff * 2 ** max(attempts - 1, 0)))

    def next_ready_at(self) -> float | None:
        """When the earliest backoff expires (for a driver deciding how long to sleep)."""
        timers = self._timers
        while timers and not self._live(timers[0]):
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    def counts(self) -> dict[str, int]:
        return {state.value: len(self._by_state[state]) for state in State}

    def state_of(self, ref: GroupRef) -> State | None:
        entry = self._entries.get(ref)
        return entry.state if entry else None

    def _release(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            item = heapq.heappop(timers)
            if not self._live(item):
                continue
            entry = self._entries[item[2]]
            if entry.state is State.UNSCHEDULABLE:
                entry.retry_at = math.inf
                entry.since = now
            self._set_state(entry, State.ACTIVE)
            self._push(entry)

    def _set_state(self, entry: _Entry, state: State) -> None:
        if entry.state is not state:
            del self._by_state[entry.state][entry.ref]
            entry.state = state
            self._by_state[state][entry.ref] = entry
        self._arm(entry)

    def _due(self, entry: _Entry) -> float:
        """When a gang leaves its state whatever happens: the end of its backoff, or for an
        unschedulable one the flush interval or its `retry_by`, whichever comes first."""
        if entry.state is State.BACKOFF:
            return entry.ready_at
        if entry.state is State.UNSCHEDULABLE:
            return min(entry.since + self.unschedulable_flush, entry.retry_at)
        return math.inf

    def _arm(self, entry: _Entry) -> None:
        """Give `entry` its one live timer (none if nothing is due), staling the older.

        A stale item leaves the heap when its time comes, up to `unschedulable_flush` later:
        a gang retried every few seconds would leave dozens behind it. Once stale items
        outnumber the gangs, the heap is rebuilt from the live ones (amortised: at least as
        many arms as gangs between two rebuilds)."""
        self._stamp += 1
        entry.timer = self._stamp
        due = self._due(entry)
        if due != math.inf:
            heapq.heappush(self._timers, (due, entry.timer, entry.ref))
        if len(self._timers) > 2 * len(self._entries) + STALE_TIMERS_SLACK:
            self._timers = [item for item in self._timers if self._live(item)]
            heapq.heapify(self._timers)

    def _live(self, item: tuple[float, int, GroupRef]) -> bool:
        entry = self._entries.get(item[2])
        return entry is not None and entry.timer == item[1]

    def _push(self, entry: _Entry) -> None:
        self._seq += 1
        entry.seq = self._seq
        heapq.heappush(
            self._heap, (-entry.priority, entry.created, entry.name, entry.seq, entry.ref)
        )
