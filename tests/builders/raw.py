"""Raw JSON as an informer or `gangsched simulate` reads it: nodes, pods, PodGroups of every
dialect (Koordinator gangs as pod annotations), PriorityClasses and PodDisruptionBudgets."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gangsched.core.api.dialects import (
    KOORDINATOR_GANG_GROUPS,
    KOORDINATOR_GANG_NAME,
    KOORDINATOR_MIN_AVAILABLE,
    SIGS_POD_GROUP_LABEL,
    X_K8S_POD_GROUP_LABEL,
)
from gangsched.core.model import (
    Dialect,
)
from tests.builders.common import (
    JSON,
    POD_GROUP_API_VERSIONS,
    SCHEDULER,
    Quantity,
    manifest_resources,
)


def raw_node(
    name: str,
    cpu: Quantity = 4,
    *,
    memory: Quantity = "16Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, Quantity] | None = None,
    uid: str | None = None,
) -> JSON:
    allocatable = {**manifest_resources(cpu, memory, extra), "pods": str(pods)}
    spec: JSON = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid or f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": spec,
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def raw_pod(
    name: str,
    cpu: Quantity | None = 1,
    *,
    memory: Quantity | None = None,
    extra: Mapping[str, Quantity] | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_name: str | None = None,
    group: str | None = None,
    dialect: Dialect = Dialect.SIGS,
    min_available: int | None = None,
    scheduler: str = SCHEDULER,
    phase: str | None = None,
    uid: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> JSON:
    """A pod manifest. `group` joins it to a group the way `dialect` spells membership
    (Koordinator: by annotations, with `min_available`); `metadata` and `status` are merged
    in; other keyword arguments are spec fields (priorityClassName=..., volumes=[...])."""
    labels = dict(labels or {})
    annotations = dict(annotations or {})
    if group:
        if dialect is Dialect.SIGS:
            labels[SIGS_POD_GROUP_LABEL] = group
        elif dialect is Dialect.X_K8S:
            labels[X_K8S_POD_GROUP_LABEL] = group
        elif dialect is Dialect.KOORDINATOR:
            annotations[KOORDINATOR_GANG_NAME] = group
            if min_available is not None:
                annotations[KOORDINATOR_MIN_AVAILABLE] = str(min_available)
        elif dialect is Dialect.UPSTREAM:
            spec["schedulingGroup"] = {"podGroupName": group}
    body: JSON = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "c", "resources": {"requests": manifest_resources(cpu, memory, extra)}}
        ],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    meta: JSON = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    meta.update(metadata or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": body,
        "status": {"phase": phase or ("Running" if node_name else "Pending"), **(status or {})},
    }


def raw_pod_group(
    name: str,
    min_member: int = 1,
    *,
    dialect: Dialect = Dialect.SIGS,
    namespace: str = "default",
    priority_class: str | None = None,
    disruption_mode: str | None = None,
    gang_group: Sequence[str] = (),
    uid: str | None = None,
    api_version: str | None = None,
    **spec: Any,
) -> JSON:
    """A PodGroup in the shape of its dialect: the coscheduling CRD (sigs, x-k8s) or the
    scheduling.k8s.io workload API (schedulingPolicy.gang.minCount, union disruptionMode).
    `gang_group` lists "namespace/name" groups for Koordinator's GangGroup annotation."""
    if dialect not in POD_GROUP_API_VERSIONS:
        raise ValueError(f"{dialect} gangs have no PodGroup object; use raw_pod(group=...)")
    body: JSON
    if dialect is Dialect.UPSTREAM:
        body = {"schedulingPolicy": {"gang": {"minCount": min_member}}}
        if disruption_mode is not None:
            body["disruptionMode"] = {disruption_mode.lower(): {}}
    else:
        body = {"minMember": min_member}
        if disruption_mode is not None:
            body["disruptionMode"] = disruption_mode
    if priority_class is not None:
        body["priorityClassName"] = priority_class
    body.update(spec)
    meta: JSON = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if gang_group:
        meta["annotations"] = {KOORDINATOR_GANG_GROUPS: json.dumps(list(gang_group))}
    return {
        "apiVersion": api_version or POD_GROUP_API_VERSIONS[dialect],
        "kind": "PodGroup",
        "metadata": meta,
        "spec": body,
    }


def raw_priority_class(
    name: str,
    value: int,
    *,
    preemption_policy: str = "PreemptLowerPriority",
    global_default: bool = False,
) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "value": value,
        "globalDefault": global_default,
        "preemptionPolicy": preemption_policy,
    }


def raw_pdb(
    name: str,
    match_labels: Mapping[str, str],
    *,
    namespace: str = "default",
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int | None = None,
) -> JSON:
    spec: JSON = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    body: JSON = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": spec,
    }
    if disruptions_allowed is not None:
        body["status"] = {"disruptionsAllowed": disruptions_allowed}
    return body


def kubeconfig_file(path: Path, *, server: str, token: str = "t") -> Path:
    """A kubeconfig at `path` with one context: `server`, authenticated by bearer `token`
    (tests point it at a port nothing listens on)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path
