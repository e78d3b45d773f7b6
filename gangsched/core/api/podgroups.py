"""PodGroups of every dialect into one model.

Users arrive with manifests written for kube-scheduler (scheduling.k8s.io), scheduler-plugins
(scheduling.x-k8s.io), Koordinator and the seed (scheduling.sigs.k8s.io) or Volcano
(scheduling.volcano.sh, see volcano.py); gangsched must
honour each one's semantics so that the same objects mean the same thing here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gangsched.core.api.capacity_wait import read_capacity_wait
from gangsched.core.api.dialects import POD_GROUP_API_GROUPS, api_group
from gangsched.core.api.disruption import read_disruption_annotations
from gangsched.core.api.errors import InvalidObject, show
from gangsched.core.api.fields import INT32_MAX, INT32_MIN, Reader, child
from gangsched.core.api.koordinator import (
    read_gang_group,
    read_match_policy,
    read_mode,
    read_total_number,
)
from gangsched.core.api.network_topology import NetworkTopology, read_koordinator_topology
from gangsched.core.api.priority import PREEMPTION_POLICIES, PriorityResolver, UnknownPriorityClass
from gangsched.core.api.topology import (
    merge,
    read_crd_topology,
    read_kai_topology,
    read_upstream_topology,
)
from gangsched.core.api.types import RawPodGroup
from gangsched.core.api.volcano import read_volcano
from gangsched.core.model import Dialect, DisruptionMode, GroupRef, PodGroup, PriorityClass

_CRD_DISRUPTION_MODES = {"Single": DisruptionMode.SINGLE, "All": DisruptionMode.ALL}
#: v1alpha2 (Kubernetes 1.36) spelled the modes as strings.
_V1ALPHA2_DISRUPTION_MODES = {"Pod": DisruptionMode.SINGLE, "PodGroup": DisruptionMode.ALL}
#: v1alpha3 and v1beta1 (1.37) made it a union of empty structs.
_UNION_DISRUPTION_MODES = {"single": DisruptionMode.SINGLE, "all": DisruptionMode.ALL}
#: The scheduling.k8s.io versions that ever served PodGroups: v1alpha2 (1.36 only), v1alpha3 and
#: v1beta1 (1.37+, the same shape; v1beta1 is the storage version and what kube-scheduler reads).
UPSTREAM_POD_GROUP_VERSIONS = ("v1beta1", "v1alpha3", "v1alpha2")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def pod_group_from_raw(
    raw: RawPodGroup | dict[str, Any],
    *,
    priorities: PriorityResolver,
    network_topology: NetworkTopology | None = None,
) -> PodGroup:
    """Convert a PodGroup of any dialect, chosen by the API group of its apiVersion.
    `network_topology` (the cluster's ClusterNetworkTopology layers, None where none
    exists) resolves Koordinator's network-topology-spec annotation."""
    api_version = raw.get("apiVersion") if isinstance(raw, Mapping) else None
    dialect = POD_GROUP_API_GROUPS.get(
        api_group(api_version if isinstance(api_version, str) else "")
    )
    r = Reader.for_object("PodGroup", raw, namespaced=True)
    if dialect is None:
        groups = ", ".join(POD_GROUP_API_GROUPS)
        r.add("apiVersion", f"{show(api_version)} is not a PodGroup API group; use one of {groups}")
        raise InvalidObject(r.problems)
    ref = GroupRef(dialect=dialect, namespace=r.namespace, name=r.name)
    spec = r.mapping(r.raw.get("spec"), "spec")
    group = PodGroup(
        ref=ref,
        uid=r.string(r.metadata.get("uid"), "metadata.uid"),
        created=r.timestamp(r.metadata.get("creationTimestamp"), "metadata.creationTimestamp")
        or 0.0,
        generation=r.integer(r.metadata.get("generation"), "metadata.generation", minimum=0) or 0,
    )
    if dialect is Dialect.UPSTREAM:
        version = str(api_version).rpartition("/")[2]
        if version not in UPSTREAM_POD_GROUP_VERSIONS:
            r.add(
                "apiVersion",
                f"{show(api_version)} does not serve PodGroups; use scheduling.k8s.io/v1beta1 "
                "(Kubernetes 1.37+), v1alpha3 (1.37+) or v1alpha2 (1.36)",
            )
        _read_upstream(r, spec, group, priorities, version=version)
    elif dialect is Dialect.VOLCANO:
        read_volcano(r, spec, group, priorities)
    else:
        _read_crd(r, spec, group, priorities, dialect=dialect, network=network_topology)
    group.capacity_wait = read_capacity_wait(r, r.metadata)
    read_disruption_annotations(r, group)
    r.done()
    return group


def read_upstream_priority(
    r: Reader, spec: Mapping[str, Any], priorities: PriorityResolver
) -> tuple[str, int, str | None]:
    """(priorityClassName, priority, preemptionPolicy) of a scheduling.k8s.io object
    (PodGroup or CompositePodGroup). Admission gives every one a priority: an explicit
    number wins (its class still gives the preemption policy), else its class, the default
    class, or zero."""
    class_name = r.string(spec.get("priorityClassName"), "spec.priorityClassName")
    explicit = r.integer(
        spec.get("priority"), "spec.priority", minimum=INT32_MIN, maximum=INT32_MAX
    )
    if explicit is not None:
        priority_class = priorities.get(class_name) if class_name else None
    else:
        priority_class = resolve_class(r, class_name, priorities, upstream=True)
    policy = r.choice(
        spec.get("preemptionPolicy"), "spec.preemptionPolicy", PREEMPTION_POLICIES, ""
    )
    return (
        class_name or (priority_class.name if priority_class else ""),
        explicit if explicit is not None else (priority_class.value if priority_class else 0),
        policy or (priority_class.preemption_policy if priority_class else None),
    )


def resolve_class(
    r: Reader, class_name: str, priorities: PriorityResolver, *, upstream: bool
) -> PriorityClass | None:
    """CRD groups take a priority only from a named class; upstream admission always resolves."""
    if not class_name and not upstream:
        return None
    try:
        return priorities.resolve(class_name)
    except UnknownPriorityClass as unknown:
        r.add("spec.priorityClassName", unknown.message)
        return None


def _read_crd(
    r: Reader,
    spec: Mapping[str, Any],
    group: PodGroup,
    priorities: PriorityResolver,
    *,
    dialect: Dialect,
    network: NetworkTopology | None,
) -> None:
    """scheduling.sigs.k8s.io and scheduling.x-k8s.io: the coscheduling CRD shape."""
    min_member = r.integer(spec.get("minMember"), "spec.minMember", minimum=1, maximum=INT32_MAX)
    if spec.get("minMember") is None and dialect is Dialect.SIGS:
        r.add("spec.minMember", "is required")  # our CRD (and the seed's) requires it
    group.min_member = min_member or 1
    group.min_resources = r.resources(spec.get("minResources"), "spec.minResources")
    group.schedule_timeout_seconds = r.integer(
        spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", minimum=1
    )
    annotations = r.string_map(r.metadata.get("annotations"), "metadata.annotations")
    annotated = merge(
        r, read_kai_topology(r, annotations), read_koordinator_topology(r, annotations, network)
    )
    if dialect is not Dialect.SIGS:
        group.topology = annotated
        return
    group.topology = merge(r, read_crd_topology(r, spec), annotated)
    # gangsched's KEP-5710 extension of the sigs CRD, and Koordinator's GangGroup annotation.
    class_name = r.string(spec.get("priorityClassName"), "spec.priorityClassName")
    priority_class = resolve_class(r, class_name, priorities, upstream=False)
    group.priority_class_name = class_name
    if priority_class is not None:
        group.priority = priority_class.value
        group.preemption_policy = priority_class.preemption_policy
    mode = r.string(spec.get("disruptionMode"), "spec.disruptionMode") or "Single"
    if mode in _CRD_DISRUPTION_MODES:
        group.disruption_mode = _CRD_DISRUPTION_MODES[mode]
    else:
        r.add("spec.disruptionMode", f"unknown disruptionMode {show(mode)}; use Single or All")
    # Koordinator's gang annotations on its PodGroups.
    group.gang_group = read_gang_group(r, annotations, group.ref)
    group.match_policy = read_match_policy(r, annotations)
    group.gang_mode = read_mode(r, annotations)
    group.total_number = read_total_number(
        r, annotations, minimum=min_member, minimum_name="spec.minMember"
    )


def _read_upstream(
    r: Reader,
    spec: Mapping[str, Any],
    group: PodGroup,
    priorities: PriorityResolver,
    *,
    version: str,
) -> None:
    """scheduling.k8s.io PodGroup: v1beta1 and v1alpha3 (Kubernetes 1.37+), v1alpha2 (1.36)."""
    policy_field = "spec.schedulingPolicy"
    if spec.get("schedulingPolicy") is None:
        r.add(policy_field, "is required (basic: {} or gang: {minCount: N})")
    policy = r.mapping(spec.get("schedulingPolicy"), policy_field)
    has_basic = policy.get("basic") is not None
    has_gang = policy.get("gang") is not None
    if has_basic and has_gang:
        r.add(policy_field, "must set exactly one of basic and gang, not both")
    elif has_gang:
        gang_field = child(policy_field, "gang")
        gang = r.mapping(policy.get("gang"), gang_field)
        count_field = child(gang_field, "minCount")
        min_count = r.integer(gang.get("minCount"), count_field, minimum=1, maximum=INT32_MAX)
        if gang.get("minCount") is None:
            r.add(count_field, "is required")
        group.min_member = min_count or 1
    elif not has_basic and spec.get("schedulingPolicy") is not None:
        r.add(policy_field, "must set one of basic and gang")
    group.parent = read_parent(r, spec)
    group.disruption_mode = read_disruption_mode(
        r, spec.get("disruptionMode"), v1alpha2=version == "v1alpha2"
    )
    group.topology = read_upstream_topology(r, spec, version=version)

    group.priority_class_name, group.priority, group.preemption_policy = read_upstream_priority(
        r, spec, priorities
    )


def read_parent(r: Reader, spec: Mapping[str, Any]) -> str | None:
    """spec.parentCompositePodGroupName: a CompositePodGroup in the same namespace."""
    field = "spec.parentCompositePodGroupName"
    raw = spec.get(field.rpartition(".")[2])
    if raw is None:
        return None
    name = r.string(raw, field)
    if not name:
        r.add(field, "must not be empty (leave it out for a root)")
        return None
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        r.add(field, f"{show(name)} is not a valid object name (a DNS subdomain)")
        return None
    return name


def read_disruption_mode(r: Reader, raw: Any, *, v1alpha2: bool) -> DisruptionMode:
    """v1alpha2 spelled the mode as a string; v1alpha3 and v1beta1 as a union of empty structs
    with exactly one member set (the API server's declarative validation refuses `{}`)."""
    field = "spec.disruptionMode"
    if raw is None:
        return DisruptionMode.SINGLE
    if v1alpha2:
        if isinstance(raw, str) and raw in _V1ALPHA2_DISRUPTION_MODES:
            return _V1ALPHA2_DISRUPTION_MODES[raw]
        r.add(field, f"unknown disruptionMode {show(raw)}; v1alpha2 uses Pod or PodGroup")
        return DisruptionMode.SINGLE
    hint = "set exactly one of single: {} or all: {}"
    if not isinstance(raw, Mapping):
        extra = " (the v1alpha2 strings Pod and PodGroup are gone since v1alpha3)"
        r.add(
            field,
            f"unknown disruptionMode {show(raw)}; {hint}{extra if isinstance(raw, str) else ''}",
        )
        return DisruptionMode.SINGLE
    chosen = [key for key in raw if raw.get(key) is not None]
    if len(chosen) != 1 or chosen[0] not in _UNION_DISRUPTION_MODES:
        r.add(field, f"unknown disruptionMode {show(dict(raw))}; {hint}")
        return DisruptionMode.SINGLE
    member = chosen[0]
    r.mapping(raw.get(member), child(field, member))  # {single: {}}: an empty struct
    return _UNION_DISRUPTION_MODES[member]
