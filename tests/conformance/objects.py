"""Upstream-shaped objects as raw manifests for the conformance suite: nodes, pods, PodGroups of
the upstream, scheduler-plugins and Koordinator dialects, Workloads, composite groups,
PriorityClasses and PDBs, written the way upstream's integration tests build theirs.

Tests import them through tests/conformance/harness.py, which runs them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from tests.builders import SCHEDULER

Manifest = dict[str, Any]

NAMESPACE = "default"
UPSTREAM_API = "scheduling.k8s.io/v1beta1"
X_K8S_API = "scheduling.x-k8s.io/v1alpha1"
SIGS_API = "scheduling.sigs.k8s.io/v1alpha1"
X_K8S_LABEL = "scheduling.x-k8s.io/pod-group"
SIGS_LABEL = "pod-group.scheduling.sigs.k8s.io"
HOSTNAME = "kubernetes.io/hostname"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


# -- objects ------------------------------------------------------------------------------------
def node(
    name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    pods: str = "32",
    labels: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
    unschedulable: bool = False,
) -> Manifest:
    """A node as `st.MakeNode().Capacity(...)` builds it: only the resources named, 32 pods."""
    capacity: dict[str, str] = {"pods": pods}
    if cpu is not None:
        capacity["cpu"] = cpu
    if memory is not None:
        capacity["memory"] = memory
    capacity.update(extra or {})
    raw: Manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
    }
    if unschedulable:
        raw["spec"] = {"unschedulable": True}
    return raw


def pod(
    name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    extra: Mapping[str, str] | None = None,
    priority: int | None = None,
    node_name: str | None = None,
    pod_group: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str = NAMESPACE,
    scheduler_name: str = SCHEDULER,
    phase: str | None = None,
    preemption_policy: str | None = None,
    host_ports: Iterable[int] = (),
    pod_level: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Manifest:
    """A pod as `st.MakePod()` builds it; `pod_group` sets `spec.schedulingGroup.podGroupName`,
    `pod_level` the pod-level `spec.resources.requests`, `host_ports` container host ports."""
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra or {})
    container: Manifest = {"name": "c", "image": "image"}
    if requests:
        container["resources"] = {"requests": requests}
    ports = [{"containerPort": port, "hostPort": port} for port in host_ports]
    if ports:
        container["ports"] = ports
    body: Manifest = {"schedulerName": scheduler_name, "containers": [container]}
    if pod_level:
        body["resources"] = {"requests": dict(pod_level)}
    if preemption_policy is not None:
        body["preemptionPolicy"] = preemption_policy
    if priority is not None:
        body["priority"] = priority
    if node_name is not None:
        body["nodeName"] = node_name
    if pod_group is not None:
        body["schedulingGroup"] = {"podGroupName": pod_group}
    body.update(copy.deepcopy(dict(spec or {})))
    metadata: Manifest = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    raw: Manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}
    if phase is not None:
        raw["status"] = {"phase": phase}
    elif node_name is not None:
        raw["status"] = {"phase": "Running"}
    return raw


def upstream_group(
    name: str,
    *,
    min_count: int | None = None,
    priority: int | None = None,
    disruption_mode: str | None = None,
    template: tuple[str, str] | None = None,
    namespace: str = NAMESPACE,
    preemption_policy: str | None = None,
    priority_class: str | None = None,
    parent: str | None = None,
    topology_key: str | None = None,
) -> Manifest:
    """A scheduling.k8s.io/v1beta1 PodGroup: a gang when `min_count` is given, else basic.

    `template` is (workload, template name), as `TemplateRef`/`WorkloadRef` set it;
    `disruption_mode` is "single" or "all" (the v1beta1 union); `parent` names the
    CompositePodGroup above it; `topology_key` is its one topology constraint.
    """
    policy: Manifest = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    spec: Manifest = {"schedulingPolicy": policy}
    if template is not None:
        workload, template_name = template
        spec["workloadRef"] = {"workloadName": workload, "templateName": template_name}
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    if topology_key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if preemption_policy is not None:
        spec["preemptionPolicy"] = preemption_policy
    if disruption_mode is not None:
        spec["disruptionMode"] = {disruption_mode: {}}
    return {
        "apiVersion": UPSTREAM_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def workload(name: str, *templates: tuple[str, int | None], namespace: str = NAMESPACE) -> Manifest:
    """A scheduling.k8s.io Workload with (template name, minCount or None for basic) templates."""
    entries: list[Manifest] = [
        {
            "name": template,
            "schedulingPolicy": {"gang": {"minCount": count}} if count else {"basic": {}},
        }
        for template, count in templates
    ]
    return {
        "apiVersion": UPSTREAM_API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podGroupTemplates": entries},
    }


def composite_group(
    name: str,
    *,
    min_group_count: int | None = None,
    priority: int | None = None,
    disruption_mode: str | None = None,
    template: tuple[str, str] | None = None,
    parent: str | None = None,
    topology_key: str | None = None,
    namespace: str = NAMESPACE,
) -> Manifest:
    """A scheduling.k8s.io/v1alpha3 CompositePodGroup: a gang of `min_group_count` children, or
    basic."""
    policy: Manifest = (
        {"gang": {"minGroupCount": min_group_count}} if min_group_count else {"basic": {}}
    )
    spec: Manifest = {"schedulingPolicy": policy}
    if template is not None:
        spec["workloadRef"] = {"workloadName": template[0], "templateName": template[1]}
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    if priority is not None:
        spec["priority"] = priority
    if disruption_mode is not None:
        spec["disruptionMode"] = {disruption_mode: {}}
    if topology_key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def coscheduling_group(
    name: str,
    min_member: int,
    *,
    api: str = X_K8S_API,
    min_resources: Mapping[str, str] | None = None,
    schedule_timeout_seconds: int | None = None,
    namespace: str = NAMESPACE,
    annotations: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Manifest:
    """A scheduler-plugins (x-k8s) or Koordinator/seed (sigs) PodGroup CRD object."""
    body: Manifest = {"minMember": min_member}
    if min_resources is not None:
        body["minResources"] = dict(min_resources)
    if schedule_timeout_seconds is not None:
        body["scheduleTimeoutSeconds"] = schedule_timeout_seconds
    body.update(dict(spec or {}))
    metadata: Manifest = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": api, "kind": "PodGroup", "metadata": metadata, "spec": body}


def priority_class(name: str, value: int, *, preemption_policy: str | None = None) -> Manifest:
    raw: Manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if preemption_policy is not None:
        raw["preemptionPolicy"] = preemption_policy
    return raw


def pdb(
    name: str,
    *,
    match_labels: Mapping[str, str],
    min_available: int | None = None,
    max_unavailable: int | None = None,
    namespace: str = NAMESPACE,
) -> Manifest:
    spec: Manifest = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
