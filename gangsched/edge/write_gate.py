"""How many of the writes that follow binds (events, gang budgets) go out at once: few while
binds are unanswered, more once every bind is answered.

Events reporting a gang's binds and the budget protecting a running gang are written after the
fact. Among the first binds of a start with 1,000 pending gangs, 200 events at once took the
API server's time from the binds they reported, so they went a few at a time (issue 30). But
a few at a time stayed the rule after the last bind: in a precreated (a) run the scheduler's
last budgets were created 39 s after its last bind (1,000 gangs, load 8), each gang unprotected
until then, and the run's cost window (until the scheduler's writes stop) grew by as much.

A semaphore whose size depends on whether binds are in flight: `while_binding` slots while the
actuator has a bind unanswered, `otherwise` slots after; waiters are granted slots in arrival
order when one frees or when the last bind is answered (`wake`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class WriteGate:
    #: Whether binds are unanswered (the actuator's count).
    binding: Callable[[], bool] = lambda: False
    while_binding: int = 4
    otherwise: int = 16
    in_flight: int = 0
    _waiters: deque[asyncio.Future[None]] = field(default_factory=deque)

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
        """Grant freed slots to waiters, oldest first (also when the last bind is answered,
        which raises the limit)."""
        limit = self.limit()
        while self._waiters and self.in_flight < limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    async def _acquire(self) -> None:
        if not self._waiters and self.in_flight < self.limit():
            self.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.in_flight -= 1  # granted as it was cancelled: hand the slot on
                self.wake()
            raise
