"""What a scheduling cycle decided, as values the edge (API server) or simulate carries out.

The core never performs I/O; it returns these and the caller applies them in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.core.model import GroupRef


@dataclass(frozen=True, slots=True)
class Bind:
    pod: str  # namespace/name
    uid: str
    node: str
    group: GroupRef


@dataclass(frozen=True, slots=True)
class Nominate:
    """Set (node) or clear (node None) status.nominatedNodeName."""

    pod: str
    uid: str
    node: str | None


@dataclass(frozen=True, slots=True)
class SetCondition:
    """A pod condition written through pods/status (strategic merge by type)."""

    pod: str
    uid: str
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Evict:
    """Graceful delete with a UID precondition, after the DisruptionTarget condition."""

    pod: str
    uid: str
    preemptor: GroupRef
    message: str


@dataclass(frozen=True, slots=True)
class Event:
    """An events.k8s.io/v1 event. `regarding` is "Pod ns/name" or "PodGroup ns/name"."""

    regarding_kind: str
    regarding: str
    type: str  # Normal | Warning
    reason: str
    action: str
    note: str
    related_kind: str = ""
    related: str = ""


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """The PodGroup-level result of a cycle, for status writers and reports."""

    group: GroupRef
    result: str  # scheduled | unschedulable | waiting | error | waiting_on_preemption
    message: str


Decision = Bind | Nominate | SetCondition | Evict | Event | GroupOutcome
