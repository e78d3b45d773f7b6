"""scheduling.k8s.io/v1alpha3 CompositePodGroup into the model (KEP-6012, Kubernetes 1.37+).

The kind exists only in v1alpha3 (1.37 and 1.38 alike). Its spec mirrors the PodGroup's with
`minGroupCount` (children) in place of `minCount` (pods), no resource claims, and a
required `workloadRef`; `parentCompositePodGroupName` links it into its tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import INT32_MAX, Reader, child
from gangsched.core.api.podgroups import (
    read_disruption_mode,
    read_parent,
    read_upstream_priority,
)
from gangsched.core.api.priority import PriorityResolver
from gangsched.core.api.topology import read_upstream_topology
from gangsched.core.composite.model import CompositePodGroup, composite_ref

COMPOSITE_API_VERSION = "scheduling.k8s.io/v1alpha3"
COMPOSITE_KIND = "CompositePodGroup"


def composite_pod_group_from_raw(
    raw: Mapping[str, Any], *, priorities: PriorityResolver
) -> CompositePodGroup:
    """Convert a CompositePodGroup, or raise InvalidObject naming every bad field."""
    r = Reader.for_object(COMPOSITE_KIND, raw, namespaced=True)
    api_version = r.raw.get("apiVersion")
    if api_version != COMPOSITE_API_VERSION:
        r.add(
            "apiVersion",
            f"{show(api_version)} does not serve CompositePodGroups; use {COMPOSITE_API_VERSION}",
        )
    spec = r.mapping(r.raw.get("spec"), "spec")
    group = CompositePodGroup(
        ref=composite_ref(r.namespace, r.name),
        uid=r.string(r.metadata.get("uid"), "metadata.uid"),
        created=r.timestamp(r.metadata.get("creationTimestamp"), "metadata.creationTimestamp")
        or 0.0,
        generation=r.integer(r.metadata.get("generation"), "metadata.generation", minimum=0) or 0,
    )
    group.parent = read_parent(r, spec)
    _read_policy(r, spec, group)
    group.disruption_mode = read_disruption_mode(r, spec.get("disruptionMode"), v1alpha2=False)
    request = read_upstream_topology(r, spec, version="v1alpha3")
    group.topology_key = request.required if request is not None else None

    group.priority_class_name, group.priority, group.preemption_policy = read_upstream_priority(
        r, spec, priorities
    )
    r.done()
    return group


def _read_policy(r: Reader, spec: Mapping[str, Any], group: CompositePodGroup) -> None:
    policy_field = "spec.schedulingPolicy"
    if spec.get("schedulingPolicy") is None:
        r.add(policy_field, "is required (basic: {} or gang: {minGroupCount: N})")
        return
    policy = r.mapping(spec.get("schedulingPolicy"), policy_field)
    has_basic = policy.get("basic") is not None
    has_gang = policy.get("gang") is not None
    if has_basic and has_gang:
        r.add(policy_field, "must set exactly one of basic and gang, not both")
    elif has_gang:
        gang_field = child(policy_field, "gang")
        gang = r.mapping(policy.get("gang"), gang_field)
        count_field = child(gang_field, "minGroupCount")
        if gang.get("minGroupCount") is None:
            r.add(count_field, "is required")
        count = r.integer(gang.get("minGroupCount"), count_field, minimum=1, maximum=INT32_MAX)
        group.gang = True
        group.min_group_count = count or 1
    elif not has_basic:
        r.add(policy_field, "must set one of basic and gang")
