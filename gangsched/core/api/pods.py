"""Pods from raw JSON: the requests, constraints, priority and group the scheduler acts on.

Follows what kube-scheduler derives from a pod (pkg/scheduler and component-helpers/resource)
so that a pod gangsched places would also be admitted by the kubelet, and so that simulate
results agree with what the real scheduler would have seen after API defaulting and admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api._fields import INT32_MAX, INT32_MIN, Reader, child, item
from gangsched.core.api.dialects import (
    KOORDINATOR_GANG_NAME,
    LIGHTWEIGHT_GANG_NAME,
    SIGS_POD_GROUP_LABEL,
    X_K8S_POD_GROUP_LABEL,
)
from gangsched.core.api.errors import show
from gangsched.core.api.koordinator import read_annotation_gang
from gangsched.core.api.nodes import TAINT_EFFECTS
from gangsched.core.api.priority import PREEMPTION_POLICIES, PriorityResolver, UnknownPriorityClass
from gangsched.core.api.selectors import read_label_selector, read_node_selector_term
from gangsched.core.api.types import RawPod
from gangsched.core.labels import LabelSelector, NodeSelectorTerm, Requirement
from gangsched.core.model import (
    PREEMPT_LOWER_PRIORITY,
    Dialect,
    GangAnnotations,
    GroupRef,
    HostPort,
    NodeConstraints,
    Pod,
    PodAffinityTerm,
    PodClaim,
    PodVolumeClaim,
    PreferredNodeTerm,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from gangsched.core.resources import CPU, MEMORY, ResourceList, effective_requests, max_each

DEFAULT_SCHEDULER = "default-scheduler"
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
PROTOCOLS = ("TCP", "UDP", "SCTP")
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


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

    requests, host_ports = _read_containers(r, spec, status)
    affinity = r.mapping(spec.get("affinity"), "spec.affinity")
    required_terms, preferred_terms = _read_node_affinity(r, affinity.get("nodeAffinity"))
    node_selector = r.string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    constraints = NodeConstraints(
        node_name=None,  # spec.nodeName means bound (Pod.node_name), not a constraint
        node_selector=tuple(sorted(node_selector.items())),
        required_terms=required_terms,
        preferred_terms=preferred_terms,
        tolerations=_read_tolerations(r, spec.get("tolerations")),
    )
    pod_affinity, preferred_affinity = _read_pod_affinity(
        r, affinity.get("podAffinity"), "spec.affinity.podAffinity", labels
    )
    pod_anti_affinity, preferred_anti_affinity = _read_pod_affinity(
        r, affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity", labels
    )
    spread = _read_spread(r, spec.get("topologySpreadConstraints"), labels)

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
        group=group,
        gang_annotations=gang_annotations,
        owner=owner,
        volume_claims=volume_claims,
        scheduling_gates=gates,
        os_name=os_name,
        unsupported=unsupported,
        claims=claims,
        owner_refs=owner_refs,
    )


def _unsupported(r: Reader, spec: Mapping[str, Any]) -> tuple[str, ...]:
    """What the pod asks for that gangsched cannot honour yet (see plugins/unsupported.py)."""
    found: list[str] = []  # spec.resourceClaims are placed since DRA (gangsched.core.dra)
    return tuple(found)


def _read_scheduling_gates(r: Reader, raw: Any) -> tuple[str, ...]:
    """The names of spec.schedulingGates, in order (each must be set and unique)."""
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


# -- resources and ports ------------------------------------------------------------------------
def _read_requirements(r: Reader, raw: Any, field: str) -> ResourceList:
    """A container's requests, defaulted from its limits as the API server does."""
    resources = r.mapping(raw, field)
    requests = r.resources(resources.get("requests"), child(field, "requests"))
    limits = r.resources(resources.get("limits"), child(field, "limits"))
    for name, limit in limits.items():
        if name not in requests:
            requests[name] = limit
        elif requests[name] > limit:
            r.add(
                child(child(field, "requests"), name),
                f"must be less than or equal to the {name} limit",
            )
    return requests


def _read_ports(r: Reader, raw: Any, field: str, *, host_network: bool) -> list[HostPort]:
    """Host ports the container occupies. With hostNetwork every container port is a host
    port: the API server defaults hostPort to containerPort, which manifests have not been
    through."""
    ports = []
    for index, entry in enumerate(r.items(raw, field)):
        port_field = item(field, index)
        body = r.mapping(entry, port_field)
        host_port = r.integer(
            body.get("hostPort"), child(port_field, "hostPort"), minimum=0, maximum=65535
        )
        protocol = r.choice(body.get("protocol"), child(port_field, "protocol"), PROTOCOLS, "TCP")
        host_ip = r.string(body.get("hostIP"), child(port_field, "hostIP"))
        if host_network and not host_port:
            host_port = r.integer(
                body.get("containerPort"),
                child(port_field, "containerPort"),
                minimum=1,
                maximum=65535,
            )
        if host_port:
            ports.append(HostPort(protocol=protocol, host_ip=host_ip, port=host_port))
    return ports


def _actual_requests(r: Reader, status: Mapping[str, Any], key: str) -> dict[str, ResourceList]:
    """Per container name, what the kubelet reports the container has now: the larger of its
    status resources.requests and allocatedResources (in-place resize, KEP-1287)."""
    out: dict[str, ResourceList] = {}
    base = f"status.{key}"
    for index, entry in enumerate(r.items(status.get(key), base)):
        field = item(base, index)
        body = r.mapping(entry, field)
        name = r.string(body.get("name"), child(field, "name"))
        actual = r.mapping(body.get("resources"), child(field, "resources"))
        requests = r.resources(actual.get("requests"), child(field, "resources.requests"))
        allocated = r.resources(body.get("allocatedResources"), child(field, "allocatedResources"))
        max_each(requests, allocated)
        if name and requests:
            out[name] = requests
    return out


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    """The kubelet cannot apply a resize (condition PodResizePending reason Infeasible, or
    the older status.resize): the spec's requests are not what the node holds."""
    if status.get("resize") == "Infeasible":
        return True
    conditions = status.get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, dict)
        and c.get("type") == "PodResizePending"
        and c.get("reason") == "Infeasible"
        for c in conditions
    )


def _with_actual(
    name: str, requests: ResourceList, actual: dict[str, ResourceList], infeasible: bool
) -> ResourceList:
    """kube-scheduler's request for a container being resized in place: the larger of the
    spec and what it has now, or only what it has now when the resize is infeasible."""
    now = actual.get(name)
    if now is None:
        return requests
    return dict(now) if infeasible else max_each(dict(requests), now)


def _read_containers(
    r: Reader, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[ResourceList, tuple[HostPort, ...]]:
    """The pod's effective requests and the host ports it occupies while running.

    Requests as kube-scheduler computes them (component-helpers PodRequests with status
    resources): containers summed, sidecars (restartable init containers) added and
    counted during init, the init peak, pod-level resources, overhead; a container being
    resized in place counts with the larger of its spec and what it holds now."""
    containers = r.items(spec.get("containers"), "spec.containers")
    actual = _actual_requests(r, status, "containerStatuses")
    actual_init = _actual_requests(r, status, "initContainerStatuses")
    infeasible = _resize_infeasible(status)
    host_network = r.boolean(spec.get("hostNetwork"), "spec.hostNetwork")
    if not containers and r.raw:
        r.add("spec.containers", "at least one container is required")
    steady: list[ResourceList] = []
    ports: list[HostPort] = []
    sidecar_ports: list[HostPort] = []
    for index, entry in enumerate(containers):
        field = item("spec.containers", index)
        body = r.mapping(entry, field)
        requests = _read_requirements(r, body.get("resources"), child(field, "resources"))
        name = r.string(body.get("name"), child(field, "name"))
        steady.append(_with_actual(name, requests, actual, infeasible))
        ports.extend(
            _read_ports(r, body.get("ports"), child(field, "ports"), host_network=host_network)
        )
    init: list[tuple[ResourceList, bool]] = []
    for index, entry in enumerate(r.items(spec.get("initContainers"), "spec.initContainers")):
        field = item("spec.initContainers", index)
        body = r.mapping(entry, field)
        requests = _read_requirements(r, body.get("resources"), child(field, "resources"))
        policy = r.string(body.get("restartPolicy"), child(field, "restartPolicy"))
        sidecar = policy == "Always"
        if sidecar:
            name = r.string(body.get("name"), child(field, "name"))
            requests = _with_actual(name, requests, actual_init, infeasible)
        init.append((requests, sidecar))
        if sidecar:  # only sidecars keep their ports for the pod's lifetime
            sidecar_ports.extend(
                _read_ports(r, body.get("ports"), child(field, "ports"), host_network=host_network)
            )
    overhead = r.resources(spec.get("overhead"), "spec.overhead")
    requests = effective_requests(steady, init)
    # Pod-level resources (PodLevelResources) replace the container sum for cpu, memory and
    # hugepages; overhead still comes on top.
    pod_level = _read_requirements(r, spec.get("resources"), "spec.resources")
    for name, value in pod_level.items():
        if name in (CPU, MEMORY) or name.startswith("hugepages-"):
            requests[name] = value
    for name, value in overhead.items():
        requests[name] = requests.get(name, 0) + value
    requests = {name: value for name, value in requests.items() if value}
    return requests, tuple(sidecar_ports + ports)


# -- node placement -----------------------------------------------------------------------------
def _read_tolerations(r: Reader, raw: Any) -> tuple[Toleration, ...]:
    out = []
    for index, entry in enumerate(r.items(raw, "spec.tolerations")):
        field = item("spec.tolerations", index)
        body = r.mapping(entry, field)
        key = r.string(body.get("key"), child(field, "key"))
        operator = r.string(body.get("operator"), child(field, "operator")) or "Equal"
        value = r.string(body.get("value"), child(field, "value"))
        effect = r.string(body.get("effect"), child(field, "effect"))
        r.integer(body.get("tolerationSeconds"), child(field, "tolerationSeconds"))
        ok = True
        if operator in ("Gt", "Lt"):
            r.add(child(field, "operator"), f"operator {operator} is not supported by gangsched")
            ok = False
        elif operator not in ("Equal", "Exists"):
            r.add(
                child(field, "operator"),
                f"unknown operator {show(operator)}; use Equal or Exists",
            )
            ok = False
        elif operator == "Exists" and value:
            r.add(child(field, "value"), "must be empty when operator is Exists")
            ok = False
        elif not key and operator != "Exists":
            r.add(child(field, "operator"), "must be Exists when key is empty")
            ok = False
        if effect and effect not in TAINT_EFFECTS:
            r.add(
                child(field, "effect"),
                f"unknown effect {show(effect)}; must be one of {', '.join(TAINT_EFFECTS)}",
            )
            ok = False
        if ok:
            out.append(Toleration(key=key, operator=operator, value=value, effect=effect))
    return tuple(out)


def _read_node_affinity(
    r: Reader, raw: Any
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredNodeTerm, ...]]:
    base = "spec.affinity.nodeAffinity"
    body = r.mapping(raw, base)
    required: tuple[NodeSelectorTerm, ...] | None = None
    if body.get(_REQUIRED) is not None:
        field = child(base, _REQUIRED)
        selector = r.mapping(body.get(_REQUIRED), field)
        terms_field = child(field, "nodeSelectorTerms")
        raw_terms = r.items(selector.get("nodeSelectorTerms"), terms_field)
        if not raw_terms:
            r.add(terms_field, "must have at least one term")
        required = tuple(
            read_node_selector_term(r, term, item(terms_field, index))
            for index, term in enumerate(raw_terms)
        )
    preferred = []
    field = child(base, _PREFERRED)
    for index, entry in enumerate(r.items(body.get(_PREFERRED), field)):
        entry_field = item(field, index)
        weighted = r.mapping(entry, entry_field)
        weight = r.integer(
            weighted.get("weight"), child(entry_field, "weight"), minimum=1, maximum=100
        )
        if weighted.get("weight") is None:
            r.add(child(entry_field, "weight"), "is required (1-100)")
        term = read_node_selector_term(
            r, weighted.get("preference"), child(entry_field, "preference")
        )
        if weight is not None:
            preferred.append(PreferredNodeTerm(weight=weight, term=term))
    return required, tuple(preferred)


# -- pod (anti-)affinity and spreading ----------------------------------------------------------
def _merge_label_keys(
    selector: LabelSelector,
    labels: Mapping[str, str],
    match_keys: tuple[str, ...],
    mismatch_keys: tuple[str, ...] = (),
) -> LabelSelector:
    """Fold matchLabelKeys/mismatchLabelKeys into the selector with the pod's own values.

    The API server does this at pod creation for affinity (and the scheduler for spreading);
    manifests never went through either. Keys the pod lacks are ignored, as upstream does.
    """
    extra = [Requirement(key, "In", (labels[key],)) for key in match_keys if key in labels]
    extra += [Requirement(key, "NotIn", (labels[key],)) for key in mismatch_keys if key in labels]
    new = tuple(req for req in extra if req not in selector.match_expressions)
    if not new:
        return selector
    return LabelSelector(
        match_labels=selector.match_labels,
        match_expressions=selector.match_expressions + new,
    )


def _read_pod_affinity(
    r: Reader, raw: Any, base: str, labels: Mapping[str, str]
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    """Required terms (filter) and weighted preferred terms (score) of podAffinity or
    podAntiAffinity."""
    body = r.mapping(raw, base)
    field = child(base, _REQUIRED)
    required = tuple(
        _read_affinity_term(r, entry, item(field, index), labels)
        for index, entry in enumerate(r.items(body.get(_REQUIRED), field))
    )
    field = child(base, _PREFERRED)
    preferred = []
    for index, entry in enumerate(r.items(body.get(_PREFERRED), field)):
        entry_field = item(field, index)
        weighted = r.mapping(entry, entry_field)
        weight = r.integer(
            weighted.get("weight"), child(entry_field, "weight"), minimum=1, maximum=100
        )
        if weighted.get("weight") is None:
            r.add(child(entry_field, "weight"), "is required")
        if weighted.get("podAffinityTerm") is None:
            r.add(child(entry_field, "podAffinityTerm"), "is required")
        term = _read_affinity_term(
            r, weighted.get("podAffinityTerm"), child(entry_field, "podAffinityTerm"), labels
        )
        preferred.append(WeightedPodAffinityTerm(weight=weight or 1, term=term))
    return required, tuple(preferred)


def _read_affinity_term(
    r: Reader, raw: Any, term_field: str, labels: Mapping[str, str]
) -> PodAffinityTerm:
    term = r.mapping(raw, term_field)
    selector = read_label_selector(r, term.get("labelSelector"), child(term_field, "labelSelector"))
    match_keys = r.strings(term.get("matchLabelKeys"), child(term_field, "matchLabelKeys"))
    mismatch_keys = r.strings(term.get("mismatchLabelKeys"), child(term_field, "mismatchLabelKeys"))
    if selector is not None:
        selector = _merge_label_keys(selector, labels, match_keys, mismatch_keys)
    topology_key = r.string(term.get("topologyKey"), child(term_field, "topologyKey"))
    if not topology_key:
        r.add(child(term_field, "topologyKey"), "is required")
    namespaces = r.strings(term.get("namespaces"), child(term_field, "namespaces"))
    namespace_selector = read_label_selector(
        r, term.get("namespaceSelector"), child(term_field, "namespaceSelector")
    )
    return PodAffinityTerm(
        selector=selector,
        topology_key=topology_key,
        namespaces=frozenset(namespaces),
        namespace_selector=namespace_selector,
    )


def _read_spread(
    r: Reader, raw: Any, labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    base = "spec.topologySpreadConstraints"
    out = []
    for index, entry in enumerate(r.items(raw, base)):
        field = item(base, index)
        body = r.mapping(entry, field)
        max_skew = r.integer(body.get("maxSkew"), child(field, "maxSkew"), minimum=1)
        if body.get("maxSkew") is None:
            r.add(child(field, "maxSkew"), "is required")
        topology_key = r.string(body.get("topologyKey"), child(field, "topologyKey"))
        if not topology_key:
            r.add(child(field, "topologyKey"), "is required")
        when_field = child(field, "whenUnsatisfiable")
        when = r.string(body.get("whenUnsatisfiable"), when_field)
        if not when:
            r.add(when_field, "is required (DoNotSchedule or ScheduleAnyway)")
        elif when not in ("DoNotSchedule", "ScheduleAnyway"):
            r.add(when_field, f"unknown value {show(when)}; use DoNotSchedule or ScheduleAnyway")
        selector = read_label_selector(r, body.get("labelSelector"), child(field, "labelSelector"))
        match_keys = r.strings(body.get("matchLabelKeys"), child(field, "matchLabelKeys"))
        if selector is not None:
            selector = _merge_label_keys(selector, labels, match_keys)
        min_domains = r.integer(body.get("minDomains"), child(field, "minDomains"), minimum=1)
        if min_domains is not None and when == "ScheduleAnyway":
            r.add(
                child(field, "minDomains"), "may only be set with whenUnsatisfiable DoNotSchedule"
            )
        affinity_policy = r.choice(
            body.get("nodeAffinityPolicy"),
            child(field, "nodeAffinityPolicy"),
            ("Honor", "Ignore"),
            "Honor",
        )
        taints_policy = r.choice(
            body.get("nodeTaintsPolicy"),
            child(field, "nodeTaintsPolicy"),
            ("Honor", "Ignore"),
            "Ignore",
        )
        if max_skew is None or not topology_key or when not in ("DoNotSchedule", "ScheduleAnyway"):
            continue
        out.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=topology_key,
                when_unsatisfiable=when,
                selector=selector,
                min_domains=min_domains or 1,
                honor_node_affinity=affinity_policy == "Honor",
                honor_node_taints=taints_policy == "Honor",
            )
        )
    return tuple(out)


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
    (both annotation gangs); the x-k8s label before the annotation.
    """
    scheduling_group = r.mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
    upstream = r.string(scheduling_group.get("podGroupName"), "spec.schedulingGroup.podGroupName")
    candidates = (
        (Dialect.UPSTREAM, upstream),
        (Dialect.SIGS, labels.get(SIGS_POD_GROUP_LABEL, "")),
        (Dialect.KOORDINATOR, labels.get(LIGHTWEIGHT_GANG_NAME, "")),
        (Dialect.X_K8S, labels.get(X_K8S_POD_GROUP_LABEL, "")),
        (Dialect.KOORDINATOR, annotations.get(KOORDINATOR_GANG_NAME, "")),
    )
    for dialect, name in candidates:
        if not name:
            continue
        ref = GroupRef(dialect=dialect, namespace=r.namespace, name=name)
        if dialect is not Dialect.KOORDINATOR:
            return ref, None
        return ref, read_annotation_gang(r, labels, annotations, ref)
    return None, None
