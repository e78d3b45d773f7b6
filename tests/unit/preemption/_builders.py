"""Small builders for preemption tests: clusters built directly as ClusterState.

CPU is in millicores and memory in bytes, as in the model. Pods with a node are running
(default-scheduler); pods without one are pending and ours (schedulerName gangsched).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang, GangPlacer
from gangsched.core.decisions import Decision, Event, Evict, Nominate, SetCondition
from gangsched.core.labels import LabelSelector
from gangsched.core.model import (
    Dialect,
    DisruptionBudget,
    DisruptionMode,
    GroupRef,
    Node,
    NodeConstraints,
    Pod,
    PodGroup,
    PriorityClass,
)
from gangsched.core.plugins import build_framework
from gangsched.core.preemption import build_preemptor
from gangsched.core.scheduler import PreemptionOutcome, Scheduler
from gangsched.core.status import Code

SCHED = "gangsched"
GI = 1024**3
MI = 1024**2


def node(
    name: str, cpu: int = 4000, *, memory: int = 16 * GI, pods: int = 110, **labels: str
) -> Node:
    return Node(
        name=name,
        labels={"kubernetes.io/hostname": name, **labels},
        allocatable={"cpu": cpu, "memory": memory, "pods": pods},
    )


def ref(name: str, namespace: str = "default") -> GroupRef:
    return GroupRef(Dialect.SIGS, namespace, name)


def pod(
    name: str,
    cpu: int = 1000,
    *,
    prio: int = 0,
    node: str | None = None,
    group: str | None = None,
    created: float = 0.0,
    labels: dict[str, str] | None = None,
    memory: int = 100 * MI,
    policy: str = "PreemptLowerPriority",
    selector: dict[str, str] | None = None,
    nominated: str | None = None,
    terminating: bool = False,
    namespace: str = "default",
) -> Pod:
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        labels=dict(labels or {}),
        scheduler_name="default-scheduler" if node else SCHED,
        node_name=node,
        nominated_node_name=nominated,
        phase="Running" if node else "Pending",
        priority=prio,
        preemption_policy=policy,
        requests={"cpu": cpu, "memory": memory},
        constraints=NodeConstraints(node_selector=tuple(sorted((selector or {}).items()))),
        created=created,
        terminating=terminating,
        group=ref(group, namespace) if group else None,
    )


def group(
    name: str,
    min_member: int = 1,
    *,
    prio: int | None = None,
    mode: DisruptionMode = DisruptionMode.SINGLE,
    policy: str | None = None,
    gang_group: Iterable[str] = (),
    created: float = 0.0,
) -> PodGroup:
    return PodGroup(
        ref=ref(name),
        min_member=min_member,
        priority=prio,
        priority_class_name="",
        preemption_policy=policy,
        disruption_mode=mode,
        gang_group=tuple(ref(g) for g in gang_group),
        created=created,
    )


def budget(name: str, allowed: int, **match: str) -> DisruptionBudget:
    return DisruptionBudget(
        namespace="default",
        name=name,
        selector=LabelSelector(match_labels=tuple(sorted(match.items()))),
        disruptions_allowed=allowed,
    )


def cluster(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    groups: Iterable[PodGroup] = (),
    budgets: Iterable[DisruptionBudget] = (),
    priority_classes: Iterable[PriorityClass] = (),
) -> ClusterState:
    return ClusterState.build(
        scheduler_name=SCHED,
        nodes=nodes,
        pods=pods,
        groups=groups,
        budgets=budgets,
        priority_classes=priority_classes,
    )


# ------------------------------------------------------------------------------ running
def gang_of(state: ClusterState, key: GroupRef) -> Gang:
    return Scheduler(state).gang(state.unit_of(key)[0])


def lone(name: str, namespace: str = "default") -> GroupRef:
    return GroupRef(Dialect.LONE_POD, namespace, name)


def preempt(
    state: ClusterState, key: GroupRef, strategy: str = "mincost"
) -> tuple[PreemptionOutcome, CycleResult]:
    """Run the cycle for one gang and, when it fails, the preemptor (as Scheduler does)."""
    framework = build_framework()
    gang = gang_of(state, key)
    snap = state.snapshot
    mark = snap.checkpoint()
    result = GangPlacer(framework).place(gang, snap)
    snap.rollback(mark)
    before = _fingerprint(state)
    if result.code is not Code.UNSCHEDULABLE:
        return PreemptionOutcome(False, f"cycle: {result.code.value}"), result
    outcome = build_preemptor(strategy=strategy, scheduler_name=SCHED).preempt(
        gang, result, state, framework
    )
    assert _fingerprint(state) == before, "preemption left the snapshot changed"
    return outcome, result


def _fingerprint(state: ClusterState) -> tuple[object, ...]:
    snap = state.snapshot
    return (
        snap.requested.tobytes(),
        tuple(tuple(sorted(p)) for p in snap.node_pods),
        tuple(sorted((k, r.node) for k, r in snap.nominated.items())),
        len(snap._journal),
    )


def victims(outcome: PreemptionOutcome) -> list[str]:
    return sorted(p.name for p in outcome.victims)


def nominations(outcome: PreemptionOutcome) -> dict[str, str | None]:
    return {d.pod.split("/")[1]: d.node for d in outcome.decisions if isinstance(d, Nominate)}


@dataclass
class Settled:
    evicted: list[str] = field(default_factory=list)
    bound: dict[str, str] = field(default_factory=dict)
    reports: list[object] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)


def settle(state: ClusterState, strategy: str = "mincost", max_steps: int = 50) -> Settled:
    """Drive the scheduler to quiescence, carrying out decisions at once (victims vanish)."""
    sched = Scheduler(state, preemptor=build_preemptor(strategy=strategy, scheduler_name=SCHED))
    out = Settled()
    now = 0.0
    idle = 0
    for _ in range(max_steps):
        sched.enqueue_pending(now)
        report = sched.step(now)
        if report is None:
            idle += 1
            if idle > 3:
                break
            now += 30.0
            sched.queue.cluster_changed(now)
            continue
        idle = 0
        out.reports.append(report)
        out.decisions.extend(report.decisions)
        changed = False
        for decision in report.decisions:
            if isinstance(decision, Evict):
                state.delete_pod(decision.pod)
                out.evicted.append(decision.pod.split("/")[1])
                changed = True
            elif isinstance(decision, Nominate):
                target = state.pods.get(decision.pod)
                if target is not None:
                    state.nominate(target, decision.node)
        for bind in report.bound:
            out.bound[bind.pod.split("/")[1]] = bind.node
        if changed:
            sched.queue.cluster_changed(now)
        now += 1.0
    return out


def disruption_conditions(decisions: Iterable[Decision]) -> list[SetCondition]:
    return [d for d in decisions if isinstance(d, SetCondition) and d.type == "DisruptionTarget"]


def events(decisions: Iterable[Decision]) -> list[Event]:
    return [d for d in decisions if isinstance(d, Event) and d.reason == "Preempted"]


def overcommitted(state: ClusterState) -> list[str]:
    snap = state.snapshot
    return [
        snap.nodes[i].name
        for i in range(len(snap))
        if (snap.requested[i] > snap.allocatable[i]).any()
    ]
