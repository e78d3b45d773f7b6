"""PodGroup status written through the status subresource with server-side apply, only on
change, without touching what other writers put there.

What each dialect's status holds is decided in `gangsched.core.group_status` (kube-scheduler's
`PodGroupInitiallyScheduled` on scheduling.k8s.io, scheduler-plugins' phases on
scheduling.x-k8s.io, ours on scheduling.sigs.k8s.io). This module keeps the driver state (when a
group was first tried, whether it timed out, what the server holds) and writes: an apply under
gangsched's own field manager names only our fields, so a condition another controller wrote
in between survives (a merge patch of the whole `conditions` list would erase it).

Our PodGroup informers deliver the server's copy of every dialect's (gangsched.edge.cache), so
we compare against what the API server holds, not only against what we wrote last.

A group whose members are bound but still starting changes again and again (each member that
starts changes its counts, and the last its phase), so while any member is starting, the
status of the dialects that count members (_COUNTED) is written at most once per hold
(`podGroupStatusHoldSeconds`, STARTING_HOLD_S by default): a gang whose pods start within it
is written once, in its settled state; one pulling large images is written when the hold
ends, then at most once per hold until its pods run. That rule, not the pace of the writes, is
what coalesces them, so the writes of a sweep go out together through a WriteGate (issue 30:
one after another, the statuses of 1,000 gangs bound in 20 s were written until 34 s after
the last bind, everything the API server did meanwhile counting against the run; together
without the rule, 2.4 writes per gang, as kwok started the pods of a precreated (a) run up to
30 s after their binds).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from gangsched.core.composite.status import COMPOSITE_CONDITION, composite_status
from gangsched.core.decisions import SCHEDULED, WAITING, Event, GroupOutcome
from gangsched.core.group_status import (
    UPSTREAM_CONDITION,
    desired_status,
    find_condition,
    timestamp,
    unchanged,
)
from gangsched.core.model import Dialect, GroupRef, Pod
from gangsched.core.phase import count_members
from gangsched.core.queue import State
from gangsched.core.scheduler import Scheduler
from gangsched.edge.kube import JSON, Kube, KubeError
from gangsched.edge.write_gate import WriteGate

if TYPE_CHECKING:  # the actuator imports nothing from here; keep the type only
    from gangsched.edge.actuator import Actuator

log = structlog.get_logger("gangsched.podgroup_status")


#: How long a group's status waits while its members start, by default (see the module's
#: docstring; `podGroupStatusHoldSeconds`): a phase ("Scheduled") that lasts only until the
#: pods run is not worth an API write per gang while other gangs bind. Nothing is held for a
#: group none of whose members is starting (running, failed, finished, or unschedulable gangs).
STARTING_HOLD_S = 30.0

#: The dialects whose status counts members as they start (phase and counters): the ones the
#: hold is for. kube-scheduler's and the CompositePodGroup's condition says only whether the
#: group was placed, which does not change as its pods start.
_COUNTED = (Dialect.SIGS, Dialect.X_K8S)

#: The condition that never goes back from True, per dialect that has one.
_INITIALLY = {Dialect.UPSTREAM: UPSTREAM_CONDITION, Dialect.COMPOSITE: COMPOSITE_CONDITION}


def _held(
    since: dict[GroupRef, float], ref: GroupRef, now: float, limit: float, *, while_: bool
) -> bool:
    """Whether a status held `while_` a condition lasts is still held: for `limit` seconds
    from when `since` first saw the condition, forgotten as soon as it ends."""
    if not while_:
        since.pop(ref, None)
        return False
    return now - since.setdefault(ref, now) < limit


def _now() -> str:
    return timestamp(time.time())


@dataclass
class PodGroupStatusWriter:
    kube: Kube
    scheduler: Scheduler
    actuator: Actuator
    may_write: Callable[[], bool] = lambda: True
    interval: float = 2.0
    #: How many status writes go out at once (the operator gives one of the actuator's).
    gate: WriteGate = field(default_factory=WriteGate)
    #: The longest a group's status waits for its members to start, or for its queued first
    #: attempt (0: written at once).
    starting_hold: float = STARTING_HOLD_S
    versions: dict[Dialect, str] = field(default_factory=dict)
    #: Status as last seen on the server (watch events) or returned by our last apply.
    current: dict[GroupRef, JSON] = field(default_factory=dict)
    first_attempt: dict[GroupRef, str] = field(default_factory=dict)
    _first_attempt_mono: dict[GroupRef, float] = field(default_factory=dict)
    _timed_out: set[GroupRef] = field(default_factory=set)
    #: Since when each group's outcome has been WAITING (still collecting its members).
    _waiting_since: dict[GroupRef, float] = field(default_factory=dict)
    #: Since when each group has had members bound but not started (`starting_hold`).
    _starting_since: dict[GroupRef, float] = field(default_factory=dict)
    #: Since when each group has been queued for its first attempt (_held_for_first_attempt).
    _untried_since: dict[GroupRef, float] = field(default_factory=dict)
    #: PodGroupInitiallyScheduled (CompositePodGroupInitiallyScheduled) =True as we wrote it,
    #: per group and uid: a watch event older than our write must not make us believe it is
    #: still False (it never goes back).
    _initially_scheduled: dict[GroupRef, tuple[str, JSON]] = field(default_factory=dict)
    #: Seconds between sweeps of every group; the sweeps between them look only at the groups
    #: that may have changed (`_due`).
    full_sweep_interval: float = 30.0
    #: Groups whose server copy changed since the last sweep (`observed`).
    _observed: set[GroupRef] = field(default_factory=set)
    #: Groups whose ScheduleTimeout the clock may still bring (`_check_timeout`).
    _timeout_pending: set[GroupRef] = field(default_factory=set)
    #: What the last sweep saw of the cluster: the state itself, its revision and pruning mark
    #: (ClusterState.group_revisions); another state or a pruning means a sweep of every group.
    _swept: tuple[object, int, int] | None = None

    def watch(self, dialect: Dialect, version: str) -> None:
        self.versions[dialect] = version

    def observed(self, ref: GroupRef, status: JSON | None) -> None:
        """The server's copy changed (our PodGroup informers, every dialect)."""
        self.current[ref] = dict(status or {})
        self._observed.add(ref)
        started = (status or {}).get("scheduleStartTime")
        if started and ref not in self.first_attempt:
            self.first_attempt[ref] = str(started)

    def forget(self, ref: GroupRef) -> None:
        """The group was deleted: nothing is kept for it here, nor its outcome (read only
        here) in the actuator. Before, every deleted group left an entry in each map."""
        for kept in (
            self.current,
            self.first_attempt,
            self._first_attempt_mono,
            self._waiting_since,
            self._starting_since,
            self._untried_since,
            self._initially_scheduled,
        ):
            kept.pop(ref, None)
        self._timed_out.discard(ref)
        self._observed.discard(ref)
        self._timeout_pending.discard(ref)
        self.actuator.outcomes.pop(ref, None)
        self.actuator.changed_groups.discard(ref)

    async def run(self) -> None:
        """Write the groups whose outcome changed as soon as it does; sweep each `interval`
        for what only member pods change (running, succeeded, failed counts), every group
        each `full_sweep_interval`, between them only those `_due` names. Every group every
        2 s was 5% of gangsched's CPU samples binding 1,000 gangs, and grew with the groups
        that exist, running or finished, not with those that change."""
        last_sweep = last_full = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.actuator.outcome_changed.wait(), self.interval)
            self.actuator.outcome_changed.clear()
            if not self.may_write():
                continue
            now = time.monotonic()
            if now - last_sweep >= self.interval:
                last_sweep = now
                full = now - last_full >= self.full_sweep_interval
                if full:
                    last_full = now
                due = self._due(full=full)
                self.actuator.changed_groups.clear()
                await self.sync_once(due)
            else:
                changed = list(self.actuator.changed_groups)
                self.actuator.changed_groups.clear()
                await self.sync_once(changed)

    def _due(self, *, full: bool = False) -> list[GroupRef] | None:
        """The groups a sweep looks at (None: every group): those whose members or object
        changed since the last sweep (ClusterState.group_revisions), whose server copy or
        outcome changed, those the clock decides (held, collecting, a ScheduleTimeout to
        come), and every CompositePodGroup (its status reads its children's outcomes; few)."""
        cluster = self.scheduler.cluster
        mark = (cluster, cluster.revision, cluster.group_revisions_pruned)
        last, self._swept = self._swept, mark
        observed, self._observed = self._observed, set()
        if full or last is None or last[0] is not cluster or last[2] != mark[2]:
            return None
        due = observed | self.actuator.changed_groups | self._timeout_pending
        due.update(self._waiting_since, self._starting_since, self._untried_since)
        due.update(cluster.changed_since(last[1]))
        due.update(cluster.composites)
        return [ref for ref in due if ref in cluster.groups or ref in cluster.composites]

    async def sync_once(self, refs: list[GroupRef] | None = None) -> None:
        cluster = self.scheduler.cluster
        everything = [*cluster.groups, *cluster.composites]
        now = time.monotonic()
        writes = []
        for ref in everything if refs is None else refs:
            if ref.dialect not in self.versions:
                continue
            self._note_first_attempt(ref)  # when it was tried, whether or not written now
            if self._collecting(ref, now):
                continue
            members = cluster.group_members(ref) if ref in cluster.groups else []
            if self._held_while_starting(ref, members, now) or self._held_for_first_attempt(
                ref, members, now
            ):
                continue
            desired = self.desired(ref)
            if desired is None or unchanged(self.current.get(ref), desired):
                continue
            writes.append(self._gated_write(ref))
        await asyncio.gather(*writes)

    async def _gated_write(self, ref: GroupRef) -> None:
        """The status as it is once a slot is free (a sweep's last writes wait behind the
        others for seconds): nothing if the group is gone, unchanged, or leadership is lost."""
        async with self.gate.slot():
            if not self.may_write():
                return
            desired = self.desired(ref)
            if desired is None or unchanged(self.current.get(ref), desired):
                return
            await self._write(ref, desired)

    def _note_first_attempt(self, ref: GroupRef) -> None:
        """scheduleStartTime is when the group's first outcome came, not when a held status
        was first written."""
        if ref in self.actuator.outcomes and ref not in self.first_attempt:
            self.first_attempt[ref] = _now()
            self._first_attempt_mono[ref] = time.monotonic()

    def _held_for_first_attempt(self, ref: GroupRef, members: list[Pod], now: float) -> bool:
        """Whether the group has never been tried, none of its members is bound, and its first
        attempt is queued: that attempt's outcome is the status worth writing, moments away;
        for `starting_hold` at most, in case a backlog of queued gangs keeps it waiting.
        Written at once, each of a precreated (a) run's 1,000 gangs got a bare "Pending" it
        kept for seconds, and a second write once it ran (1,997 applies, 1 round)."""
        queued = self.scheduler.queue.state_of(self.scheduler.unit_key(ref)) is State.ACTIVE
        untried = ref not in self.actuator.outcomes and not any(p.node_name for p in members)
        waiting = queued and untried
        return _held(self._untried_since, ref, now, self.starting_hold, while_=waiting)

    def _held_while_starting(self, ref: GroupRef, members: list[Pod], now: float) -> bool:
        """Whether the group's status waits for members that are bound (or placed and held
        for their volumes) but not started yet: at most `starting_hold` since it was first
        seen starting or last allowed a write."""
        if ref.dialect not in _COUNTED:
            return False  # a condition that does not change as pods start: written at once
        holding = self.actuator.pre_binding_pods
        starting = any(
            (pod.node_name is not None and pod.phase == "Pending" and not pod.terminating)
            or pod.key in holding
            for pod in members
        )
        if _held(self._starting_since, ref, now, self.starting_hold, while_=starting):
            return True
        if starting:
            self._starting_since[ref] = now  # written now: the next write waits a hold again
        return False

    def _collecting(self, ref: GroupRef, now: float) -> bool:
        """Whether the group has been waiting for its members for less than the actuator's
        waiting_condition_delay: its status then waits too, as its pods' condition does.
        Streamed gangs are complete within a second, and each member's arrival changed the
        waiting message: (b) paced, 11 status applies per gang, most never read."""
        outcome = self.actuator.outcomes.get(ref)
        waiting = outcome is not None and outcome.result == WAITING
        delay = self.actuator.waiting_condition_delay
        return _held(self._waiting_since, ref, now, delay, while_=waiting)

    def desired(self, ref: GroupRef) -> JSON | None:
        composite = self.scheduler.cluster.composites.get(ref)
        if composite is not None:
            return composite_status(
                composite,
                self.actuator.outcomes.get(ref),
                self._previous(ref, composite.uid),
                now=_now(),
            )
        group = self.scheduler.cluster.groups.get(ref)
        if group is None:
            return None
        outcome: GroupOutcome | None = self.actuator.outcomes.get(ref)
        self._note_first_attempt(ref)
        members = self.scheduler.cluster.group_members(ref)
        holding = self.actuator.pre_binding_pods
        if holding:  # placed but not bound until their volumes are: not scheduled yet
            members = [
                dataclasses.replace(p, node_name=None) if p.key in holding else p for p in members
            ]
        if outcome is not None:
            ok = outcome.result == SCHEDULED or count_members(members).scheduled >= group.min_member
            self._check_timeout(ref, group.schedule_timeout_seconds, ok, outcome.message)
        return desired_status(
            group,
            members,
            outcome,
            self._previous(ref, group.uid),
            now=_now(),
            schedule_start=self.first_attempt.get(ref),
            timed_out=ref in self._timed_out,
        )

    def _previous(self, ref: GroupRef, uid: str) -> JSON:
        previous = self.current.get(ref) or {}
        remembered = self._initially_scheduled.get(ref)
        kind = _INITIALLY.get(ref.dialect)
        if remembered is None or remembered[0] != uid or kind is None:
            return previous
        held = find_condition(previous, kind)
        if held is not None and held.get("status") == "True":
            return previous
        others = [
            c
            for c in previous.get("conditions") or []
            if isinstance(c, dict) and c.get("type") != kind
        ]
        return {**previous, "conditions": [*others, remembered[1]]}

    def _check_timeout(self, ref: GroupRef, timeout: int | None, ok: bool, message: str) -> None:
        if timeout is None or ok or ref in self._timed_out:
            if ok:
                self._timed_out.discard(ref)
            self._timeout_pending.discard(ref)
            return
        started = self._first_attempt_mono.get(ref)
        if started is None or time.monotonic() - started < timeout:
            self._timeout_pending.add(ref)  # swept until it is placed or times out
            return
        self._timeout_pending.discard(ref)
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
        kind, resource = "PodGroup", "podgroups"
        if ref.dialect is Dialect.COMPOSITE:
            kind, resource = "CompositePodGroup", "compositepodgroups"
        path = f"/apis/{version}/namespaces/{ref.namespace}/{resource}/{ref.name}/status"
        body: JSON = {
            "apiVersion": version,
            "kind": kind,
            "metadata": {"name": ref.name, "namespace": ref.namespace},
            "status": status,
        }
        try:
            answer = await self.kube.apply(path, body)
        except KubeError as exc:
            if not exc.not_found:
                self.actuator.metrics.api_errors.labels("podgroup_status", str(exc.status)).inc()
                log.warning("PodGroup status not written", group=ref.key, error=str(exc))
            return
        except Exception as exc:  # API server unreachable: the next sweep retries
            self.actuator.metrics.api_errors.labels("podgroup_status", "connection").inc()
            log.warning("PodGroup status not written", group=ref.key, error=repr(exc))
            return
        written = answer.get("status")
        self.current[ref] = dict(written) if isinstance(written, dict) else dict(status)
        initially = _INITIALLY.get(ref.dialect)
        scheduled = find_condition(status, initially) if initially is not None else None
        cluster = self.scheduler.cluster
        owner = cluster.groups.get(ref) or cluster.composites.get(ref)
        if owner is not None and scheduled is not None and scheduled.get("status") == "True":
            self._initially_scheduled[ref] = (owner.uid, scheduled)
