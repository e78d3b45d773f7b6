"""Terse builders for model objects in tests (CPU in cores or millicores, memory in GiB)."""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.model import (
    Dialect,
    DisruptionMode,
    GroupRef,
    Node,
    NodeConstraints,
    Pod,
    PodGroup,
    Taint,
)

GIB = 1024**3
SCHEDULER = "gangsched"


def node(
    name: str,
    *,
    cpu: float = 4,
    memory_gib: float = 16,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    unschedulable: bool = False,
    extra: dict[str, int] | None = None,
) -> Node:
    allocatable = {"cpu": int(cpu * 1000), "memory": int(memory_gib * GIB), "pods": pods}
    allocatable.update(extra or {})
    return Node(
        name=name,
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        allocatable=allocatable,
        taints=taints,
        unschedulable=unschedulable,
    )


def pod(
    name: str,
    *,
    cpu: float = 1,
    memory_gib: float = 0.1,
    group: str | None = None,
    node_name: str | None = None,
    priority: int = 0,
    created: float = 0.0,
    namespace: str = "default",
    scheduler_name: str = SCHEDULER,
    constraints: NodeConstraints | None = None,
    labels: dict[str, str] | None = None,
    extra: dict[str, int] | None = None,
    preemption_policy: str = "PreemptLowerPriority",
) -> Pod:
    requests = {"cpu": round(cpu * 1000), "memory": int(memory_gib * GIB)}
    requests.update(extra or {})
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=dict(labels or {}),
        scheduler_name=scheduler_name,
        node_name=node_name,
        phase="Running" if node_name else "Pending",
        priority=priority,
        preemption_policy=preemption_policy,
        requests={k: v for k, v in requests.items() if v},
        constraints=constraints or NodeConstraints(),
        created=created,
        group=GroupRef(Dialect.SIGS, namespace, group) if group else None,
    )


def group(
    name: str,
    min_member: int,
    *,
    namespace: str = "default",
    priority: int | None = None,
    mode: DisruptionMode = DisruptionMode.SINGLE,
    gang_group: tuple[str, ...] = (),
    created: float = 0.0,
) -> PodGroup:
    return PodGroup(
        ref=GroupRef(Dialect.SIGS, namespace, name),
        min_member=min_member,
        priority=priority,
        disruption_mode=mode,
        gang_group=tuple(GroupRef(Dialect.SIGS, namespace, g) for g in gang_group),
        created=created,
    )


def cluster(
    nodes: list[Node], pods: list[Pod], groups: list[PodGroup] | None = None
) -> ClusterState:
    return ClusterState.build(scheduler_name=SCHEDULER, nodes=nodes, pods=pods, groups=groups or [])


def gang_pods(name: str, count: int, **kwargs: object) -> list[Pod]:
    return [
        pod(f"{name}-{i}", group=name, created=float(i), **kwargs)  # type: ignore[arg-type]
        for i in range(count)
    ]
