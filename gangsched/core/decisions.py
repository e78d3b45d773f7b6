"""What a scheduling cycle decided, as values the edge (API server) or simulate carries out.

The core never performs I/O; it returns these and the caller applies them in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.core.dra.model import Allocation, Consumer
from gangsched.core.model import GroupRef


@dataclass(frozen=True, slots=True)
class Bind:
    pod: str  # namespace/name
    uid: str
    node: str
    group: GroupRef


@dataclass(frozen=True, slots=True)
class BindVolume:
    """Static binding of an unbound WaitForFirstConsumer claim: the PV's spec.claimRef is
    set to the claim (guarded by the PV's resourceVersion); the PV controller completes it.
    Written, with every other volume decision of the gang, before any of its pods binds."""

    pod: str
    node: str
    claim: str  # namespace/name
    claim_uid: str
    volume: str
    volume_resource_version: str


@dataclass(frozen=True, slots=True)
class SelectNode:
    """Dynamic provisioning: the claim's `volume.kubernetes.io/selected-node` annotation
    asks its provisioner for a volume reachable from `node`."""

    pod: str
    node: str
    claim: str
    claim_uid: str


@dataclass(frozen=True, slots=True)
class AllocateClaim:
    """Dynamic Resource Allocation, written before any Bind of the same report: the finalizer
    `resource.kubernetes.io/delete-protection`, `status.allocation` (when `allocation` is set:
    the claim was allocated in this cycle) and the pods to add to `status.reservedFor`."""

    claim: str  # namespace/name
    uid: str
    allocation: Allocation | None
    reserve: tuple[Consumer, ...]
    #: The claim's resourceVersion when decided (optimistic concurrency for the write).
    resource_version: str = ""


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


#: What a cycle did for a unit and each of its groups: GroupOutcome.result, and the result of
#: the scheduler's report of the cycle (core/scheduler.py's CycleReport).
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
WAITING = "waiting"
ERROR = "error"
WAITING_ON_PREEMPTION = "waiting_on_preemption"

#: KEP-5501's PodScheduled reason for a pod held before any scheduling attempt (autoscalers
#: ignore it, unlike `Unschedulable`); also the reason of the event saying why.
NOT_READY_FOR_SCHEDULING = "NotReadyForScheduling"


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """The PodGroup-level result of a cycle, for status writers and reports."""

    group: GroupRef
    result: str  # SCHEDULED, UNSCHEDULABLE, WAITING, ERROR or WAITING_ON_PREEMPTION
    message: str


#: Write-backs that must be confirmed before the pods they serve are bound.
VolumeDecision = BindVolume | SelectNode

Decision = (
    Bind
    | BindVolume
    | SelectNode
    | AllocateClaim
    | Nominate
    | SetCondition
    | Evict
    | Event
    | GroupOutcome
)
