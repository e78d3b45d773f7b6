"""PodGroup status: phase, member counters, schedule start time and a PodGroupScheduled
condition, written through the status subresource only when something changed.

kopf delivers the PodGroup objects (see app.py) so we compare against what the API server
holds, not only against what we wrote last; the status itself is computed from the
scheduler's cache and the latest cycle outcome of each group.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from gangsched.core.decisions import Event, GroupOutcome
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.phase import count_members, group_phase
from gangsched.core.scheduler import (
    ERROR,
    NOT_READY_FOR_SCHEDULING,
    SCHEDULED,
    WAITING,
    WAITING_ON_PREEMPTION,
    Scheduler,
)
from gangsched.edge.kube import JSON, Kube, KubeError
from gangsched.edge.prebind import PRE_BINDING

if TYPE_CHECKING:  # the actuator imports nothing from here; keep the type only
    from gangsched.edge.actuator import Actuator

log = structlog.get_logger("gangsched.podgroup_status")

CONDITION = "PodGroupScheduled"
TIMEOUT_CONDITION = "PodGroupScheduleTimeout"
UPSTREAM_CONDITION = "PodGroupInitiallyScheduled"

_REASONS = {
    SCHEDULED: "Scheduled",
    WAITING_ON_PREEMPTION: "WaitingForPreemption",
    ERROR: "SchedulerError",
    # Held before the cycle (members missing or gated), KEP-5501's reason: not Unschedulable.
    WAITING: NOT_READY_FOR_SCHEDULING,
    # Placed; its pre-bind write-backs (volumes) wait to be confirmed before any member binds.
    PRE_BINDING: "PreBinding",
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PodGroupStatusWriter:
    kube: Kube
    scheduler: Scheduler
    actuator: Actuator
    may_write: Callable[[], bool] = lambda: True
    interval: float = 2.0
    versions: dict[Dialect, str] = field(default_factory=dict)
    #: Status as last seen on the server (kopf events) or written by us.
    current: dict[GroupRef, JSON] = field(default_factory=dict)
    first_attempt: dict[GroupRef, str] = field(default_factory=dict)
    _first_attempt_mono: dict[GroupRef, float] = field(default_factory=dict)
    _timed_out: set[GroupRef] = field(default_factory=set)

    def watch(self, dialect: Dialect, version: str) -> None:
        self.versions[dialect] = version

    def observed(self, ref: GroupRef, status: JSON | None) -> None:
        """The server's copy changed (called from kopf's PodGroup event handler)."""
        self.current[ref] = dict(status or {})
        started = (status or {}).get("scheduleStartTime")
        if started and ref not in self.first_attempt:
            self.first_attempt[ref] = str(started)

    async def run(self) -> None:
        """Write the groups whose outcome changed as soon as it does; sweep every group each
        `interval` for what only member pods change (running, succeeded, failed counts)."""
        last_sweep = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.actuator.outcome_changed.wait(), self.interval)
            self.actuator.outcome_changed.clear()
            if not self.may_write():
                continue
            now = time.monotonic()
            if now - last_sweep >= self.interval:
                last_sweep = now
                self.actuator.changed_groups.clear()
                await self.sync_once()
            else:
                changed = list(self.actuator.changed_groups)
                self.actuator.changed_groups.clear()
                await self.sync_once(changed)

    async def sync_once(self, refs: list[GroupRef] | None = None) -> None:
        for ref in list(self.scheduler.cluster.groups) if refs is None else refs:
            if ref.dialect not in self.versions:
                continue
            desired = self.desired(ref)
            if desired is None or _same(self.current.get(ref), desired):
                continue
            await self._write(ref, desired)

    def desired(self, ref: GroupRef) -> JSON | None:
        group = self.scheduler.cluster.groups.get(ref)
        if group is None:
            return None
        outcome: GroupOutcome | None = self.actuator.outcomes.get(ref)
        if outcome is not None and ref not in self.first_attempt:
            self.first_attempt[ref] = _now()
            self._first_attempt_mono[ref] = time.monotonic()
        members = self.scheduler.cluster.group_members(ref)
        holding = self.actuator.pre_binding_pods
        if holding:  # placed but not bound until their volumes are: not scheduled yet
            members = [
                dataclasses.replace(p, node_name=None) if p.key in holding else p for p in members
            ]
        counts = count_members(members)
        phase = group_phase(group.min_member, counts, attempted=outcome is not None)
        previous = self.current.get(ref) or {}
        conditions = list(previous.get("conditions") or [])
        if outcome is not None:
            ok = outcome.result == SCHEDULED or counts.scheduled >= group.min_member
            reason = "Scheduled" if ok else _REASONS.get(outcome.result, "Unschedulable")
            message = outcome.message if not ok else f"{counts.scheduled} pod(s) scheduled"
            conditions = _set_condition(conditions, CONDITION, ok, reason, message)
            if ref.dialect is Dialect.UPSTREAM and ok:
                conditions = _set_condition(conditions, UPSTREAM_CONDITION, True, reason, message)
            self._check_timeout(ref, group.schedule_timeout_seconds, ok, message)
            had_timeout = any(
                isinstance(c, dict) and c.get("type") == TIMEOUT_CONDITION for c in conditions
            )
            if ref in self._timed_out or (ok and had_timeout):
                conditions = _set_condition(
                    conditions,
                    TIMEOUT_CONDITION,
                    not ok,
                    "ScheduleTimeout" if not ok else "Scheduled",
                    f"not scheduled within scheduleTimeoutSeconds "
                    f"({group.schedule_timeout_seconds}s); still retrying: {message}"
                    if not ok
                    else "scheduled after the timeout",
                )
        if ref.dialect is Dialect.UPSTREAM:
            return {"conditions": conditions} if conditions else None
        status: JSON = {
            "phase": phase,
            "running": counts.running,
            "succeeded": counts.succeeded,
            "failed": counts.failed,
        }
        if ref.dialect is Dialect.SIGS:
            status["scheduled"] = counts.scheduled
            if conditions:
                status["conditions"] = conditions
        if ref in self.first_attempt:
            status["scheduleStartTime"] = self.first_attempt[ref]
        owners = sorted({p.owner for p in self.scheduler.cluster.group_members(ref) if p.owner})
        if owners:
            status["occupiedBy"] = owners[0]
        return status

    def _check_timeout(self, ref: GroupRef, timeout: int | None, ok: bool, message: str) -> None:
        if timeout is None or ok or ref in self._timed_out:
            if ok:
                self._timed_out.discard(ref)
            return
        started = self._first_attempt_mono.get(ref)
        if started is None or time.monotonic() - started < timeout:
            return
        self._timed_out.add(ref)
        self.actuator.apply_event(
            Event(
                "PodGroup",
                ref.key,
                "Warning",
                "ScheduleTimeout",
                "Scheduling",
                f"pod group not scheduled within {timeout}s; still retrying: {message}",
            )
        )

    async def _write(self, ref: GroupRef, status: JSON) -> None:
        version = self.versions[ref.dialect]
        path = f"/apis/{version}/namespaces/{ref.namespace}/podgroups/{ref.name}/status"
        try:
            await self.kube.patch(path, {"status": status})
        except KubeError as exc:
            if not exc.not_found:
                self.actuator.metrics.api_errors.labels("podgroup_status", str(exc.status)).inc()
                log.warning("PodGroup status not written", group=ref.key, error=str(exc))
            return
        except Exception as exc:  # API server unreachable: the next sweep retries
            self.actuator.metrics.api_errors.labels("podgroup_status", "connection").inc()
            log.warning("PodGroup status not written", group=ref.key, error=repr(exc))
            return
        self.current[ref] = status


def _set_condition(
    conditions: list[Any], type_: str, ok: bool, reason: str, message: str
) -> list[Any]:
    status = "True" if ok else "False"
    out = [c for c in conditions if isinstance(c, dict) and c.get("type") != type_]
    old = next((c for c in conditions if isinstance(c, dict) and c.get("type") == type_), None)
    since = _now()
    if old is not None and old.get("status") == status:
        since = old.get("lastTransitionTime") or since
    out.append(
        {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message[:32768],
            "lastTransitionTime": since,
        }
    )
    return sorted(out, key=lambda c: str(c.get("type")))


def _same(current: JSON | None, desired: JSON) -> bool:
    """Equal apart from condition timestamps (which only change with the status)."""
    if current is None:
        return False

    def strip(status: JSON) -> JSON:
        copy = dict(status)
        copy["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in status.get("conditions") or []
            if isinstance(c, dict)
        ]
        return copy

    return all(strip(current).get(k) == v for k, v in strip(desired).items())
