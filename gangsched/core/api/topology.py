"""Topology constraints of PodGroups, from every dialect into one `TopologyRequest`.

Before issue 14 gangsched read upstream PodGroups but dropped `spec.schedulingConstraints`,
so a gang that asked for one rack silently got two. Every spelling is read here and refused
with the field named when it is malformed, as the API server would refuse it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.topology.request import TopologyRequest, label_key_problem

KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
_CONSTRAINTS = "spec.schedulingConstraints"


def _key(r: Reader, value: Any, field: str) -> str | None:
    key = r.string(value, field)
    if value is None:
        r.add(field, "is required")
        return None
    problem = label_key_problem(key)
    if problem is not None:
        r.add(field, problem)
        return None
    return key


def read_upstream_topology(
    r: Reader, spec: Mapping[str, Any], *, version: str
) -> TopologyRequest | None:
    """`spec.schedulingConstraints.topology[0].key` (v1beta1, v1alpha3, v1alpha2); v1alpha2
    once spelled it `topologyConstraints[0].topologyKey`. At most one entry, as the API."""
    raw = spec.get("schedulingConstraints")
    if raw is None:
        return None
    constraints = r.mapping(raw, _CONSTRAINTS)
    list_name, key_name = "topology", "key"
    if constraints.get("topology") is None and constraints.get("topologyConstraints") is not None:
        if version != "v1alpha2":
            r.add(
                child(_CONSTRAINTS, "topologyConstraints"),
                "is the early v1alpha2 spelling; use topology: [{key: <node label>}]",
            )
            return None
        list_name, key_name = "topologyConstraints", "topologyKey"
    list_field = child(_CONSTRAINTS, list_name)
    entries = r.items(constraints.get(list_name), list_field)
    if not entries:
        return None
    if len(entries) > 1:
        r.add(list_field, f"must have at most 1 item, got {len(entries)}")
        return None
    entry_field = item(list_field, 0)
    entry = r.mapping(entries[0], entry_field)
    key = _key(r, entry.get(key_name), child(entry_field, key_name))
    if key is None:
        return None
    return TopologyRequest(required=key, origin=child(entry_field, key_name))


def read_crd_topology(r: Reader, spec: Mapping[str, Any]) -> TopologyRequest | None:
    """Our scheduling.sigs.k8s.io `spec.topology: {required, preferred}`, both optional."""
    raw = spec.get("topology")
    if raw is None:
        return None
    field = "spec.topology"
    topology = r.mapping(raw, field)
    for extra in sorted(set(topology) - {"required", "preferred"}):
        r.add(child(field, str(extra)), f"unknown field {show(extra)}; use required, preferred")
    required = (
        _key(r, topology.get("required"), child(field, "required"))
        if topology.get("required") is not None
        else None
    )
    preferred = (
        _key(r, topology.get("preferred"), child(field, "preferred"))
        if topology.get("preferred") is not None
        else None
    )
    if required is None and preferred is None:
        return None
    return TopologyRequest(
        required=required, preferred=(preferred,) if preferred else (), origin=field
    )


def read_kai_topology(r: Reader, annotations: Mapping[str, str]) -> TopologyRequest | None:
    """KAI's `kai.scheduler/topology-required-placement` / `-preferred-placement` annotations:
    each names the node label of a topology level."""
    fields = {
        name: child("metadata.annotations", name)
        for name in (KAI_REQUIRED, KAI_PREFERRED)
        if name in annotations
    }
    if not fields:
        return None
    keys: dict[str, str | None] = {
        name: _key(r, annotations[name], field) for name, field in fields.items()
    }
    required, preferred = keys.get(KAI_REQUIRED), keys.get(KAI_PREFERRED)
    if required is None and preferred is None:
        return None
    return TopologyRequest(
        required=required,
        preferred=(preferred,) if preferred else (),
        origin=fields.get(KAI_REQUIRED) or fields[KAI_PREFERRED],
    )


def merge(
    r: Reader, first: TopologyRequest | None, second: TopologyRequest | None
) -> TopologyRequest | None:
    """Two sources on one object must agree; the spec field wins and a conflict is refused."""
    if first is None or second is None or first == second:
        return first or second
    if (first.required, first.preferred) != (second.required, second.preferred):
        r.add(
            second.origin,
            f"conflicts with {first.origin} ({first.describe()} vs {second.describe()})",
        )
    return first
