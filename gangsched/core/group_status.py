"""PodGroup status as each dialect's owner writes it, computed from members and the last cycle.

Each dialect has an owner whose status users and tools already read:

- `scheduling.k8s.io` (kube-scheduler 1.37): only the `PodGroupInitiallyScheduled` condition.
  False with reason `Unschedulable` (also while waiting for preemption) or `SchedulerError`
  until the first success, then True with reason `Scheduled`, never back to False; every write
  carries `observedGeneration` (pkg/scheduler/schedule_one_podgroup.go,
  `updatePodGroupCondition`). The type `PodGroupScheduled` of 1.36 no longer exists.
- `scheduling.x-k8s.io` (scheduler-plugins): phase and counters as its PodGroup controller
  computes them (pkg/controllers/podgroup_controller.go), see `scheduler_plugins_phase`; its
  status has no conditions.
- `scheduling.sigs.k8s.io` (ours, the seed's CRD): our phases, `scheduled`, and the
  `PodGroupScheduled` (reason `NotReadyForScheduling` while held before the cycle) and
  `PodGroupScheduleTimeout` conditions.

What is returned is only what gangsched owns: the edge applies it with server-side apply under
its own field manager, so conditions other writers put on the same object stay untouched.
Pure: the live status writer and `simulate` both call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from gangsched.core.decisions import (
    ERROR,
    NOT_READY_FOR_SCHEDULING,
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING,
    WAITING_ON_PREEMPTION,
    GroupOutcome,
)
from gangsched.core.model import Dialect, Pod, PodGroup
from gangsched.core.phase import (
    PENDING,
    count_members,
    group_phase,
    scheduler_plugins_counts,
    scheduler_plugins_occupied_by,
    scheduler_plugins_phase,
)

#: The outcome the edge reports while a placed gang's pre-bind write-backs (volumes) wait to
#: be confirmed: no member is bound yet.
PRE_BINDING = "pre_binding"

UPSTREAM_CONDITION = "PodGroupInitiallyScheduled"
SIGS_CONDITION = "PodGroupScheduled"
TIMEOUT_CONDITION = "PodGroupScheduleTimeout"

#: kube-scheduler's (status, reason) of PodGroupInitiallyScheduled per cycle result. A result
#: missing here writes nothing: kube-scheduler runs no cycle for a group held before the queue
#: (short of minCount, gated members), so it writes no condition for it either (WAITING; the
#: event gangsched posts says why).
UPSTREAM_REASONS: dict[str, tuple[str, str]] = {
    SCHEDULED: ("True", "Scheduled"),
    # kube-scheduler writes True when the cycle succeeds, before its binding cycle's PreBind.
    PRE_BINDING: ("True", "Scheduled"),
    UNSCHEDULABLE: ("False", "Unschedulable"),
    WAITING_ON_PREEMPTION: ("False", "Unschedulable"),
    ERROR: ("False", "SchedulerError"),
}
#: Reasons of our own PodGroupScheduled condition (sigs dialect); anything else is Unschedulable.
SIGS_REASONS = {
    SCHEDULED: "Scheduled",
    WAITING_ON_PREEMPTION: "WaitingForPreemption",
    ERROR: "SchedulerError",
    # Held before the cycle (members missing or gated), KEP-5501's reason: not Unschedulable.
    WAITING: NOT_READY_FOR_SCHEDULING,
    # Placed; its pre-bind write-backs (volumes) wait to be confirmed before any member binds.
    PRE_BINDING: "PreBinding",
}
#: The condition types gangsched writes, per dialect (the ones it may compare and replace).
OWNED_CONDITIONS: dict[Dialect, tuple[str, ...]] = {
    Dialect.UPSTREAM: (UPSTREAM_CONDITION,),
    Dialect.SIGS: (SIGS_CONDITION, TIMEOUT_CONDITION),
    Dialect.X_K8S: (),
    Dialect.VOLCANO: (),
}
#: metav1.Condition caps the message at 32 KiB.
MAX_MESSAGE = 32768


def timestamp(epoch: float) -> str:
    """RFC 3339 with second precision, as the API server writes metav1.Time."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def desired_status(
    group: PodGroup,
    members: Sequence[Pod],
    outcome: GroupOutcome | None,
    previous: Mapping[str, Any],
    *,
    now: str,
    schedule_start: str | None = None,
    timed_out: bool = False,
) -> dict[str, Any] | None:
    """The status fields gangsched owns for this group, or None when it has nothing to say.

    `previous`: the status on the server (conditions keep their lastTransitionTime while their
    status stays; upstream's condition never goes from True back to False; scheduler-plugins'
    phases depend on the previous phase). `schedule_start`: when gangsched first tried the
    group. `timed_out`: scheduleTimeoutSeconds passed without success (sigs only).
    """
    dialect = group.ref.dialect
    if dialect is Dialect.UPSTREAM:
        return _upstream(group, members, outcome, previous, now=now)
    if dialect is Dialect.X_K8S:
        return _scheduler_plugins(group, members, previous)
    if dialect is Dialect.VOLCANO:
        # Volcano's status (Inqueue, its queue accounting) belongs to Volcano's scheduler and
        # controllers; gangsched has no queues and leaves it alone.
        return None
    return _sigs(
        group,
        members,
        outcome,
        previous,
        now=now,
        schedule_start=schedule_start,
        timed_out=timed_out,
    )


def _upstream(
    group: PodGroup,
    members: Sequence[Pod],
    outcome: GroupOutcome | None,
    previous: Mapping[str, Any],
    *,
    now: str,
) -> dict[str, Any] | None:
    old = find_condition(previous, UPSTREAM_CONDITION)
    wanted = UPSTREAM_REASONS.get(outcome.result) if outcome is not None else None
    if wanted is None:
        return _keep(old)
    status, reason = wanted
    if old is not None and old.get("status") == "True" and status != "True":
        return _keep(old)  # initially scheduled stays True (extra members failing later)
    assert outcome is not None
    message = outcome.message
    scheduled = count_members(members).scheduled
    if status != "True" and scheduled >= max(group.min_member, 1):
        # minCount members are bound, so a cycle has succeeded for this group, whatever the
        # latest attempt (for an extra member) says. The success's own write can be overtaken
        # by that attempt before it reaches the server, and a restart finds only the False.
        status, reason = UPSTREAM_REASONS[SCHEDULED]
        message = f"{scheduled} pod(s) scheduled"
    condition = make_condition(
        old,
        type_=UPSTREAM_CONDITION,
        status=status,
        reason=reason,
        message=message,
        generation=group.generation,
        now=now,
    )
    return {"conditions": [condition]}


def _keep(old: dict[str, Any] | None) -> dict[str, Any] | None:
    """Re-apply what we wrote before unchanged: omitting it from an apply would delete it."""
    return {"conditions": [old]} if old is not None else None


def _scheduler_plugins(
    group: PodGroup, members: Sequence[Pod], previous: Mapping[str, Any]
) -> dict[str, Any]:
    counts = scheduler_plugins_counts(members)
    previous_phase = str(previous.get("phase") or "")
    phase, recount = scheduler_plugins_phase(
        previous_phase,
        group.min_member,
        counts,
        created=group.created,
        schedule_start=_epoch(previous.get("scheduleStartTime")),
        previous_running=_int(previous.get("running")),
    )
    status: dict[str, Any] = {"phase": phase}
    if recount:
        status.update(running=counts.running, succeeded=counts.succeeded, failed=counts.failed)
    else:
        status.update(
            {k: _int(previous[k]) for k in ("running", "succeeded", "failed") if k in previous}
        )
    occupied = str(previous.get("occupiedBy") or "")
    if previous_phase in ("", "Pending") and phase != "Pending":
        occupied = scheduler_plugins_occupied_by(members) or occupied
    if occupied:
        status["occupiedBy"] = occupied
    return status


def _sigs(
    group: PodGroup,
    members: Sequence[Pod],
    outcome: GroupOutcome | None,
    previous: Mapping[str, Any],
    *,
    now: str,
    schedule_start: str | None,
    timed_out: bool,
) -> dict[str, Any]:
    counts = count_members(members)
    phase = group_phase(group.min_member, counts, attempted=outcome is not None)
    if str(previous.get("phase") or "") in ("", PENDING) and counts.members < group.min_member:
        # Koordinator's PodGroup controller (this dialect's owner) leaves a Pending group
        # Pending until it has minMember pods, whatever some of them are doing.
        phase = PENDING
    status: dict[str, Any] = {
        "phase": phase,
        "scheduled": counts.scheduled,
        "running": counts.running,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
    }
    conditions: list[dict[str, Any]] = []
    scheduled_old = find_condition(previous, SIGS_CONDITION)
    timeout_old = find_condition(previous, TIMEOUT_CONDITION)
    if outcome is not None:
        ok = outcome.result == SCHEDULED or counts.scheduled >= group.min_member
        reason = "Scheduled" if ok else SIGS_REASONS.get(outcome.result, "Unschedulable")
        message = f"{counts.scheduled} pod(s) scheduled" if ok else outcome.message
        conditions.append(
            make_condition(
                scheduled_old,
                type_=SIGS_CONDITION,
                status="True" if ok else "False",
                reason=reason,
                message=message,
                generation=group.generation,
                now=now,
            )
        )
        if timed_out or (ok and timeout_old is not None):
            seconds = group.schedule_timeout_seconds
            conditions.append(
                make_condition(
                    timeout_old,
                    type_=TIMEOUT_CONDITION,
                    status="True" if not ok else "False",
                    reason="ScheduleTimeout" if not ok else "Scheduled",
                    message=(
                        f"not scheduled within scheduleTimeoutSeconds ({seconds}s); "
                        f"still retrying: {message}"
                        if not ok
                        else "scheduled after the timeout"
                    ),
                    generation=group.generation,
                    now=now,
                )
            )
    else:
        conditions.extend(c for c in (scheduled_old, timeout_old) if c is not None)
    if conditions:
        status["conditions"] = conditions
    if schedule_start is not None:
        status["scheduleStartTime"] = schedule_start
    owners = sorted({p.owner for p in members if p.owner})
    if owners:
        status["occupiedBy"] = owners[0]
    return status


def find_condition(status: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == type_:
            return condition
    return None


def make_condition(
    old: Mapping[str, Any] | None,
    *,
    type_: str,
    status: str,
    reason: str,
    message: str,
    generation: int,
    now: str,
) -> dict[str, Any]:
    """A metav1.Condition; lastTransitionTime moves only when the status does."""
    since = now
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        since = str(old["lastTransitionTime"])
    condition: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "lastTransitionTime": since,
    }
    if generation:
        condition["observedGeneration"] = generation
    return condition


def unchanged(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """The server already holds what we would write (other writers' fields do not count;
    neither do condition timestamps, which only move with the status)."""
    if current is None:
        return False
    for key, value in desired.items():
        if key != "conditions":
            if current.get(key) != value:
                return False
            continue
        for condition in value:
            held = find_condition(current, str(condition.get("type")))
            if held is None or _strip(held) != _strip(condition):
                return False
    return True


def _strip(condition: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in condition.items() if k != "lastTransitionTime"}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
