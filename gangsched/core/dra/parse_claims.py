"""resource.k8s.io/v1 ResourceClaim and ResourceClaimTemplate from raw JSON, and the claim
the resourceclaim controller generates from a template for a pod. Every problem of an object
is reported at once, naming the field.

Validation follows the API server's where a wrong value would otherwise silently change an
allocation (an unknown allocation mode, a count below one, a request that is neither
`exactly` nor `firstAvailable`); fields the scheduler does not read pass through unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.api.selectors import read_node_selector_term
from gangsched.core.dra.model import (
    POD_CLAIM_NAME_ANNOTATION,
    Allocation,
    AllocationMode,
    ClaimSpec,
    Consumer,
    DeviceRequest,
    DeviceResult,
    DeviceToleration,
    ExactRequest,
    MatchAttribute,
    ResourceClaim,
    ResourceClaimTemplate,
)
from gangsched.core.dra.parse_classes import read_configs, read_selectors
from gangsched.core.labels import NodeSelectorTerm

_MODES = tuple(mode.value for mode in AllocationMode)


def read_claim_spec(r: Reader, raw: Any, field: str) -> ClaimSpec:
    spec = r.mapping(raw, field)
    devices_field = child(field, "devices")
    devices = r.mapping(spec.get("devices"), devices_field)
    requests_field = child(devices_field, "requests")
    requests = []
    names: set[str] = set()
    for index, entry in enumerate(r.items(devices.get("requests"), requests_field)):
        request = _read_request(r, entry, item(requests_field, index))
        if request is None:
            continue
        if request.name in names:
            r.add(item(requests_field, index), f"duplicate request name {show(request.name)}")
            continue
        names.add(request.name)
        requests.append(request)
    constraints = []
    constraints_field = child(devices_field, "constraints")
    for index, entry in enumerate(r.items(devices.get("constraints"), constraints_field)):
        entry_field = item(constraints_field, index)
        body = r.mapping(entry, entry_field)
        attribute = r.string(body.get("matchAttribute"), child(entry_field, "matchAttribute"))
        if not attribute:
            r.add(child(entry_field, "matchAttribute"), "is required (the only constraint kind)")
            continue
        if "/" not in attribute:
            r.add(
                child(entry_field, "matchAttribute"),
                f"{show(attribute)} must be a fully qualified name (<domain>/<name>)",
            )
            continue
        scope = r.strings(body.get("requests"), child(entry_field, "requests"))
        known = names | {
            f"{req.name}/{sub.name}" for req in requests for sub in req.first_available
        }
        for name in scope:
            if name not in known:
                r.add(child(entry_field, "requests"), f"unknown request {show(name)}")
        constraints.append(MatchAttribute(attribute=attribute, requests=scope))
    known = {req.name for req in requests} | {
        f"{req.name}/{sub.name}" for req in requests for sub in req.first_available
    }
    config = read_configs(r, devices.get("config"), child(devices_field, "config"), known=known)
    return ClaimSpec(requests=tuple(requests), constraints=tuple(constraints), config=config)


def _read_request(r: Reader, raw: Any, field: str) -> DeviceRequest | None:
    body = r.mapping(raw, field)
    name = r.string(body.get("name"), child(field, "name"))
    if not name:
        r.add(child(field, "name"), "is required")
        return None
    has_exactly = body.get("exactly") is not None
    has_first = body.get("firstAvailable") is not None
    if has_exactly == has_first:
        r.add(field, "exactly one of exactly, firstAvailable is required")
        return None
    if has_exactly:
        exact = _read_exact(r, body.get("exactly"), child(field, "exactly"), name)
        return None if exact is None else DeviceRequest(name=name, exactly=exact)
    alternatives = []
    first_field = child(field, "firstAvailable")
    entries = r.items(body.get("firstAvailable"), first_field)
    if not entries:
        r.add(first_field, "must have at least one entry")
    for index, entry in enumerate(entries):
        entry_field = item(first_field, index)
        sub_name = r.string(r.mapping(entry, entry_field).get("name"), child(entry_field, "name"))
        if not sub_name:
            r.add(child(entry_field, "name"), "is required")
            continue
        sub = _read_exact(r, entry, entry_field, sub_name)
        if sub is not None:
            alternatives.append(sub)
    return DeviceRequest(name=name, first_available=tuple(alternatives))


def _read_exact(r: Reader, raw: Any, field: str, name: str) -> ExactRequest | None:
    body = r.mapping(raw, field)
    class_name = r.string(body.get("deviceClassName"), child(field, "deviceClassName"))
    if not class_name:
        r.add(child(field, "deviceClassName"), "is required")
    mode_text = r.choice(
        body.get("allocationMode"), child(field, "allocationMode"), _MODES, "ExactCount"
    )
    mode = AllocationMode(mode_text)
    count = r.integer(body.get("count"), child(field, "count"), minimum=1)
    if mode is AllocationMode.ALL and body.get("count") is not None:
        r.add(child(field, "count"), "must not be set with allocationMode All")
    tolerations = []
    tol_field = child(field, "tolerations")
    for index, entry in enumerate(r.items(body.get("tolerations"), tol_field)):
        entry_field = item(tol_field, index)
        tol = r.mapping(entry, entry_field)
        operator = r.choice(
            tol.get("operator"), child(entry_field, "operator"), ("Equal", "Exists"), "Equal"
        )
        tolerations.append(
            DeviceToleration(
                key=r.string(tol.get("key"), child(entry_field, "key")),
                operator=operator,
                value=r.string(tol.get("value"), child(entry_field, "value")),
                effect=r.string(tol.get("effect"), child(entry_field, "effect")),
            )
        )
    if body.get("capacity") is not None:
        r.add(child(field, "capacity"), "capacity requests (consumable capacity) are not supported")
    if not class_name:
        return None
    return ExactRequest(
        name=name,
        class_name=class_name,
        selectors=read_selectors(r, body.get("selectors"), child(field, "selectors")),
        mode=mode,
        count=count if count is not None and mode is AllocationMode.EXACT_COUNT else 1,
        admin_access=r.boolean(body.get("adminAccess"), child(field, "adminAccess")),
        tolerations=tuple(tolerations),
    )


def _read_allocation(r: Reader, raw: Any, field: str) -> Allocation | None:
    if raw is None:
        return None
    body = r.mapping(raw, field)
    devices = r.mapping(body.get("devices"), child(field, "devices"))
    results_field = child(child(field, "devices"), "results")
    results = []
    for index, entry in enumerate(r.items(devices.get("results"), results_field)):
        entry_field = item(results_field, index)
        result = r.mapping(entry, entry_field)
        values = {
            key: r.string(result.get(key), child(entry_field, key))
            for key in ("request", "driver", "pool", "device")
        }
        results.append(
            DeviceResult(
                request=values["request"],
                driver=values["driver"],
                pool=values["pool"],
                device=values["device"],
                admin_access=r.boolean(
                    result.get("adminAccess"), child(entry_field, "adminAccess")
                ),
            )
        )
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if body.get("nodeSelector") is not None:
        selector = r.mapping(body.get("nodeSelector"), child(field, "nodeSelector"))
        terms_field = child(child(field, "nodeSelector"), "nodeSelectorTerms")
        terms = tuple(
            read_node_selector_term(r, term, item(terms_field, i))
            for i, term in enumerate(r.items(selector.get("nodeSelectorTerms"), terms_field))
        )
    return Allocation(results=tuple(results), node_selector=terms)


def resource_claim_from_raw(raw: Mapping[str, Any]) -> ResourceClaim:
    r = Reader.for_object("ResourceClaim", raw, namespaced=True)
    meta = r.metadata
    spec = read_claim_spec(r, r.raw.get("spec"), "spec")
    status = r.mapping(r.raw.get("status"), "status")
    allocation = _read_allocation(r, status.get("allocation"), "status.allocation")
    consumers = []
    for index, entry in enumerate(r.items(status.get("reservedFor"), "status.reservedFor")):
        entry_field = item("status.reservedFor", index)
        body = r.mapping(entry, entry_field)
        consumers.append(
            Consumer(
                resource=r.string(body.get("resource"), child(entry_field, "resource")),
                name=r.string(body.get("name"), child(entry_field, "name")),
                uid=r.string(body.get("uid"), child(entry_field, "uid")),
                api_group=r.string(body.get("apiGroup"), child(entry_field, "apiGroup")),
            )
        )
    owner = ""
    refs = meta.get("ownerReferences")
    if isinstance(refs, list):
        for ref in refs:
            if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") == "Pod":
                owner = str(ref.get("uid") or "")
    finalizers = r.strings(meta.get("finalizers"), "metadata.finalizers")
    uid = r.string(meta.get("uid"), "metadata.uid")
    version = r.string(meta.get("resourceVersion"), "metadata.resourceVersion")
    r.done()
    return ResourceClaim(
        namespace=r.namespace,
        name=r.name,
        uid=uid,
        spec=spec,
        allocation=allocation,
        reserved_for=tuple(consumers),
        deleting=meta.get("deletionTimestamp") is not None,
        finalizers=finalizers,
        owner_pod_uid=owner,
        resource_version=version,
    )


def resource_claim_template_from_raw(raw: Mapping[str, Any]) -> ResourceClaimTemplate:
    r = Reader.for_object("ResourceClaimTemplate", raw, namespaced=True)
    template = r.mapping(r.raw.get("spec"), "spec")
    spec = read_claim_spec(r, template.get("spec"), "spec.spec")
    r.done()
    return ResourceClaimTemplate(namespace=r.namespace, name=r.name, spec=spec)


def generated_claim_raw(
    template: Mapping[str, Any], *, pod: Mapping[str, Any], pod_claim: str
) -> dict[str, Any]:
    """The claim kube-controller-manager's resourceclaim controller makes for a pod from a
    template (simulate plays that controller): named `<pod>-<pod claim>`, owned by the pod,
    annotated with the pod's claim name, the template's spec."""
    pod_meta = pod.get("metadata") or {}
    template_spec = template.get("spec") or {}
    meta = dict(template_spec.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            **meta,
            "name": f"{pod_meta.get('name', '')}-{pod_claim}",
            "namespace": pod_meta.get("namespace") or "default",
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_meta.get("name", ""),
                    "uid": pod_meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template_spec.get("spec") or {},
    }
