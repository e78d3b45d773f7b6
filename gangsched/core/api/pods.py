"""Pods from raw JSON: the requests, constraints, priority and group the scheduler acts on.

Follows what kube-scheduler derives from a pod (pkg/scheduler and component-helpers/resource)
so that a pod gangsched places would also be admitted by the kubelet, and so that simulate
results agree with what the real scheduler would have seen after API defaulting and admission.
Requests and host ports are read in pod_resources, placement constraints in pod_placement;
this module puts them together with identity, priority, group, volumes and claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api.capacity_wait import read_unschedulable_since
from gangsched.core.api.dialects import (
    KOORDINATOR_GANG_NAME,
    LIGHTWEIGHT_GANG_NAME,
    SIGS_POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATIONS,
    VOLCANO_TASK_ANNOTATION,
    X_K8S_POD_GROUP_LABEL,
)
from gangsched.core.api.errors import show
from gangsched.core.api.fields import INT32_MAX, INT32_MIN, Reader, child, item
from gangsched.core.api.koordinator import read_annotation_gang
from gangsched.core.api.pod_placement import (
    read_node_affinity,
    read_pod_affinity,
    read_spread,
    read_tolerations,
)
from gangsched.core.api.pod_resources import read_containers
from gangsched.core.api.priority import PREEMPTION_POLICIES, PriorityResolver, UnknownPriorityClass
from gangsched.core.api.types import RawPod
from gangsched.core.model import (
    PREEMPT_LOWER_PRIORITY,
    Dialect,
    GangAnnotations,
    GroupRef,
    NodeConstraints,
    Pod,
    PodClaim,
    PodVolumeClaim,
)

DEFAULT_SCHEDULER = "default-scheduler"
#: Where a pod names its group after spec.schedulingGroup, in order of precedence:
#: (dialect, whether it is a label (else an annotation), key). See _read_group.
_GROUP_SOURCES = (
    (Dialect.SIGS, True, SIGS_POD_GROUP_LABEL),
    (Dialect.KOORDINATOR, True, LIGHTWEIGHT_GANG_NAME),
    (Dialect.X_K8S, True, X_K8S_POD_GROUP_LABEL),
    (Dialect.KOORDINATOR, False, KOORDINATOR_GANG_NAME),
    *((Dialect.VOLCANO, False, key) for key in VOLCANO_GROUP_ANNOTATIONS),
)
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def pod_from_raw(raw: RawPod | dict[str, Any], *, priorities: PriorityResolver) -> Pod:
    """Convert a pod; `priorities` resolves class names the way the Priority admission does."""
    r = Reader.for_object("Pod", raw, namespaced=True)
    meta = r.metadata
    spec = r.mapping(r.raw.get("spec"), "spec")
    status = r.mapping(r.raw.get("status"), "status")
    labels = r.string_map(meta.get("labels"), "metadata.labels")
    annotations = r.string_map(meta.get("annotations"), "metadata.annotations")
    uid = r.string(meta.get("uid"), "metadata.uid")
    created = r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    deleted = r.timestamp(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")

    requests, host_ports = read_containers(r, spec, status)
    affinity = r.mapping(spec.get("affinity"), "spec.affinity")
    required_terms, preferred_terms = read_node_affinity(r, affinity.get("nodeAffinity"))
    node_selector = r.string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    constraints = NodeConstraints(
        node_name=None,  # spec.nodeName means bound (Pod.node_name), not a constraint
        node_selector=tuple(sorted(node_selector.items())),
        required_terms=required_terms,
        preferred_terms=preferred_terms,
        tolerations=read_tolerations(r, spec.get("tolerations")),
    )
    pod_affinity, preferred_affinity = read_pod_affinity(
        r, affinity.get("podAffinity"), "spec.affinity.podAffinity", labels
    )
    pod_anti_affinity, preferred_anti_affinity = read_pod_affinity(
        r, affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity", labels
    )
    spread = read_spread(r, spec.get("topologySpreadConstraints"), labels)

    priority, class_name, policy = _read_priority(r, spec, priorities)
    group, gang_annotations = _read_group(r, spec, labels, annotations)
    phase = r.choice(status.get("phase"), "status.phase", POD_PHASES, "Pending")
    node_name = r.string(spec.get("nodeName"), "spec.nodeName") or None
    nominated = r.string(status.get("nominatedNodeName"), "status.nominatedNodeName") or None
    scheduler = r.string(spec.get("schedulerName"), "spec.schedulerName") or DEFAULT_SCHEDULER
    owner = _controller_owner(meta.get("ownerReferences"), r.namespace)
    volume_claims = _read_volume_claims(r, spec.get("volumes"))
    gates = _read_scheduling_gates(r, spec.get("schedulingGates"))
    os_body = r.mapping(spec.get("os"), "spec.os")
    os_name = r.string(os_body.get("name"), "spec.os.name")
    if spec.get("os") is not None and os_name not in ("linux", "windows"):
        r.add("spec.os.name", f"must be linux or windows, got {show(os_name)}")
    if gates and node_name:
        # The API server refuses this combination at creation (KEP-3521).
        r.add("spec.nodeName", "cannot be set until all schedulingGates have been cleared")
    unsupported = _unsupported(r, spec)
    claims = _read_resource_claims(r, spec, status)
    owner_refs = _owner_refs(meta.get("ownerReferences"), r.namespace)
    unschedulable_since = read_unschedulable_since(r, status)
    r.done()
    return Pod(
        namespace=r.namespace,
        name=r.name,
        uid=uid,
        labels=labels,
        scheduler_name=scheduler,
        node_name=node_name,
        nominated_node_name=nominated,
        phase=phase,
        priority=priority,
        priority_class_name=class_name,
        preemption_policy=policy,
        requests=requests,
        constraints=constraints,
        host_ports=host_ports,
        affinity=pod_affinity,
        anti_affinity=pod_anti_affinity,
        preferred_affinity=preferred_affinity,
        preferred_anti_affinity=preferred_anti_affinity,
        spread=spread,
        created=created or 0.0,
        terminating=deleted is not None or meta.get("deletionTimestamp") is not None,
        deleting_at=deleted,
        group=group,
        gang_annotations=gang_annotations,
        owner=owner,
        volume_claims=volume_claims,
        scheduling_gates=gates,
        os_name=os_name,
        unsupported=unsupported,
        claims=claims,
        owner_refs=owner_refs,
        task=annotations.get(VOLCANO_TASK_ANNOTATION, ""),
        unschedulable_since=unschedulable_since,
    )


def _unsupported(r: Reader, spec: Mapping[str, Any]) -> tuple[str, ...]:
    """What the pod asks for that gangsched cannot honour yet (see plugins/unsupported.py)."""
    found: list[str] = []  # spec.resourceClaims are placed since DRA (gangsched.core.dra)
    return tuple(found)


def _read_scheduling_gates(r: Reader, raw: Any) -> tuple[str, ...]:
    """The names of spec.schedulingGates, in order (each must be set and unique)."""
    if raw is None:
        return ()
    names: list[str] = []
    for index, entry in enumerate(r.items(raw, "spec.schedulingGates")):
        field = item("spec.schedulingGates", index)
        body = r.mapping(entry, field)
        name = r.string(body.get("name"), child(field, "name"))
        if not name:
            r.add(child(field, "name"), "is required")
        elif name in names:
            r.add(child(field, "name"), f"duplicate gate {show(name)}")
        else:
            names.append(name)
    return tuple(names)


def _controller_owner(refs: Any, namespace: str) -> str:
    """The controlling owner as "namespace/name" (what PodGroup status.occupiedBy shows)."""
    if not isinstance(refs, list):
        return ""
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") and ref.get("name"):
            return f"{namespace}/{ref['name']}"
    return ""


def _read_volume_claims(r: Reader, raw: Any) -> tuple[PodVolumeClaim, ...]:
    """The pod's volumes that need a PersistentVolumeClaim. Other volume types (emptyDir,
    configMap, ...) do not constrain placement and are not read."""
    if raw is None:
        return ()
    out = []
    for index, entry in enumerate(r.items(raw, "spec.volumes")):
        field = item("spec.volumes", index)
        body = r.mapping(entry, field)
        name = r.string(body.get("name"), child(field, "name"))
        claim_body = body.get("persistentVolumeClaim")
        if claim_body is not None:
            claim_field = child(field, "persistentVolumeClaim")
            source = r.mapping(claim_body, claim_field)
            claim = r.string(source.get("claimName"), child(claim_field, "claimName"))
            read_only = r.boolean(source.get("readOnly"), child(claim_field, "readOnly"))
            if not claim:
                r.add(child(claim_field, "claimName"), "is required")
            else:
                out.append(PodVolumeClaim(volume=name, claim=claim, read_only=read_only))
        elif body.get("ephemeral") is not None:
            r.mapping(body.get("ephemeral"), child(field, "ephemeral"))
            if not name:
                r.add(child(field, "name"), "is required for an ephemeral volume")
            else:
                out.append(PodVolumeClaim(volume=name, claim=f"{r.name}-{name}", ephemeral=True))
    return tuple(out)


# -- dynamic resource allocation ----------------------------------------------------------------
def _read_resource_claims(
    r: Reader, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[PodClaim, ...]:
    """spec.resourceClaims, with the generated names from status.resourceClaimStatuses."""
    if spec.get("resourceClaims") is None and status.get("resourceClaimStatuses") is None:
        return ()  # most pods: nothing to read or check
    generated: dict[str, str] = {}
    status_field = "status.resourceClaimStatuses"
    for index, entry in enumerate(r.items(status.get("resourceClaimStatuses"), status_field)):
        entry_field = item(status_field, index)
        body = r.mapping(entry, entry_field)
        name = r.string(body.get("name"), child(entry_field, "name"))
        generated[name] = r.string(
            body.get("resourceClaimName"), child(entry_field, "resourceClaimName")
        )
    claims = []
    seen: set[str] = set()
    field = "spec.resourceClaims"
    for index, entry in enumerate(r.items(spec.get("resourceClaims"), field)):
        entry_field = item(field, index)
        body = r.mapping(entry, entry_field)
        name = r.string(body.get("name"), child(entry_field, "name"))
        claim_name = r.string(
            body.get("resourceClaimName"), child(entry_field, "resourceClaimName")
        )
        template = r.string(
            body.get("resourceClaimTemplateName"), child(entry_field, "resourceClaimTemplateName")
        )
        if not name:
            r.add(child(entry_field, "name"), "is required")
            continue
        if name in seen:
            r.add(child(entry_field, "name"), f"duplicate resource claim name {show(name)}")
            continue
        seen.add(name)
        if bool(claim_name) == bool(template):
            r.add(
                entry_field,
                "exactly one of resourceClaimName, resourceClaimTemplateName is required",
            )
            continue
        claims.append(
            PodClaim(
                name=name,
                claim_name=claim_name,
                template_name=template,
                generated_name=generated.get(name) if template else None,
            )
        )
    return tuple(claims)


def _owner_refs(refs: Any, namespace: str) -> tuple[str, ...]:
    if not isinstance(refs, list):
        return ()
    names = (ref.get("name") for ref in refs if isinstance(ref, dict))
    return tuple(f"{namespace}/{name}" for name in names if isinstance(name, str) and name)


# -- priority and group -------------------------------------------------------------------------
def _read_priority(
    r: Reader, spec: Mapping[str, Any], priorities: PriorityResolver
) -> tuple[int, str, str]:
    """(priority, class name, preemption policy) after Priority admission.

    An explicit spec.priority wins: admission already resolved it on the live cluster, and
    the class may have been deleted since. Only without it is an unknown class an error.
    """
    class_name = r.string(spec.get("priorityClassName"), "spec.priorityClassName")
    explicit = r.integer(
        spec.get("priority"), "spec.priority", minimum=INT32_MIN, maximum=INT32_MAX
    )
    try:
        priority_class = priorities.resolve(class_name)
    except UnknownPriorityClass as unknown:
        priority_class = None
        if spec.get("priority") is None:
            r.add("spec.priorityClassName", unknown.message)
    if explicit is not None:
        priority = explicit
    else:
        priority = priority_class.value if priority_class else 0
        if not class_name and priority_class is not None:
            class_name = priority_class.name  # admission records the default it applied
    policy_field = "spec.preemptionPolicy"
    policy = r.choice(spec.get("preemptionPolicy"), policy_field, PREEMPTION_POLICIES, "")
    if not policy:
        policy = priority_class.preemption_policy if priority_class else PREEMPT_LOWER_PRIORITY
    return priority, class_name, policy


def _read_group(
    r: Reader,
    spec: Mapping[str, Any],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> tuple[GroupRef | None, GangAnnotations | None]:
    """Which PodGroup the pod belongs to, in order of precedence.

    The upstream field is authoritative where it is set; then Koordinator's order: the sigs
    label (a PodGroup object), the lightweight-coscheduling name label, the gang annotation
    (both annotation gangs); the x-k8s label before the annotation; Volcano's annotations
    last (Volcano reads nothing else, and no other scheduler reads them).
    """
    scheduling_group = r.mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
    upstream = r.string(scheduling_group.get("podGroupName"), "spec.schedulingGroup.podGroupName")
    if upstream:
        return GroupRef(dialect=Dialect.UPSTREAM, namespace=r.namespace, name=upstream), None
    for dialect, in_labels, key in _GROUP_SOURCES:
        name = (labels if in_labels else annotations).get(key, "")
        if not name:
            continue
        ref = GroupRef(dialect=dialect, namespace=r.namespace, name=name)
        if dialect is not Dialect.KOORDINATOR:
            return ref, None
        return ref, read_annotation_gang(r, labels, annotations, ref)
    return None, None
