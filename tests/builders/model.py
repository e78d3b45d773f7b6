"""Model objects for the pure core: nodes, pods, PodGroups, priority classes, budgets, the
cluster state and snapshot built from them, label selectors and node selector terms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gangsched.core.cluster import ClusterState
from gangsched.core.labels import LabelSelector, NodeSelectorTerm, Requirement
from gangsched.core.model import (
    Dialect,
    DisruptionBudget,
    DisruptionMode,
    GroupRef,
    HostPort,
    Node,
    NodeConstraints,
    Pod,
    PodAffinityTerm,
    PodGroup,
    PreferredNodeTerm,
    PriorityClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from gangsched.core.snapshot import Snapshot
from gangsched.core.volumes.book import VolumeBook
from tests.builders.common import SCHEDULER, Quantity, resources


def ref(name: str, namespace: str = "default", dialect: Dialect = Dialect.SIGS) -> GroupRef:
    return GroupRef(dialect, namespace, name)


def lone(name: str, namespace: str = "default") -> GroupRef:
    """The ref of a pod that belongs to no group (a gang of one)."""
    return GroupRef(Dialect.LONE_POD, namespace, name)


def node(
    name: str,
    cpu: Quantity = 4,
    *,
    memory: Quantity = "16Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    unschedulable: bool = False,
    extra: Mapping[str, Quantity] | None = None,
) -> Node:
    allocatable = resources(cpu, memory, extra)
    allocatable["pods"] = pods
    return Node(
        name=name,
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        allocatable=allocatable,
        taints=tuple(taints),
        unschedulable=unschedulable,
    )


def pod(
    name: str = "p",
    cpu: Quantity | None = 1,
    *,
    memory: Quantity | None = "100Mi",
    extra: Mapping[str, Quantity] | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    group: str | None = None,
    dialect: Dialect = Dialect.SIGS,
    priority: int = 0,
    preemption_policy: str = "PreemptLowerPriority",
    scheduler_name: str = SCHEDULER,
    created: float = 0.0,
    nominated: str | None = None,
    terminating: bool = False,
    deleting_at: float | None = None,
    phase: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    required_terms: Sequence[NodeSelectorTerm] | None = None,
    preferred_terms: Sequence[PreferredNodeTerm] = (),
    tolerations: Iterable[Toleration] = (),
    spec_node_name: str | None = None,
    affinity: Iterable[PodAffinityTerm] = (),
    anti_affinity: Iterable[PodAffinityTerm] = (),
    preferred_affinity: Iterable[WeightedPodAffinityTerm] = (),
    preferred_anti_affinity: Iterable[WeightedPodAffinityTerm] = (),
    spread: Iterable[TopologySpreadConstraint] = (),
    host_ports: Iterable[HostPort] = (),
) -> Pod:
    """A model pod. `node_name` binds it (a running pod); `spec_node_name` is the constraint of a
    pending pod that names its node; cpu=None and memory=None request nothing."""
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=dict(labels or {}),
        scheduler_name=scheduler_name,
        node_name=node_name,
        nominated_node_name=nominated,
        phase=phase or ("Running" if node_name else "Pending"),
        priority=priority,
        preemption_policy=preemption_policy,
        requests=resources(cpu, memory, extra),
        constraints=NodeConstraints(
            node_name=spec_node_name,
            node_selector=tuple(sorted((node_selector or {}).items())),
            required_terms=None if required_terms is None else tuple(required_terms),
            preferred_terms=tuple(preferred_terms),
            tolerations=tuple(tolerations),
        ),
        affinity=tuple(affinity),
        anti_affinity=tuple(anti_affinity),
        preferred_affinity=tuple(preferred_affinity),
        preferred_anti_affinity=tuple(preferred_anti_affinity),
        spread=tuple(spread),
        host_ports=tuple(host_ports),
        created=created,
        terminating=terminating or deleting_at is not None,
        deleting_at=deleting_at,
        group=ref(group, namespace, dialect) if group else None,
    )


def gang_pods(name: str, count: int, *, start: float = 0.0, **kwargs: Any) -> list[Pod]:
    """`count` pending members name-0 .. name-(count-1) of group `name`, created in order."""
    return [
        pod(f"{name}-{i}", group=name, created=start + float(i), **kwargs) for i in range(count)
    ]


def group(
    name: str,
    min_member: int = 1,
    *,
    namespace: str = "default",
    dialect: Dialect = Dialect.SIGS,
    priority: int | None = None,
    preemption_policy: str | None = None,
    mode: DisruptionMode = DisruptionMode.SINGLE,
    gang_group: Iterable[str] = (),
    min_resources: Mapping[str, Quantity] | None = None,
    created: float = 0.0,
) -> PodGroup:
    return PodGroup(
        ref=ref(name, namespace, dialect),
        min_member=min_member,
        min_resources=resources(extra=min_resources),
        priority=priority,
        preemption_policy=preemption_policy,
        disruption_mode=mode,
        gang_group=tuple(ref(g, namespace, dialect) for g in gang_group),
        created=created,
    )


def priority_class(
    name: str, value: int, *, preemption_policy: str = "PreemptLowerPriority"
) -> PriorityClass:
    return PriorityClass(name=name, value=value, preemption_policy=preemption_policy)


def budget(
    name: str, allowed: int, *, namespace: str = "default", **match_labels: str
) -> DisruptionBudget:
    return DisruptionBudget(
        namespace=namespace,
        name=name,
        selector=selector(**match_labels),
        disruptions_allowed=allowed,
    )


def cluster(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    groups: Iterable[PodGroup] = (),
    budgets: Iterable[DisruptionBudget] = (),
    priority_classes: Iterable[PriorityClass] = (),
    *,
    volumes: VolumeBook | None = None,
    scheduler_name: str = SCHEDULER,
) -> ClusterState:
    return ClusterState.build(
        scheduler_name=scheduler_name,
        nodes=nodes,
        pods=pods,
        groups=groups,
        budgets=budgets,
        priority_classes=priority_classes,
        extensions=[] if volumes is None else [volumes],
    )


def snapshot(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> Snapshot:
    return Snapshot.build(nodes, pods)


# ------------------------------------------------------------------------ selectors, terms
def selector(**match_labels: str) -> LabelSelector:
    return LabelSelector(match_labels=tuple(sorted(match_labels.items())))


def req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, operator, tuple(values))


def term(*expressions: Requirement, fields: Sequence[Requirement] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields))
