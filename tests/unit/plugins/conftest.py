"""Builders for plugin tests: nodes, pods and snapshots from plain keyword arguments.

Quantities are written as in manifests ("500m", "2Gi") and converted with the production
parser, so the tests read like the YAML they stand for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from gangsched.core.framework import FilterPlugin, Framework, PodContext, ScorePlugin
from gangsched.core.labels import LabelSelector, NodeSelectorTerm, Requirement
from gangsched.core.model import (
    Node,
    NodeConstraints,
    Pod,
    PreferredNodeTerm,
    Taint,
    Toleration,
)
from gangsched.core.quantity import to_milli, to_units
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code

Quantity = str | int


def resources(
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    extra: Mapping[str, Quantity] | None = None,
) -> dict[str, int]:
    out: dict[str, int] = {}
    if cpu is not None:
        out["cpu"] = to_milli(cpu)
    if memory is not None:
        out["memory"] = to_units(memory)
    for name, value in (extra or {}).items():
        out[name] = to_units(value)
    return out


def make_node(
    name: str,
    *,
    cpu: Quantity = "4",
    memory: Quantity = "8Gi",
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


def make_pod(
    name: str = "p",
    *,
    namespace: str = "default",
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    extra: Mapping[str, Quantity] | None = None,
    labels: Mapping[str, str] | None = None,
    node: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    required_terms: Sequence[NodeSelectorTerm] | None = None,
    preferred_terms: Sequence[PreferredNodeTerm] = (),
    tolerations: Iterable[Toleration] = (),
    spec_node_name: str | None = None,
    phase: str | None = None,
    **fields: Any,
) -> Pod:
    """A pod; `node` binds it (spec.nodeName of a running pod), `spec_node_name` is the
    scheduling constraint of a pending pod that names its node."""
    constraints = NodeConstraints(
        node_name=spec_node_name,
        node_selector=tuple(sorted((node_selector or {}).items())),
        required_terms=None if required_terms is None else tuple(required_terms),
        preferred_terms=tuple(preferred_terms),
        tolerations=tuple(tolerations),
    )
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=dict(labels or {}),
        node_name=node,
        phase=phase or ("Running" if node else "Pending"),
        requests=resources(cpu, memory, extra),
        constraints=constraints,
        **fields,
    )


def selector(**match_labels: str) -> LabelSelector:
    return LabelSelector(match_labels=tuple(sorted(match_labels.items())))


def req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, operator, tuple(values))


def term(*expressions: Requirement, fields: Sequence[Requirement] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields))


def snapshot(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> Snapshot:
    return Snapshot.build(nodes, pods)


def context(pod: Pod, snap: Snapshot) -> PodContext:
    return Framework(filters=[], scores=[]).context(pod, snap)


def passing(plugin: FilterPlugin, pod: Pod, snap: Snapshot) -> list[str]:
    """Names of the nodes the filter lets through (all of them when it does not apply)."""
    ctx = context(pod, snap)
    if not plugin.applies(ctx, snap):
        return [node.name for node in snap.nodes]
    mask = plugin.filter(ctx, snap, np.ones(len(snap), dtype=np.bool_))
    return [snap.nodes[i].name for i in np.flatnonzero(mask)]


def rejections(plugin: FilterPlugin, pod: Pod, snap: Snapshot) -> dict[str, list[tuple[str, Code]]]:
    """Per rejected node, the plugin's explanation, obtained the way `diagnose` does."""
    ctx = context(pod, snap)
    if not plugin.applies(ctx, snap):
        return {}
    passed = plugin.filter(ctx, snap, np.ones(len(snap), dtype=np.bool_))
    return {snap.nodes[i].name: plugin.explain(ctx, snap, int(i)) for i in np.flatnonzero(~passed)}


def scores(plugin: ScorePlugin, pod: Pod, snap: Snapshot) -> dict[str, float]:
    """Scores over every node of the snapshot (as if all were feasible)."""
    ctx = context(pod, snap)
    nodes = np.arange(len(snap), dtype=np.intp)
    values = plugin.score(ctx, snap, nodes)
    return {snap.nodes[i].name: float(values[i]) for i in range(len(snap))}
