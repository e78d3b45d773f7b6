"""resource.k8s.io/v1 objects from raw JSON: DeviceClass, ResourceSlice, ResourceClaim,
ResourceClaimTemplate. Every problem of an object is reported at once, naming the field.

Validation follows the API server's where a wrong value would otherwise silently change an
allocation (an unknown allocation mode, a count below one, a request that is neither
`exactly` nor `firstAvailable`); fields the scheduler does not read pass through unchecked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gangsched.core.api._fields import Reader, child, item
from gangsched.core.api.errors import show
from gangsched.core.api.selectors import read_node_selector_term
from gangsched.core.dra.model import (
    POD_CLAIM_NAME_ANNOTATION,
    Allocation,
    AllocationMode,
    AttributeValue,
    ClaimSpec,
    Consumer,
    Device,
    DeviceClass,
    DeviceConfig,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    ExactRequest,
    MatchAttribute,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    Semver,
)
from gangsched.core.labels import NodeSelectorTerm
from gangsched.core.quantity import QuantityError, parse_quantity

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
_MODES = tuple(mode.value for mode in AllocationMode)
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


def parse_semver(text: str) -> Semver | None:
    """Semantic Versioning 2.0.0 (what blang/semver accepts); None if malformed."""
    match = _SEMVER.match(text)
    if match is None:
        return None
    pre: tuple[int | str, ...] = ()
    if match[4]:
        pre = tuple(int(p) if p.isdigit() else p for p in match[4].split("."))
    return Semver(int(match[1]), int(match[2]), int(match[3]), pre)


def qualify(name: str, driver: str) -> str:
    """Attribute and capacity names without a domain belong to the driver's."""
    return name if "/" in name else f"{driver}/{name}"


# -- DeviceClass --------------------------------------------------------------------------------
def device_class_from_raw(raw: Mapping[str, Any]) -> DeviceClass:
    r = Reader.for_object("DeviceClass", raw, namespaced=False)
    spec = r.mapping(r.raw.get("spec"), "spec")
    selectors = _read_selectors(r, spec.get("selectors"), "spec.selectors")
    extended = r.string(spec.get("extendedResourceName"), "spec.extendedResourceName")
    uid = r.string(r.metadata.get("uid"), "metadata.uid")
    config = read_configs(r, spec.get("config"), "spec.config")
    r.done()
    return DeviceClass(
        name=r.name, selectors=selectors, extended_resource_name=extended, uid=uid, config=config
    )


def read_configs(
    r: Reader, raw: Any, field: str, *, known: set[str] | None = None
) -> tuple[DeviceConfig, ...]:
    """`config[{requests, opaque{driver, parameters}}]`; `known`: the claim's request names
    (a class's config names no requests)."""
    out = []
    for index, entry in enumerate(r.items(raw, field)):
        entry_field = item(field, index)
        body = r.mapping(entry, entry_field)
        if body.get("opaque") is None:
            r.add(entry_field, "opaque is required (the only kind of device configuration)")
            continue
        opaque_field = child(entry_field, "opaque")
        opaque = r.mapping(body.get("opaque"), opaque_field)
        driver = r.string(opaque.get("driver"), child(opaque_field, "driver"))
        if not driver:
            r.add(child(opaque_field, "driver"), "is required")
        parameters = opaque.get("parameters")
        if parameters is None:
            r.add(child(opaque_field, "parameters"), "is required")
        requests: tuple[str, ...] = ()
        if known is not None:
            requests = r.strings(body.get("requests"), child(entry_field, "requests"))
            for name in requests:
                if name not in known:
                    r.add(child(entry_field, "requests"), f"unknown request {show(name)}")
        out.append(
            DeviceConfig(
                driver=driver,
                parameters=json.dumps(parameters, sort_keys=True, separators=(",", ":")),
                requests=requests,
            )
        )
    return tuple(out)


def _read_selectors(r: Reader, raw: Any, field: str) -> tuple[str, ...]:
    out = []
    for index, entry in enumerate(r.items(raw, field)):
        entry_field = item(field, index)
        body = r.mapping(entry, entry_field)
        cel = r.mapping(body.get("cel"), child(entry_field, "cel"))
        if body.get("cel") is None:
            r.add(entry_field, "only cel selectors are supported; cel is required")
            continue
        expression = r.string(cel.get("expression"), child(child(entry_field, "cel"), "expression"))
        if not expression.strip():
            r.add(child(child(entry_field, "cel"), "expression"), "is required")
            continue
        out.append(expression)
    return tuple(out)


# -- ResourceSlice ------------------------------------------------------------------------------
def resource_slice_from_raw(raw: Mapping[str, Any]) -> ResourceSlice:
    r = Reader.for_object("ResourceSlice", raw, namespaced=False)
    spec = r.mapping(r.raw.get("spec"), "spec")
    driver = r.string(spec.get("driver"), "spec.driver")
    if not driver:
        r.add("spec.driver", "is required")
    pool = r.mapping(spec.get("pool"), "spec.pool")
    pool_name = r.string(pool.get("name"), "spec.pool.name")
    if not pool_name:
        r.add("spec.pool.name", "is required")
    generation = r.integer(pool.get("generation"), "spec.pool.generation", minimum=0) or 0
    count = r.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", minimum=1)
    if pool.get("resourceSliceCount") is None:
        r.add("spec.pool.resourceSliceCount", "is required (at least 1)")
    node_name = r.string(spec.get("nodeName"), "spec.nodeName") or None
    all_nodes = r.boolean(spec.get("allNodes"), "spec.allNodes")
    per_device = r.boolean(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if spec.get("nodeSelector") is not None:
        selector = r.mapping(spec.get("nodeSelector"), "spec.nodeSelector")
        terms_field = "spec.nodeSelector.nodeSelectorTerms"
        raw_terms = r.items(selector.get("nodeSelectorTerms"), terms_field)
        if len(raw_terms) != 1:
            r.add(terms_field, f"must have exactly one term, got {len(raw_terms)}")
        terms = tuple(
            read_node_selector_term(r, term, item(terms_field, i))
            for i, term in enumerate(raw_terms)
        )
    chosen = [
        name
        for name, present in (
            ("nodeName", node_name is not None),
            ("nodeSelector", terms is not None),
            ("allNodes", all_nodes),
            ("perDeviceNodeSelection", per_device),
        )
        if present
    ]
    unsupported = ""
    if spec.get("sharedCounters"):
        unsupported = "shared counters (partitionable devices) are not supported by gangsched"
    if per_device:
        unsupported = "perDeviceNodeSelection is not supported by gangsched"
    if spec.get("sharedCounters") is None and len(chosen) != 1:
        r.add(
            "spec",
            "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is "
            f"required, got {', '.join(chosen) or 'none'}",
        )
    devices = []
    names: set[str] = set()
    for index, entry in enumerate(r.items(spec.get("devices"), "spec.devices")):
        device = _read_device(r, entry, item("spec.devices", index), driver)
        if device is None:
            continue
        if device.name in names:
            r.add(item("spec.devices", index), f"duplicate device name {show(device.name)}")
            continue
        names.add(device.name)
        devices.append(device)
    r.done()
    return ResourceSlice(
        name=r.name,
        driver=driver,
        pool=pool_name,
        generation=generation,
        slice_count=count or 1,
        node_name=node_name,
        node_selector=terms,
        all_nodes=all_nodes,
        devices=devices,
        unsupported=unsupported,
    )


def _read_device(r: Reader, raw: Any, field: str, driver: str) -> Device | None:
    body = r.mapping(raw, field)
    name = r.string(body.get("name"), child(field, "name"))
    if not name:
        r.add(child(field, "name"), "is required")
        return None
    attributes: dict[str, AttributeValue] = {}
    attrs_field = child(field, "attributes")
    for key, value in r.mapping(body.get("attributes"), attrs_field).items():
        parsed = _read_attribute(r, value, child(attrs_field, str(key)))
        if parsed is not None:
            attributes[qualify(str(key), driver)] = parsed
    capacity = {}
    cap_field = child(field, "capacity")
    for key, value in r.mapping(body.get("capacity"), cap_field).items():
        entry_field = child(cap_field, str(key))
        entry = r.mapping(value, entry_field)
        amount = entry.get("value")
        try:
            if isinstance(amount, bool) or not isinstance(amount, str | int | float):
                raise QuantityError("missing")
            capacity[qualify(str(key), driver)] = parse_quantity(amount)
        except QuantityError:
            r.add(child(entry_field, "value"), f"{show(amount)} is not a valid quantity")
    taints = []
    taints_field = child(field, "taints")
    for index, entry in enumerate(r.items(body.get("taints"), taints_field)):
        taint_field = item(taints_field, index)
        taint = r.mapping(entry, taint_field)
        effect = r.choice(taint.get("effect"), child(taint_field, "effect"), _TAINT_EFFECTS, "")
        if not effect:
            r.add(child(taint_field, "effect"), "is required")
        taints.append(
            DeviceTaint(
                key=r.string(taint.get("key"), child(taint_field, "key")),
                value=r.string(taint.get("value"), child(taint_field, "value")),
                effect=effect,
            )
        )
    unsupported = ""
    if body.get("consumesCounters"):
        unsupported = "consumes shared counters (partitionable devices are not supported)"
    elif body.get("bindingConditions"):
        unsupported = "has binding conditions (not supported)"
    elif body.get("allowMultipleAllocations"):
        unsupported = "allows multiple allocations (consumable capacity is not supported)"
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        taints=tuple(taints),
        unsupported=unsupported,
    )


def _read_attribute(r: Reader, raw: Any, field: str) -> AttributeValue | None:
    body = r.mapping(raw, field)
    present = [key for key in ("bool", "int", "string", "version") if body.get(key) is not None]
    if len(present) != 1:
        r.add(field, "exactly one of bool, int, string, version is required")
        return None
    key = present[0]
    value = body[key]
    if key == "bool":
        return r.boolean(value, child(field, "bool"))
    if key == "int":
        number = r.integer(value, child(field, "int"), minimum=-(2**63), maximum=2**63 - 1)
        return number
    text = r.string(value, child(field, key))
    if key == "string":
        return text
    version = parse_semver(text)
    if version is None:
        r.add(child(field, "version"), f"{show(text)} is not a semantic version (e.g. 1.2.3)")
    return version


# -- claims -------------------------------------------------------------------------------------
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
        selectors=_read_selectors(r, body.get("selectors"), child(field, "selectors")),
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
