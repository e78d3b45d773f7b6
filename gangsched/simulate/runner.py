"""Runs the real queue, cycle and preemption on an in-memory cluster until nothing changes.

The same `Scheduler` as `gangsched run`; only the carrying out of decisions differs: binds
succeed at once and preemption victims disappear at once, so a run ends in the state a real
cluster would reach once every termination finished. Time is virtual: it advances past every
backoff whenever the cluster changes, so a run is deterministic and instant. With nothing
left to do but a gang waiting for new capacity (core/preemption/capacity_wait.py), it jumps
to the end of that wait: no autoscaler adds nodes here, so the wait simply expires.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.status import composite_status
from gangsched.core.decisions import (
    NOT_READY_FOR_SCHEDULING,
    SCHEDULED,
    AllocateClaim,
    Bind,
    BindVolume,
    Evict,
    GroupOutcome,
    Nominate,
    SelectNode,
    SetCondition,
)
from gangsched.core.group_status import desired_status, timestamp
from gangsched.core.labels import NodeSelectorTerm
from gangsched.core.model import Dialect, GroupRef, Pod
from gangsched.core.phase import count_members, group_phase
from gangsched.core.scheduler import CycleReport, Preemptor, Scheduler, SchedulerConfig
from gangsched.core.topology.domains import shared_domain
from gangsched.core.topology.request import TopologyRequest
from gangsched.simulate.volumes import carry_out

#: A run that takes more steps than this is looping; stop and say so rather than hang.
MAX_STEPS = 1_000_000


@dataclass(slots=True)
class Step:
    number: int
    gang: str
    result: str
    message: str
    strategy: str = ""
    bound: list[tuple[str, str]] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    nominated: list[tuple[str, str | None]] = field(default_factory=list)


@dataclass(slots=True)
class GroupSummary:
    phase: str
    min_member: int
    scheduled: int
    message: str
    #: The status conditions the live scheduler would have written (type, status, reason,
    #: message; scheduling.k8s.io and scheduling.sigs.k8s.io groups).
    conditions: list[dict[str, str]] = field(default_factory=list)
    #: For a topology-constrained group: the label key and the domain its members run in
    #: (None while none is placed, or when a preferred-only group spans domains).
    topology: tuple[str, str | None] | None = None
    #: "CompositePodGroup" for the levels of a tree (min_member is then minGroupCount and
    #: scheduled the children placed); "" for PodGroups.
    kind: str = ""
    #: parentCompositePodGroupName, and (CompositePodGroups) the children, oldest first.
    parent: str = ""
    children: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ClaimSummary:
    """A claim the run allocated: where (None for network-attached devices) and what."""

    node: str | None
    devices: list[dict[str, str]]


@dataclass(slots=True)
class SimulationResult:
    bound: dict[str, str] = field(default_factory=dict)
    preempted: dict[str, str] = field(default_factory=dict)
    nominated: dict[str, str] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    #: Claim key -> {"volumeName": pv} (static) or {"selectedNode": node} (provisioned).
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Held before any cycle (members or PodGroup missing): never reported Unschedulable.
    waiting: dict[str, str] = field(default_factory=dict)
    #: Pods with spec.schedulingGates: never attempted, with their gate names.
    gated: dict[str, list[str]] = field(default_factory=dict)
    pod_groups: dict[str, GroupSummary] = field(default_factory=dict)
    timeline: list[Step] = field(default_factory=list)
    claims: dict[str, ClaimSummary] = field(default_factory=dict)
    #: Every pod of the input (victims included) as it ended, for the people's table.
    pods: dict[str, Pod] = field(default_factory=dict)
    #: Pods that were already running in the input.
    running_at_start: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, object]:
        return {
            "bound": dict(sorted(self.bound.items())),
            "preempted": dict(sorted(self.preempted.items())),
            "nominated": dict(sorted(self.nominated.items())),
            "unschedulable": dict(sorted(self.unschedulable.items())),
            "volumes": dict(sorted(self.volumes.items())),
            "waiting": dict(sorted(self.waiting.items())),
            "gated": dict(sorted(self.gated.items())),
            "podGroups": {
                key: {
                    "phase": g.phase,
                    "minMember": g.min_member,
                    "scheduled": g.scheduled,
                    "message": g.message,
                    **({"conditions": g.conditions} if g.conditions else {}),
                    **(
                        {"topology": {"key": g.topology[0], "value": g.topology[1]}}
                        if g.topology is not None
                        else {}
                    ),
                    **({"kind": g.kind} if g.kind else {}),
                    **({"parent": g.parent} if g.parent else {}),
                    **({"children": g.children} if g.kind else {}),
                }
                for key, g in sorted(self.pod_groups.items())
            },
            "claims": {
                key: {"node": c.node, "devices": c.devices}
                for key, c in sorted(self.claims.items())
            },
            "timeline": [
                {
                    "step": s.number,
                    "gang": s.gang,
                    "result": s.result,
                    "message": s.message,
                    **({"strategy": s.strategy} if s.strategy else {}),
                    **({"bound": dict(s.bound)} if s.bound else {}),
                    **({"preempted": s.preempted} if s.preempted else {}),
                    **({"nominated": dict(s.nominated)} if s.nominated else {}),
                }
                for s in self.timeline
            ],
        }


@dataclass(slots=True)
class VirtualClock:
    """The run's virtual time, for a preemptor that needs one (`Config.preemptor(clock=)`)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


class SimulationError(RuntimeError):
    """The run did not settle (a bug, reported rather than hanging)."""


def simulate(
    cluster: ClusterState,
    config: SchedulerConfig,
    *,
    preemptor: Preemptor | None = None,
    clock: VirtualClock | None = None,
) -> SimulationResult:
    """`clock`, when given, is kept at the run's virtual time (the preemptor's clock)."""
    scheduler = Scheduler(cluster, config, preemptor=preemptor)
    clock = clock if clock is not None else VirtualClock()
    pending_at_start = {
        pod.key for pod in cluster.pods.values() if cluster.is_pending(pod) or cluster.is_gated(pod)
    }
    result = SimulationResult(
        pods=dict(cluster.pods),
        running_at_start={key for key, pod in cluster.pods.items() if pod.node_name},
    )
    last_outcome: dict[GroupRef, GroupOutcome] = {}
    statuses: dict[GroupRef, dict[str, Any]] = {}
    conditions: dict[str, tuple[str, str]] = {}
    now = clock.now = 0.0
    scheduler.enqueue_pending(now)
    for number in range(1, MAX_STEPS + 1):
        report = scheduler.step(now)
        if report is None:
            retry = scheduler.queue.next_retry_at()
            if retry is None:
                break
            now = clock.now = max(now, retry)  # a wait for capacity ends: nobody added nodes
            continue
        changed = _apply(
            report,
            cluster=cluster,
            result=result,
            conditions=conditions,
            last_outcome=last_outcome,
            statuses=statuses,
            number=number,
            now=now,
        )
        if changed:
            # Virtual time: every backoff has expired by the time the cluster changed.
            now += config.max_backoff + 1.0
            clock.now = now
            scheduler.queue.cluster_changed(now)
            scheduler.enqueue_pending(now)
    else:
        raise SimulationError(f"no quiescence after {MAX_STEPS} scheduling steps")

    for key in sorted(pending_at_start):
        pod = cluster.pods.get(key)
        if pod is None:
            continue
        if pod.node_name is not None:
            result.bound[key] = pod.node_name
        elif cluster.is_gated(pod):
            result.gated[key] = list(pod.scheduling_gates)
        elif cluster.is_pending(pod):
            reason, message = conditions.get(key, ("", "not attempted"))
            if reason == NOT_READY_FOR_SCHEDULING:
                result.waiting[key] = message
            else:
                result.unschedulable[key] = message
    _summarise_groups(cluster, result, last_outcome, statuses, now=now)
    return result


def _apply(
    report: CycleReport,
    *,
    cluster: ClusterState,
    result: SimulationResult,
    conditions: dict[str, tuple[str, str]],
    last_outcome: dict[GroupRef, GroupOutcome],
    statuses: dict[GroupRef, dict[str, Any]],
    number: int,
    now: float,
) -> bool:
    step = Step(number, report.gang.key, report.result, report.message, report.strategy)
    changed = False
    for decision in report.decisions:
        if isinstance(decision, Bind):
            step.bound.append((decision.pod, decision.node))
            changed = True
        elif isinstance(decision, BindVolume | SelectNode):
            result.volumes[decision.claim] = carry_out(decision, cluster)
            changed = True
        elif isinstance(decision, AllocateClaim) and decision.allocation is not None:
            allocation = decision.allocation
            result.claims[decision.claim] = ClaimSummary(
                node=_single_node(allocation.node_selector),
                devices=[
                    {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                    for r in allocation.results
                ],
            )
        elif isinstance(decision, Evict):
            cluster.delete_pod(decision.pod)
            result.preempted[decision.pod] = decision.message
            step.preempted.append(decision.pod)
            changed = True
        elif isinstance(decision, Nominate):
            pod = cluster.pods.get(decision.pod)
            if pod is not None:
                cluster.nominate(pod, decision.node)
            if decision.node is not None:
                # Reported as "the node freed for it", even once the pod binds there.
                result.nominated[decision.pod] = decision.node
            step.nominated.append((decision.pod, decision.node))
        elif isinstance(decision, SetCondition) and decision.type == "PodScheduled":
            conditions[decision.pod] = (decision.reason, decision.message)
        elif isinstance(decision, GroupOutcome):
            last_outcome[decision.group] = decision
            composite = cluster.composites.get(decision.group)
            if composite is not None:
                status = composite_status(
                    composite, decision, statuses.get(decision.group, {}), now=timestamp(now)
                )
                if status is not None:
                    statuses[decision.group] = status
                continue
            # What the live status writer would write now (upstream's condition, for one,
            # never goes back to False once a cycle succeeded).
            group = cluster.groups.get(decision.group)
            if group is not None:
                status = desired_status(
                    group,
                    cluster.group_members(decision.group),
                    decision,
                    statuses.get(decision.group, {}),
                    now=timestamp(now),
                )
                if status is not None:
                    statuses[decision.group] = status
    if report.result == SCHEDULED:
        for pod_key, _ in step.bound:
            conditions.pop(pod_key, None)
    result.timeline.append(step)
    return changed


def _single_node(terms: tuple[NodeSelectorTerm, ...] | None) -> str | None:
    """The node an allocation is bound to, when its selector names exactly one."""
    if terms is None or len(terms) != 1 or terms[0].match_expressions:
        return None
    fields = terms[0].match_fields
    if len(fields) == 1 and fields[0].operator == "In" and len(fields[0].values) == 1:
        return fields[0].values[0]
    return None


def _summarise_groups(
    cluster: ClusterState,
    result: SimulationResult,
    last_outcome: dict[GroupRef, GroupOutcome],
    statuses: dict[GroupRef, dict[str, Any]],
    *,
    now: float,
) -> None:
    """Each group as its dialect's owner would show it: scheduler-plugins' phases for
    scheduling.x-k8s.io, ours with Koordinator's Pending rule for scheduling.sigs.k8s.io, ours
    for the others (scheduling.k8s.io has no phase on the cluster; simulate shows ours as a
    summary), and the conditions the live scheduler writes."""
    refs = set(cluster.groups) | {
        ref for ref in cluster.members if ref.dialect is Dialect.KOORDINATOR
    }
    for ref in sorted(refs, key=lambda r: (r.namespace, r.name, r.dialect.value)):
        group = cluster.pod_group(ref)
        if group is None:
            continue
        members = cluster.group_members(ref)
        counts = count_members(members)
        outcome = last_outcome.get(ref)
        phase = group_phase(group.min_member, counts, attempted=outcome is not None)
        status = statuses.get(ref, {})
        if ref in cluster.groups:
            status = desired_status(group, members, outcome, status, now=timestamp(now)) or {}
        if ref.dialect in (Dialect.X_K8S, Dialect.SIGS):
            phase = str(status.get("phase") or phase)
        result.pod_groups[ref.key] = GroupSummary(
            phase=phase,
            min_member=group.min_member,
            scheduled=counts.scheduled,
            message=outcome.message if outcome is not None else "",
            conditions=_conditions(status),
            topology=_topology(cluster, group.topology, members),
            parent=group.parent or "",
        )
    _summarise_composites(cluster, result, last_outcome, statuses)


def _conditions(status: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {key: str(c.get(key, "")) for key in ("type", "status", "reason", "message")}
        for c in status.get("conditions") or []
    ]


def _summarise_composites(
    cluster: ClusterState,
    result: SimulationResult,
    last_outcome: dict[GroupRef, GroupOutcome],
    statuses: dict[GroupRef, dict[str, Any]],
) -> None:
    """CompositePodGroups next to the PodGroups: minGroupCount, the children placed (a
    PodGroup with minCount pods scheduled, a CompositePodGroup whose condition is True), the
    last outcome and the CompositePodGroupInitiallyScheduled condition."""
    children = cluster.tree_children()

    def placed(ref: GroupRef) -> bool:
        if ref.dialect is Dialect.COMPOSITE:
            held = statuses.get(ref, {}).get("conditions") or []
            return any(c.get("status") == "True" for c in held)
        group = cluster.groups.get(ref)
        if group is None:
            return False
        return count_members(cluster.group_members(ref)).scheduled >= group.min_member

    for ref in sorted(cluster.composites, key=lambda r: (r.namespace, r.name)):
        composite = cluster.composites[ref]
        outcome = last_outcome.get(ref)
        status = statuses.get(ref, {})
        kids = children.get(ref, [])
        done = sum(1 for kid in kids if placed(kid))
        phase = "Scheduled" if placed(ref) else ("Unschedulable" if outcome else "Pending")
        if outcome is not None and outcome.result == "waiting":
            phase = "Pending"
        key = ref.key if ref.key not in result.pod_groups else f"{ref.key} (CompositePodGroup)"
        result.pod_groups[key] = GroupSummary(
            phase=phase,
            min_member=composite.min_group_count,
            scheduled=done,
            message=outcome.message if outcome is not None else "",
            conditions=_conditions(status),
            kind="CompositePodGroup",
            parent=composite.parent or "",
            children=[kid.name for kid in kids],
        )


def _topology(
    cluster: ClusterState, request: TopologyRequest | None, members: Iterable[Pod]
) -> tuple[str, str | None] | None:
    if request is None or request.problem:
        return None  # nothing to report a domain of (the group's message says why)
    nodes = cluster.snapshot.index
    labels = [
        cluster.snapshot.nodes[nodes[pod.node_name]].labels
        for pod in members
        if pod.node_name is not None and pod.node_name in nodes and not pod.is_finished
    ]
    return shared_domain(request.levels, labels)
