"""Leader election against an in-memory Lease store: acquisition, takeover after expiry by
the follower's own clock, renew deadline, hung or unreachable API server, release."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gangsched.edge.kube import KubeError
from gangsched.edge.leader import LeaderElector, LeadershipLost

pytestmark = pytest.mark.asyncio(loop_scope="function")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LeaseServer:
    """Just enough of the API server for one Lease: GET, POST, PUT with resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.fail: Exception | None = None
        self.hang = False
        self.puts = 0
        self.gets = 0
        self.watch_forbidden = False
        self.watchers: list[asyncio.Queue[dict[str, Any]]] = []

    def _publish(self, kind: str) -> None:
        for queue in self.watchers:
            queue.put_nowait({"type": kind, "object": copy.deepcopy(self.lease)})

    async def watch(self, path: str, *, query: Any, read_timeout: float) -> Any:
        """The lease's changes, starting with the lease as it is (a watch without a
        resourceVersion); a 403 when the RBAC lacks `watch`."""
        if self.watch_forbidden:
            raise KubeError(403, "Forbidden", "leases is forbidden: cannot watch")
        assert query["fieldSelector"] == "metadata.name=gangsched"
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.watchers.append(queue)
        try:
            if self.lease is not None:
                yield {"type": "ADDED", "object": copy.deepcopy(self.lease)}
            while True:
                yield await queue.get()
        finally:
            self.watchers.remove(queue)

    async def _check(self) -> None:
        if self.hang:
            await asyncio.sleep(3600)
        if self.fail is not None:
            raise self.fail

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        await self._check()
        self.gets += 1
        if self.lease is None:
            raise KubeError(404, "NotFound", "leases not found")
        return copy.deepcopy(self.lease)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._check()
        if self.lease is not None:
            raise KubeError(409, "AlreadyExists", "exists")
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        self._publish("ADDED")
        return copy.deepcopy(self.lease)

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        assert method == "PUT"
        await self._check()
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", "the object has been modified")
        self.version += 1
        self.puts += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        self._publish("MODIFIED")
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str:
        return str(((self.lease or {}).get("spec") or {}).get("holderIdentity") or "")


def elector(server: LeaseServer, identity: str, clock: Clock, **kw: Any) -> LeaderElector:
    return LeaderElector(
        kube=server,  # type: ignore[arg-type]
        identity=identity,
        clock=clock,
        retry_period=0.01,
        **kw,
    )


async def test_first_replica_acquires_and_second_waits_for_expiry_by_its_own_clock() -> None:
    server, clock = LeaseServer(), Clock()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert await a._try_acquire_or_renew()
    a._set_leading(True)
    assert server.holder == "a" and a.is_leader()
    # b sees a's lease: not expired by b's clock until 15 s after b first saw it unchanged.
    assert not await b._try_acquire_or_renew()
    clock.now += 14.9
    assert not await b._try_acquire_or_renew()
    assert not a.is_leader()  # a has not renewed for 14.9 s > renew deadline: no writes
    clock.now += 0.2
    assert await b._try_acquire_or_renew()
    assert server.holder == "b"
    assert server.lease is not None and server.lease["spec"]["leaseTransitions"] == 1


async def test_renewals_restart_the_followers_expiry() -> None:
    server, clock = LeaseServer(), Clock()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    await a._try_acquire_or_renew()
    a._set_leading(True)
    for _ in range(20):
        clock.now += 2
        assert await a._try_acquire_or_renew()
        assert not await b._try_acquire_or_renew()
    assert server.holder == "a"


async def test_leader_that_sees_another_holder_stops_at_once() -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock)
    await a._try_acquire_or_renew()
    a._set_leading(True)
    assert server.lease is not None
    server.lease["spec"]["holderIdentity"] = "b"
    with pytest.raises(LeadershipLost):
        await a._attempt(1.0)
    assert not a.leading and not a.is_leader()


async def test_unreachable_api_server_loses_leadership_at_the_renew_deadline() -> None:
    server = LeaseServer()
    changes: list[bool] = []
    a = LeaderElector(
        kube=server,  # type: ignore[arg-type]
        identity="a",
        lease_seconds=0.6,
        renew_deadline=0.4,
        retry_period=0.05,
        on_change=changes.append,
    )
    task = asyncio.create_task(a.run())
    await asyncio.wait_for(a.became_leader.wait(), 5)
    server.fail = ConnectionRefusedError("apiserver restarting")  # not a KubeError
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(task, 5)
    assert changes == [True, False]
    assert not a.is_leader()


async def test_hung_api_server_cannot_stretch_the_renew_deadline() -> None:
    server = LeaseServer()
    loop = asyncio.get_running_loop()
    a = LeaderElector(
        kube=server,  # type: ignore[arg-type]
        identity="a",
        lease_seconds=0.6,
        renew_deadline=0.4,
        retry_period=0.05,
    )
    task = asyncio.create_task(a.run())
    await asyncio.wait_for(a.became_leader.wait(), 5)
    server.hang = True
    hung_at = loop.time()
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(task, 5)
    assert loop.time() - hung_at < 1.0  # the deadline (0.4 s), not the request timeout


async def test_release_hands_over_at_once_and_is_bounded() -> None:
    server, clock = LeaseServer(), Clock()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    await a._try_acquire_or_renew()
    a._set_leading(True)
    await a.release()
    assert server.holder == "" and not a.leading
    assert await b._try_acquire_or_renew()  # no waiting for the 15 s
    b._set_leading(True)
    server.hang = True
    await asyncio.wait_for(b.release(timeout=0.1), 2)  # gives up, the lease just expires


async def test_same_identity_after_a_restart_takes_its_lease_back_at_once() -> None:
    server, clock = LeaseServer(), Clock()
    first = elector(server, "pod-0", clock)
    await first._try_acquire_or_renew()
    restarted = elector(server, "pod-0", clock)
    assert await restarted._try_acquire_or_renew()


async def test_a_follower_looks_often_and_tries_at_the_moment_the_lease_expires() -> None:
    """Issue 17: the follower takes over within half a second of expiry by its own clock,
    not up to two retry periods after it as client-go's follower does."""
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock)
    b = LeaderElector(kube=server, identity="b", clock=clock)  # type: ignore[arg-type]
    assert b.retry_period == 2.0 and b.follower_wait() == 0.5  # nothing seen yet
    await a._try_acquire_or_renew()
    a._set_leading(True)
    assert not await b._try_acquire_or_renew()  # b sees a's lease now (15 s)
    assert b.follower_wait() == 0.5
    clock.now += 14.8
    assert 0.2 <= b.follower_wait() <= 0.202  # wakes at expiry, not 0.5 s later
    clock.now += 0.2
    assert b.follower_wait() <= 0.002
    assert await b._try_acquire_or_renew()
    assert server.holder == "b"


async def test_a_follower_that_sees_renewals_keeps_waiting_the_full_lease() -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock)
    b = LeaderElector(kube=server, identity="b", clock=clock)  # type: ignore[arg-type]
    await a._try_acquire_or_renew()
    a._set_leading(True)
    for _ in range(10):
        clock.now += 2
        assert await a._try_acquire_or_renew()
        assert not await b._try_acquire_or_renew()
        assert b.follower_wait() == 0.5
    clock.now += 14.9  # a stops renewing: 14.9 s since b saw the last renewal
    assert not await b._try_acquire_or_renew()
    assert b.follower_wait() <= 0.101
    clock.now += 0.1
    assert await b._try_acquire_or_renew()


async def _until(condition: Any, seconds: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def leader_a_and_running_follower_b(
    server: LeaseServer, clock: Clock, **follower: Any
) -> AsyncIterator[tuple[LeaderElector, LeaderElector]]:
    """`a` holds the lease; `b` runs (watching, or polling) until the block ends."""
    a = elector(server, "a", clock)
    await a._try_acquire_or_renew()
    a._set_leading(True)
    b = LeaderElector(kube=server, identity="b", clock=clock, **follower)  # type: ignore[arg-type]
    task = asyncio.create_task(b.run())
    try:
        yield a, b
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_watching_follower_sees_each_renewal_at_once_and_tries_at_expiry() -> None:
    """The follower's expiry clock restarts the moment a renewal is written (the watch), so
    it neither polls every half second nor takes over later than the lease allows."""
    server, clock = LeaseServer(), Clock()
    async with leader_a_and_running_follower_b(server, clock, retry_period=2.0) as (a, b):
        await _until(lambda: b._watching)
        seen_at = b._observed_at
        clock.now += 5.0
        assert await a._try_acquire_or_renew()  # a renews: b sees it through the watch
        await _until(lambda: b._observed_at == clock.now)
        assert b._observed_at > seen_at
        assert b.follower_wait() == 2.0  # watching: a safety read once a retry period only
        gets = server.gets
        await asyncio.sleep(0.05)
        assert server.gets == gets  # nothing polled in between
        clock.now += 14.9
        assert 0.1 <= b.follower_wait() <= 0.102
        clock.now += 0.2
        b._seen_change.set()  # wake b now (its real-time sleep does not follow the fake clock)
        await asyncio.wait_for(b.became_leader.wait(), 5)
        assert server.holder == "b"
        assert server.watchers == []  # the leader stops watching


async def test_a_follower_without_watch_permission_polls_the_lease() -> None:
    server, clock = LeaseServer(), Clock()
    server.watch_forbidden = True
    async with leader_a_and_running_follower_b(server, clock, observe_period=0.01) as (_, b):
        await _until(lambda: server.gets >= 5)  # polled every observe period
        assert not b._watching and b.follower_wait() == 0.01
        assert server.holder == "a"
        clock.now += 15.1
        await asyncio.wait_for(b.became_leader.wait(), 5)
        assert server.holder == "b"


async def test_a_watching_follower_takes_a_released_lease_at_once() -> None:
    server, clock = LeaseServer(), Clock()
    async with leader_a_and_running_follower_b(server, clock, retry_period=30.0) as (a, b):
        await _until(lambda: b._watching)
        await a.release()  # no clock advance, and b's next safety read is 15 s away
        await asyncio.wait_for(b.became_leader.wait(), 5)
        assert server.holder == "b"


async def test_a_follower_says_so_after_its_first_attempt_and_a_leader_never_does() -> None:
    """on_follow ends the operator's watch hold (Operator.idle_first): a follower binds
    nothing, so its watches and its /metrics and /readyz need not wait for a first bind."""
    server, clock = LeaseServer(), Clock()
    told: list[str] = []
    async with leader_a_and_running_follower_b(
        server, clock, retry_period=2.0, on_follow=lambda: told.append("b")
    ) as (_, b):
        await _until(lambda: told == ["b"])
        assert not b.leading
    c = elector(LeaseServer(), "c", clock, on_follow=lambda: told.append("c"))
    task = asyncio.create_task(c.run())
    try:
        await asyncio.wait_for(c.became_leader.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert told == ["b"]  # the lone replica led at its first attempt
