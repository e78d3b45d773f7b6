"""resource.k8s.io/v1 ResourceSlice from raw JSON: a driver's pool of devices on a node (or
nodes), with their attributes, capacities and taints. Every problem of an object is reported
at once, naming the field.

Slices and devices that need a feature gangsched does not support (shared counters,
per-device node selection, binding conditions, multiple allocations) are kept, marked
`unsupported` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.api.selectors import read_node_selector_term
from gangsched.core.dra.model import AttributeValue, Device, DeviceTaint, ResourceSlice
from gangsched.core.dra.semver import parse_semver
from gangsched.core.labels import NodeSelectorTerm
from gangsched.core.quantity import QuantityError, parse_quantity

_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


def qualify(name: str, driver: str) -> str:
    """Attribute and capacity names without a domain belong to the driver's."""
    return name if "/" in name else f"{driver}/{name}"


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
