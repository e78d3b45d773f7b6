"""resource.k8s.io/v1 DeviceClass from raw JSON, and the two parts of it a claim's requests
repeat: CEL selectors and opaque device configuration (parse_claims.py reads those with the
functions here). Every problem of an object is reported at once, naming the field.

The DRA readers are one module per object family (classes, slices, claims), each small
enough to read whole: claims reuse the readers here, slices need only semver.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.dra.model import DeviceClass, DeviceConfig


def device_class_from_raw(raw: Mapping[str, Any]) -> DeviceClass:
    r = Reader.for_object("DeviceClass", raw, namespaced=False)
    spec = r.mapping(r.raw.get("spec"), "spec")
    selectors = read_selectors(r, spec.get("selectors"), "spec.selectors")
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


def read_selectors(r: Reader, raw: Any, field: str) -> tuple[str, ...]:
    """`selectors[{cel{expression}}]`: the expressions, in order."""
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
