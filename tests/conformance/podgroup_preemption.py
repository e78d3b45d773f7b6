"""Shorthand objects for the rows of upstream's TestPodGroupPreemption table (KEP-5710), shared
by test_k8s_podgroup_preemption*.py: nodes with 4Gi and 32 pods, upstream PodGroups (a gang
when min_count is given, else a basic group), pods by priority and group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.conformance.harness import (
    Manifest,
    node,
    pod,
    upstream_group,
)


def n(name: str, cpu: str, labels: Mapping[str, str] | None = None) -> Manifest:
    return node(name, cpu=cpu, memory="4Gi", pods="32", labels=labels)


def pg(
    name: str,
    priority: int,
    min_count: int | None = None,
    *,
    mode: str | None = None,
    policy: str | None = None,
    topology_key: str | None = None,
) -> Manifest:
    """A gang when `min_count` is given, else a basic group."""
    return upstream_group(
        name,
        min_count=min_count,
        priority=priority,
        disruption_mode=mode,
        preemption_policy=policy,
        topology_key=topology_key,
    )


def p(
    name: str,
    cpu: str | None,
    priority: int,
    group: str | None = None,
    on: str | None = None,
    **extra: Any,
) -> Manifest:
    return pod(name, cpu=cpu, priority=priority, pod_group=group, node_name=on, **extra)


def highs(count: int, group: str = "pg1", cpu: str = "1", **extra: Any) -> list[Manifest]:
    return [p(f"high-{i}", cpu, 100, group, **extra) for i in range(1, count + 1)]


def lows(count: int, cpu: str = "1", priority: int = 10) -> list[Manifest]:
    return [p(f"low-{i}", cpu, priority) for i in range(1, count + 1)]


def abc(group: str = "preemptor-pg") -> list[Manifest]:
    return [p(name, "1", 100, group) for name in ("p-a", "p-b", "p-c")]


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(1, count + 1)]
