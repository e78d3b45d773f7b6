"""Builders for PodGroup trees in model form (CompositePodGroups with PodGroup leaves)."""

from __future__ import annotations

from collections.abc import Iterable

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.model import CompositePodGroup, composite_ref
from gangsched.core.decisions import SCHEDULED
from gangsched.core.model import Dialect, DisruptionMode, Node, Pod, PodGroup
from gangsched.core.scheduler import CycleReport, Scheduler
from tests.builders import SCHEDULER, ref


def cpg(
    name: str,
    min_groups: int | None = None,
    *,
    parent: str | None = None,
    priority: int = 0,
    mode: DisruptionMode = DisruptionMode.SINGLE,
    created: float = 0.0,
    policy: str | None = None,
) -> CompositePodGroup:
    """A CompositePodGroup: a gang of `min_groups` children, or basic when None."""
    return CompositePodGroup(
        ref=composite_ref("default", name),
        parent=parent,
        min_group_count=min_groups or 1,
        gang=min_groups is not None,
        priority=priority,
        disruption_mode=mode,
        created=created,
        preemption_policy=policy,
    )


def leaf(
    name: str,
    min_count: int = 1,
    *,
    parent: str | None,
    priority: int = 0,
    mode: DisruptionMode = DisruptionMode.SINGLE,
    created: float = 0.0,
) -> PodGroup:
    """A scheduling.k8s.io PodGroup in a tree."""
    return PodGroup(
        ref=ref(name, dialect=Dialect.UPSTREAM),
        min_member=min_count,
        priority=priority,
        disruption_mode=mode,
        created=created,
        parent=parent,
    )


def tree_cluster(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    groups: Iterable[PodGroup],
    composites: Iterable[CompositePodGroup],
) -> ClusterState:
    return ClusterState.build(
        scheduler_name=SCHEDULER,
        nodes=nodes,
        pods=pods,
        groups=groups,
        composites=composites,
    )


def run(state: ClusterState) -> list[CycleReport]:
    """Every step until the queue is empty; the cluster changes after each success."""
    sched = Scheduler(state)
    sched.enqueue_pending()
    reports = []
    now = 0.0
    for _ in range(200):
        report = sched.step(now)
        if report is None:
            break
        reports.append(report)
        if report.result == SCHEDULED:
            now += 100.0
            sched.queue.cluster_changed(now)
            sched.enqueue_pending(now)
    return reports
