"""The `CompositePodGroupInitiallyScheduled` condition, as kube-scheduler 1.38 writes it.

1.37.1 wrote nothing on CompositePodGroups; 1.38 (#140670) writes the condition on every
level after each cycle of the tree: True `Scheduled` once the level was satisfied, False
`Unschedulable` while it was not (also while waiting for preemption), False
`SchedulerError` when the cycle failed, and False `CompositePodGroupError` (1.38-alpha.2's
constant, which replaced 1.37's `Invalid`) when the tree itself is invalid: a cycle of parent
references, a missing parent, levels whose priority differs from the root's. Like the
PodGroup condition it never goes back from True to False and carries `observedGeneration`.
Pure: the live status writer and `simulate` both call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.composite.model import CompositePodGroup
from gangsched.core.decisions import (
    ERROR,
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING_ON_PREEMPTION,
    GroupOutcome,
)
from gangsched.core.group_status import PRE_BINDING, find_condition, make_condition

COMPOSITE_CONDITION = "CompositePodGroupInitiallyScheduled"
#: Reasons (k8s.io/api scheduling/v1alpha3, 1.38-alpha.2).
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_INVALID = "CompositePodGroupError"

#: Messages of errors that are about the tree's shape or agreement, not the scheduler.
_INVALID_MARKERS = (
    "cycle of parent references",
    "names parentCompositePodGroupName",
    "deeper than",
    "in a hierarchy should have the same",
)

_REASONS: dict[str, tuple[str, str]] = {
    SCHEDULED: ("True", REASON_SCHEDULED),
    PRE_BINDING: ("True", REASON_SCHEDULED),
    UNSCHEDULABLE: ("False", REASON_UNSCHEDULABLE),
    WAITING_ON_PREEMPTION: ("False", REASON_UNSCHEDULABLE),
    ERROR: ("False", REASON_SCHEDULER_ERROR),
}


def composite_status(
    composite: CompositePodGroup,
    outcome: GroupOutcome | None,
    previous: Mapping[str, Any],
    *,
    now: str,
) -> dict[str, Any] | None:
    """The status gangsched owns on this CompositePodGroup, or None (nothing to say)."""
    old = find_condition(previous, COMPOSITE_CONDITION)
    wanted = _REASONS.get(outcome.result) if outcome is not None else None
    if wanted is None or outcome is None:
        return {"conditions": [old]} if old is not None else None
    status, reason = wanted
    if outcome.result == ERROR and any(marker in outcome.message for marker in _INVALID_MARKERS):
        reason = REASON_INVALID
    if old is not None and old.get("status") == "True" and status != "True":
        return {"conditions": [old]}
    condition = make_condition(
        old,
        type_=COMPOSITE_CONDITION,
        status=status,
        reason=reason,
        message=outcome.message,
        generation=composite.generation,
        now=now,
    )
    return {"conditions": [condition]}
