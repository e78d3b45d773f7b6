"""PodGroup phase and counters from its members, with the values users know from
scheduler-plugins and Koordinator (Pending, PreScheduling, Scheduling, Scheduled, Running,
Finished, Failed)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gangsched.core.model import Pod

PENDING = "Pending"
PRE_SCHEDULING = "PreScheduling"
SCHEDULING = "Scheduling"
SCHEDULED = "Scheduled"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class GroupCounts:
    members: int
    scheduled: int
    running: int
    succeeded: int
    failed: int


def count_members(pods: Iterable[Pod]) -> GroupCounts:
    members = scheduled = running = succeeded = failed = 0
    for pod in pods:
        if pod.is_gated and pod.node_name is None:
            continue  # not a member toward minMember until its scheduling gates go
        members += 1
        if pod.phase == "Succeeded":
            succeeded += 1
        elif pod.phase == "Failed":
            failed += 1
        elif pod.node_name is not None and not pod.terminating:
            scheduled += 1
            if pod.phase == "Running":
                running += 1
    # Finished pods were scheduled once; they count toward "scheduled" as upstream does.
    return GroupCounts(members, scheduled + succeeded, running, succeeded, failed)


def scheduler_plugins_counts(pods: Iterable[Pod]) -> GroupCounts:
    """Counted as scheduler-plugins' controller counts: every pod carrying the label, and
    running/succeeded/failed by pod phase alone (terminating pods included)."""
    members = running = succeeded = failed = 0
    for pod in pods:
        members += 1
        running += pod.phase == "Running"
        succeeded += pod.phase == "Succeeded"
        failed += pod.phase == "Failed"
    return GroupCounts(members, 0, running, succeeded, failed)


def group_phase(min_member: int, counts: GroupCounts, *, attempted: bool) -> str:
    """The phase for these counts. `attempted`: a cycle has tried the group at least once."""
    if counts.succeeded >= min_member and counts.running == 0:
        return FINISHED
    if counts.failed and counts.running + counts.succeeded < min_member:
        return FAILED
    if counts.running >= min_member:
        return RUNNING
    if counts.scheduled >= min_member:
        return SCHEDULED
    if counts.scheduled > 0:
        return SCHEDULING
    if counts.members >= min_member and attempted:
        return PRE_SCHEDULING
    return PENDING


#: scheduler-plugins stops reconciling a group whose scheduleStartTime lies this long after its
#: creation while nothing runs ("pod may have been GCed").
SCHEDULER_PLUGINS_STALE_SECONDS = 48 * 3600.0


def scheduler_plugins_phase(
    previous: str,
    min_member: int,
    counts: GroupCounts,
    *,
    created: float,
    schedule_start: float | None,
    previous_running: int,
) -> tuple[str, bool]:
    """The phase scheduler-plugins' PodGroup controller settles on, and whether it recounts.

    The controller (pkg/controllers/podgroup_controller.go) reconciles on every pod and
    PodGroup change, one step at a time: "" -> Pending; Pending -> Scheduling once at least
    minMember pods carry the label (bound or not); from then on: fewer pods than minMember ->
    Pending; running + succeeded < minMember -> Scheduling, else Running; any failed pod with
    failed + running + succeeded >= minMember -> Failed; succeeded >= minMember -> Finished.
    Finished and Failed are final. This returns where those steps come to rest. Counters are
    recomputed in every reconcile except those that start from Pending (or no phase), from a
    final phase, or from a group frozen after 48 hours.
    """
    if previous in (FINISHED, FAILED):
        return previous, False
    if (
        previous in (SCHEDULING, PENDING)
        and previous_running == 0
        and schedule_start is not None
        and schedule_start - created > SCHEDULER_PLUGINS_STALE_SECONDS
    ):
        return previous, False
    if counts.members < min_member:
        return PENDING, previous not in ("", PENDING)
    started = counts.running + counts.succeeded
    phase = SCHEDULING if started < min_member else RUNNING
    if counts.failed and counts.failed + started >= min_member:
        phase = FAILED
    if counts.succeeded >= min_member:
        phase = FINISHED
    return phase, True


def scheduler_plugins_occupied_by(members: Sequence[Pod]) -> str:
    """status.occupiedBy as the controller fills it when a group leaves Pending: every owner
    of the first member ("namespace/name", sorted, comma-separated)."""
    if not members:
        return ""
    first = min(members, key=lambda p: (p.namespace, p.name))
    return ",".join(sorted(first.owner_refs))
