"""Nodes and Namespaces from raw JSON."""

from __future__ import annotations

from typing import Any

from gangsched.core.api.fields import Reader, child, item
from gangsched.core.api.types import RawNamespace, RawNode
from gangsched.core.model import Node, Taint
from gangsched.core.resources import PODS

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: The kubelet's default --max-pods; nodes written by hand often leave `pods` out.
DEFAULT_MAX_PODS = 110
#: The API server labels every namespace with its own name (since 1.22); selectors rely on it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def read_taint(reader: Reader, raw: Any, field: str) -> Taint | None:
    body = reader.mapping(raw, field)
    key = reader.string(body.get("key"), child(field, "key"))
    value = reader.string(body.get("value"), child(field, "value"))
    effect = reader.string(body.get("effect"), child(field, "effect"))
    ok = True
    if not key:
        reader.add(child(field, "key"), "is required")
        ok = False
    if effect not in TAINT_EFFECTS:
        message = (
            "is required"
            if not effect
            else f'unknown effect "{effect}"; must be one of {", ".join(TAINT_EFFECTS)}'
        )
        reader.add(child(field, "effect"), message)
        ok = False
    return Taint(key=key, value=value, effect=effect) if ok else None


def node_from_raw(raw: RawNode | dict[str, Any]) -> Node:
    reader = Reader.for_object("Node", raw, namespaced=False)
    spec = reader.mapping(reader.raw.get("spec"), "spec")
    status = reader.mapping(reader.raw.get("status"), "status")
    labels = reader.string_map(reader.metadata.get("labels"), "metadata.labels")
    # Allocatable is what the scheduler fits against; hand-written nodes sometimes give only
    # capacity, which is what allocatable equals on a node without reservations.
    if status.get("allocatable") is not None:
        allocatable = reader.resources(status.get("allocatable"), "status.allocatable")
    else:
        allocatable = reader.resources(status.get("capacity"), "status.capacity")
    allocatable.setdefault(PODS, DEFAULT_MAX_PODS)
    taints = []
    for index, entry in enumerate(reader.items(spec.get("taints"), "spec.taints")):
        taint = read_taint(reader, entry, item("spec.taints", index))
        if taint is not None:
            taints.append(taint)
    unschedulable = reader.boolean(spec.get("unschedulable"), "spec.unschedulable")
    created = reader.timestamp(
        reader.metadata.get("creationTimestamp"), "metadata.creationTimestamp"
    )
    reader.done()
    return Node(
        name=reader.name,
        labels=labels,
        allocatable=allocatable,
        taints=tuple(taints),
        unschedulable=unschedulable,
        created=created or 0.0,
    )


def namespace_from_raw(raw: RawNamespace | dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A namespace's name and labels, including the name label the API server adds."""
    reader = Reader.for_object("Namespace", raw, namespaced=False)
    labels = reader.string_map(reader.metadata.get("labels"), "metadata.labels")
    reader.done()
    labels.setdefault(NAMESPACE_NAME_LABEL, reader.name)
    return reader.name, labels
