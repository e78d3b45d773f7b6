"""When the writes that follow binds (events, gang budgets, PodGroup statuses) go out: after
the binds, unless they have waited `max_wait`.

Events reporting a gang's binds, the budget protecting a running gang and its PodGroup status
are written after the fact, and on a 2-core control plane every one of them takes API server
(and, for a budget, controller manager) time from the binds still queued. Among the first
binds of a start with 1,000 pending gangs, 200 events at once slowed the binds they reported;
four at a time while binds were unanswered (the rule until issue 30's session 17) still put
an event, a budget and a status per gang between the binds: precreated (a), 3 rounds each
side by side, gangsched bound 128 / 125 / 171 pods a second with them, 156 / 186 / 170 with
every such write held until the last bind was answered. Held without bound, though, a budget
could wait as long as binds keep coming, and a gang run unprotected all that time; so a write
waits at most `max_wait` while binds are unanswered, then goes with a few others
(`while_binding` at once). Once every bind is answered `otherwise` go at once: a few at a time
after the last bind left a precreated (a) run's last budgets 39 s behind it (load 8).

Waiters are granted slots in arrival order, when one frees, when the oldest has waited
`max_wait`, or when the last bind is answered (`wake`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

#: Seconds a write that follows binds waits while binds are unanswered before it goes anyway.
MAX_WAIT_S = 10.0


@dataclass
class WriteGate:
    #: Whether binds are unanswered (the actuator's count).
    binding: Callable[[], bool] = lambda: False
    #: Seconds a write waits while binds are unanswered (0: it goes at once, `while_binding`
    #: at a time).
    max_wait: float = MAX_WAIT_S
    #: Writes at once while binds are unanswered (only those that have waited `max_wait`).
    while_binding: int = 4
    #: Writes at once when every bind is answered.
    otherwise: int = 16
    in_flight: int = 0
    #: Waiting writes, oldest first: since when (the event loop's clock), and their grant.
    _waiters: deque[tuple[float, asyncio.Future[None]]] = field(default_factory=deque)
    _timer: asyncio.TimerHandle | None = None

    def limit(self) -> int:
        return self.while_binding if self.binding() else self.otherwise

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the slots for the duration of a write."""
        await self._acquire()
        try:
            yield
        finally:
            self.in_flight -= 1
            self.wake()

    def wake(self) -> None:
        """Grant slots to waiters, oldest first, as far as the limit allows and (while binds
        are unanswered) to those that have waited `max_wait`; then arm a timer for when the
        oldest left will have."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        binding = self.binding()
        limit = self.while_binding if binding else self.otherwise
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._waiters and self.in_flight < limit:
            since, waiter = self._waiters[0]
            if waiter.done():  # cancelled while waiting
                self._waiters.popleft()
                continue
            if binding and now - since < self.max_wait:
                self._timer = loop.call_later(since + self.max_wait - now, self.wake)
                return
            self._waiters.popleft()
            self.in_flight += 1
            waiter.set_result(None)

    async def _acquire(self) -> None:
        binding = self.binding()
        if (
            not self._waiters
            and self.in_flight < self.limit()
            and (not binding or self.max_wait <= 0)
        ):
            self.in_flight += 1
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append((loop.time(), waiter))
        if len(self._waiters) == 1:
            self.wake()  # arms the timer for it (or grants it, when max_wait is 0)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.in_flight -= 1  # granted as it was cancelled: hand the slot on
                self.wake()
            raise
