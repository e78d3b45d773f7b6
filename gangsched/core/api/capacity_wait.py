"""What the "grow before you evict" policy reads from objects (issue 32 item 2).

A PodGroup may ask gangsched to wait for new nodes (an autoscaler such as Karpenter adding
capacity) before preempting running work: the annotation
`gangsched.io/wait-for-capacity-seconds` holds the longest wait in seconds (`0`: preempt at
once, upstream's behaviour), spelled as the other gangsched.io annotations on PodGroups
(`gangsched.io/stale-gang-grace-seconds`). Where a group says nothing, the configuration's
`preemption.waitForCapacitySeconds` applies.

The wait counts from the moment the gang became Unschedulable, which is what an autoscaler
reacts to. That moment is read back from the pods' `PodScheduled=False` condition with reason
`Unschedulable` (its lastTransitionTime), so a restarted scheduler resumes the wait where its
predecessor left it instead of starting it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child

#: On a PodGroup of any dialect: the longest wait for new capacity before preempting.
WAIT_FOR_CAPACITY_ANNOTATION = "gangsched.io/wait-for-capacity-seconds"
#: The PodScheduled reason that makes cluster-autoscaler and Karpenter provision.
UNSCHEDULABLE_REASON = "Unschedulable"

#: A week: longer is surely a typo (and a gang would hold its place in the queue that long).
MAX_WAIT_SECONDS = 7 * 24 * 3600


def format_duration(seconds: float) -> str:
    """Seconds as Go's time.Duration prints them (`5m0s`, `1h30m0s`, `45s`), the spelling
    Kubernetes users read in other controllers' messages."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def read_capacity_wait(r: Reader, metadata: Mapping[str, Any]) -> float | None:
    """The group's own wait in seconds, or None when it leaves it to the configuration."""
    annotations = metadata.get("annotations")
    raw = (
        annotations.get(WAIT_FOR_CAPACITY_ANNOTATION) if isinstance(annotations, Mapping) else None
    )
    if not isinstance(raw, str):
        # Absent; or not a string, which the annotations' own reading refuses (the API
        # server never serves one).
        return None
    field = child("metadata.annotations", WAIT_FOR_CAPACITY_ANNOTATION)
    text = raw.strip()
    if not text.isdigit():
        r.add(field, f"{show(raw)} is not a whole number of seconds (e.g. 600; 0: preempt at once)")
        return None
    seconds = int(text)
    if seconds > MAX_WAIT_SECONDS:
        r.add(field, f"{show(raw)} is more than the allowed maximum of {MAX_WAIT_SECONDS} (a week)")
        return None
    return float(seconds)


def read_unschedulable_since(r: Reader, status: Mapping[str, Any]) -> float | None:
    """When the pod became Unschedulable (its PodScheduled=False reason Unschedulable
    condition's lastTransitionTime, seconds since the epoch), or None."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    for index, condition in enumerate(conditions):
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == UNSCHEDULABLE_REASON
        ):
            return r.timestamp(
                condition.get("lastTransitionTime"),
                f"status.conditions[{index}].lastTransitionTime",
            )
    return None
