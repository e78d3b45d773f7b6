"""PodGroup phase and counters from its members, with the values users know from
scheduler-plugins and Koordinator (Pending, PreScheduling, Scheduling, Scheduled, Running,
Finished, Failed)."""

from __future__ import annotations

from collections.abc import Iterable
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
