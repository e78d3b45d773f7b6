"""Leader election on a coordination.k8s.io Lease, with kube-scheduler's timings.

Only the leader schedules or writes; followers keep warm caches so a takeover schedules within
seconds. Expiry is judged by our own clock from when we last saw the lease change (as
client-go does), never by comparing our clock with the holder's timestamps, so clock skew
between replicas cannot make two leaders.

A follower watches the lease (one object, by field selector) and wakes at the moment the
lease it last saw expires: client-go's follower learns of the last renewal up to one retry
period late and tries again up to one retry period after expiry, so it took over up to two
retry periods (4 s) after the lease expired; this one sees each renewal within milliseconds
and tries at expiry (issue 17: a warm follower binds within lease expiry + 1 s). It still
reads the lease once a retry period, and every `observe_period` (0.5 s) while the watch is
down (no `watch` permission on leases, API server restarting), so a lost watch costs at most
half a second, never a takeover.

A leader that cannot renew within the renew deadline stops writing at once and reports the
loss, and the process exits non-zero to restart clean.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from gangsched.edge.kube import JSON, Kube, KubeError

log = structlog.get_logger("gangsched.leader")


class LeadershipLost(RuntimeError):
    """This replica held the lease and lost it: stop writing, exit, restart clean."""


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    kube: Kube
    identity: str
    name: str = "gangsched"
    namespace: str = "gangsched-system"
    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: How often a follower looks at the lease (never more than the retry period).
    observe_period: float = 0.5
    clock: Callable[[], float] = time.monotonic
    on_change: Callable[[bool], None] | None = None
    #: Called after each attempt to lead that failed: until one succeeds this replica binds
    #: nothing, so what waits for its first bind need not (the operator's watch hold).
    on_follow: Callable[[], None] | None = None
    leading: bool = False
    _observed: tuple[str, str] = ("", "")  # (holder, renewTime) last seen
    _observed_at: float = 0.0
    _observed_duration: float = 0.0
    _renewed_at: float = 0.0
    became_leader: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set by the lease watch on every change it delivers; the follower then re-plans its wait.
    _seen_change: asyncio.Event = field(default_factory=asyncio.Event)
    _watching: bool = False

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def is_leader(self) -> bool:
        """True only while the lease is ours and was renewed within the renew deadline."""
        return self.leading and self.clock() - self._renewed_at < self.renew_deadline

    async def run(self) -> None:
        """Acquire, then renew until lost (raises LeadershipLost) or cancelled."""
        watcher = asyncio.create_task(self._watch_lease())
        try:
            while not self.leading:
                if await self._attempt(self.lease_seconds):
                    self._set_leading(True)
                    break
                if self.on_follow is not None:
                    self.on_follow()
                await self._wait_for_turn()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        while True:
            await asyncio.sleep(self.retry_period)
            # An attempt may not outlive the renew deadline: a hung API server must not keep
            # a lost leader alive (its writes already stop at the deadline, see is_leader).
            remaining = self.renew_deadline - (self.clock() - self._renewed_at)
            if remaining > 0 and await self._attempt(remaining):
                continue
            if self.clock() - self._renewed_at >= self.renew_deadline:
                self._set_leading(False)
                raise LeadershipLost(
                    f"{self.identity} failed to renew lease {self.namespace}/{self.name} "
                    f"within {self.renew_deadline:g}s"
                )

    async def _wait_for_turn(self) -> None:
        """Sleep until the next try is due (follower_wait); a change the watch delivers only
        re-plans the sleep, unless it frees the lease, which is tried at once."""
        while True:
            self._seen_change.clear()
            try:
                await asyncio.wait_for(self._seen_change.wait(), self.follower_wait())
            except TimeoutError:
                return
            holder = self._observed[0]
            expired = self.clock() - self._observed_at >= self._observed_duration
            if not holder or holder == self.identity or expired:
                return

    def follower_wait(self) -> float:
        """Until the next try: a retry period while the watch reports every change (the
        observe period while it is down), or less if the lease we last saw expires sooner
        (then we try at that moment, not a period later)."""
        wait = self.retry_period if self._watching else min(self.observe_period, self.retry_period)
        if self._observed_duration:
            expires_in = self._observed_at + self._observed_duration - self.clock()
            wait = min(wait, max(expires_in, 0.0) + 0.001)
        return wait

    async def _watch_lease(self) -> None:
        """Follow the lease's changes while following; on any failure fall back to polling
        (see follower_wait) and watch again after a retry period. A 403 (an RBAC without
        `watch` on leases) is said once and polling stays."""
        query = {"fieldSelector": f"metadata.name={self.name}", "allowWatchBookmarks": "true"}
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        while not self.leading:
            try:
                # Without a resourceVersion the watch starts with the lease as it is now.
                async for event in self.kube.watch(
                    path, query=query, read_timeout=max(90.0, 3 * self.lease_seconds)
                ):
                    self._watching = True
                    lease = event.get("object") or {}
                    if event.get("type") in ("ADDED", "MODIFIED") and isinstance(lease, dict):
                        self._observe(lease, self.clock())
                        self._seen_change.set()
                continue  # the server ended the watch (its timeout): watch again at once
            except KubeError as exc:
                if exc.forbidden:
                    log.warning(
                        "cannot watch the lease; polling it instead",
                        lease=self.name,
                        every_s=min(self.observe_period, self.retry_period),
                    )
                    self._watching = False
                    return
                log.info("lease watch ended", lease=self.name, error=str(exc))
            except Exception as exc:  # connection lost, API server restarting, bad event
                log.info("lease watch ended", lease=self.name, error=repr(exc))
            self._watching = False
            await asyncio.sleep(self.retry_period)

    def _observe(self, lease: JSON, now: float) -> tuple[str, float]:
        """Record the lease as seen at `now`: the expiry clock restarts only when its holder or
        renewTime changed. Returns the holder and the lease duration it states."""
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        self._observed_duration = duration
        return holder, duration

    async def _attempt(self, timeout: float) -> bool:
        """One acquire/renew round trip, bounded in time; any failure is a failed attempt
        (connection refused while the API server restarts, timeouts, HTTP errors)."""
        try:
            return await asyncio.wait_for(self._try_acquire_or_renew(), timeout)
        except LeadershipLost:
            self._set_leading(False)
            raise
        except TimeoutError:
            log.warning("lease request timed out", lease=self.name, seconds=round(timeout, 1))
        except Exception as exc:
            log.warning("lease request failed", lease=self.name, error=repr(exc))
        return False

    async def release(self, timeout: float = 5.0) -> None:
        """Give the lease up on a clean shutdown so a follower takes over at once."""
        if not self.leading:
            return
        self._set_leading(False)
        try:
            await asyncio.wait_for(self._release(), timeout)
        except Exception as exc:  # API server unreachable: the lease simply expires
            log.warning("lease not released", lease=self.name, error=str(exc) or repr(exc))

    async def _release(self) -> None:
        lease = await self.kube.get(self.path)
        if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            await self.kube.request("PUT", self.path, body=lease)
            log.info("lease released", lease=self.name, identity=self.identity)

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            log.info("leadership", leading=leading, identity=self.identity, lease=self.name)
            if leading:
                self.became_leader.set()
            else:
                self.became_leader.clear()
            if self.on_change is not None:
                self.on_change(leading)

    async def _try_acquire_or_renew(self) -> bool:
        now = self.clock()
        try:
            lease = await self.kube.get(self.path)
        except KubeError as exc:
            if not exc.not_found:
                log.warning("lease read failed", error=str(exc))
                return False
            return await self._create()
        spec = lease.setdefault("spec", {})
        holder, duration = self._observe(lease, now)
        held_by_other = holder and holder != self.identity
        if held_by_other and self.leading:
            # Someone else holds it: stop writing now rather than at the renew deadline.
            raise LeadershipLost(f"lease {self.namespace}/{self.name} is now held by {holder}")
        if held_by_other and now - self._observed_at < duration:
            return False
        stamp = _micro_time()
        if holder != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self.lease_seconds)),
            renewTime=stamp,
        )
        try:
            # PUT with the read resourceVersion: a concurrent writer makes this a 409.
            await self.kube.request("PUT", self.path, body=lease)
        except KubeError as exc:
            if not exc.conflict:
                log.warning("lease update failed", error=str(exc))
            return False
        self._renewed_at = now
        self._observed = (self.identity, stamp)
        self._observed_at = now
        return True

    async def _create(self) -> bool:
        now = self.clock()
        stamp = _micro_time()
        body: JSON = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.lease_seconds)),
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        }
        try:
            await self.kube.post(
                f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body
            )
        except KubeError as exc:
            if not exc.conflict:
                log.warning("lease create failed", error=str(exc))
            return False
        self._renewed_at = now
        self._observed, self._observed_at = (self.identity, stamp), now
        return True
