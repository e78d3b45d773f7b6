"""What `gangsched explain` found, as values: the members against minMember, each pending
member's fit (kube-scheduler's per-reason node counts), what preemption would do and the
victims still terminating. `analysis` fills them in; `render` turns them into text or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gangsched.core.model import GroupRef
from gangsched.core.topology.report import TopologyReport

#: The verdict when the gang has no pending member (nothing for the scheduler to do).
NOTHING_PENDING = "nothing_pending"


# ----------------------------------------------------------------------------------- results
@dataclass(slots=True)
class GroupMembers:
    """One PodGroup of the gang: its members against its minMember."""

    ref: GroupRef
    #: -1 when pods name a PodGroup that does not exist.
    min_member: int
    bound: int
    pending: int
    #: Unbound members left to another scheduler.
    foreign: int
    #: Unbound members held by spec.schedulingGates (not counted toward minMember).
    gated: int = 0
    schedule_timeout_seconds: int | None = None
    priority: int | None = None
    priority_class_name: str = ""

    @property
    def exists(self) -> bool:
        return self.min_member >= 0

    @property
    def present(self) -> int:
        return self.bound + self.pending

    @property
    def missing(self) -> int:
        return max(0, self.min_member - self.present)

    def as_dict(self) -> dict[str, Any]:
        return {
            "podGroup": self.ref.key,
            "apiGroup": self.ref.dialect.value,
            "exists": self.exists,
            "minMember": self.min_member,
            "present": self.present,
            "bound": self.bound,
            "pending": self.pending,
            "otherScheduler": self.foreign,
            "gated": self.gated,
            "missing": self.missing,
            "scheduleTimeoutSeconds": self.schedule_timeout_seconds,
            "priority": self.priority,
            "priorityClassName": self.priority_class_name or None,
        }


@dataclass(slots=True)
class Member:
    pod: str
    group: str
    #: pending | gated | bound | terminating | succeeded | failed | other-scheduler
    state: str
    node: str | None
    nominated_node: str | None
    priority: int
    #: spec.schedulingGates still on the pod.
    gates: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "podGroup": self.group,
            "state": self.state,
            "node": self.node,
            "nominatedNode": self.nominated_node,
            "priority": self.priority,
            "schedulingGates": self.gates,
        }


@dataclass(slots=True)
class PodFit:
    """One pending member in the scheduling order: where it fits, or why it fits nowhere."""

    pod: str
    node: str | None
    nodes: int
    reasons: dict[str, int] = field(default_factory=dict)
    unresolvable_nodes: int = 0
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod}
        if self.node is not None:
            out["fitsOn"] = self.node
        else:
            out.update(
                message=self.message,
                nodes=self.nodes,
                reasons=dict(self.reasons),
                unresolvableNodes=self.unresolvable_nodes,
            )
        return out


@dataclass(slots=True)
class Victim:
    pod: str
    node: str | None
    priority: int
    group: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "priority": self.priority,
            "podGroup": self.group,
        }


@dataclass(slots=True)
class PreemptionView:
    enabled: bool
    strategy: str = ""
    #: The preemptor ran (the cycle came back unschedulable).
    attempted: bool = False
    #: Victims would be evicted now, or earlier victims are still terminating.
    would_help: bool = False
    message: str = ""
    victims: list[Victim] = field(default_factory=list)
    #: Pending member -> node it would be nominated to.
    nominations: dict[str, str] = field(default_factory=dict)
    pdb_violations: int = 0
    #: The gang waits for new capacity before preempting until then (RFC 3339), or None.
    waiting_for_capacity_until: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "waitingForCapacityUntil": self.waiting_for_capacity_until,
            "strategy": self.strategy or None,
            "attempted": self.attempted,
            "wouldHelp": self.would_help,
            "message": self.message,
            "victims": [v.as_dict() for v in self.victims],
            "nominations": dict(sorted(self.nominations.items())),
            "pdbViolations": self.pdb_violations,
        }


@dataclass(slots=True)
class TreeLevel:
    """One level of a CompositePodGroup tree and how the cycle left it."""

    depth: int
    #: "CompositePodGroup" or "PodGroup".
    kind: str
    name: str
    #: "gang (minGroupCount N)", "basic", or for a PodGroup "minCount N".
    policy: str
    #: scheduled | unschedulable | waiting | error | waiting_on_preemption ("" not tried).
    result: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "kind": self.kind,
            "name": self.name,
            "policy": self.policy,
            "result": self.result,
            "message": self.message,
        }


@dataclass(slots=True)
class Explanation:
    #: What was asked about: "PodGroup ns/name" or "Pod ns/name".
    kind: str
    target: str
    #: The gang the scheduler places (a GangGroup may hold several PodGroups).
    gang: GroupRef
    groups: list[GroupMembers]
    members: list[Member]
    #: scheduled | unschedulable | waiting | error | waiting_on_preemption | nothing_pending
    result: str
    message: str
    #: Pod -> node for a gang that would be bound right now.
    placements: dict[str, str] = field(default_factory=dict)
    #: Pending members in the scheduling order (fitting ones name their node).
    fits: list[PodFit] = field(default_factory=list)
    preemption: PreemptionView | None = None
    #: Lower-priority pods still terminating on nodes the gang's members are nominated to.
    terminating_victims: list[Victim] = field(default_factory=list)
    #: The PodGroup's (or pod's) status as the API server holds it; None offline.
    status: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: "cluster" or "manifests".
    source: str = "manifests"
    #: The domains the cycle tried, for a topology-constrained gang (issue 14).
    topology: TopologyReport | None = None
    #: The CompositePodGroup tree the gang is, root first (empty for a plain gang).
    tree: list[TreeLevel] = field(default_factory=list)

    @property
    def unplaced(self) -> list[PodFit]:
        """Members that fit nowhere (and, for a gang that would be scheduled, are not placed)."""
        return [f for f in self.fits if f.node is None and f.pod not in self.placements]

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "source": self.source,
            "gang": {"apiGroup": self.gang.dialect.value, "name": self.gang.key},
            "groups": [g.as_dict() for g in self.groups],
            "members": [m.as_dict() for m in self.members],
            "result": self.result,
            "message": self.message,
            "placements": dict(sorted(self.placements.items())),
            "unschedulable": [f.as_dict() for f in self.unplaced],
            "schedulingOrder": [f.as_dict() for f in self.fits],
            "preemption": None if self.preemption is None else self.preemption.as_dict(),
            "terminatingVictims": [v.as_dict() for v in self.terminating_victims],
            "status": self.status,
            "events": self.events,
            "notes": self.notes,
            "topology": None if self.topology is None else topology_dict(self.topology),
            "tree": [level.as_dict() for level in self.tree],
        }


def topology_dict(report: TopologyReport) -> dict[str, Any]:
    return {
        "constraint": report.request,
        "chosen": None if report.key is None else {"key": report.key, "value": report.value},
        "generated": report.generated,
        "domains": [
            {
                "domain": t.domain,
                "outcome": t.outcome,
                "reason": t.reason or None,
                "score": t.score,
                "placed": t.placed if t.score is not None else None,
            }
            for t in report.trials
        ],
    }
