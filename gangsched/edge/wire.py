"""Typed decoding of list pages and watch events: only the fields the scheduler reads become
Python objects.

A listed pod is mostly what gangsched never looks at: managedFields, container images,
commands, env, mounts and probes, and a status full of conditions and container states. The
standard route (orjson into dicts) allocates all of it, and at 50,000 pods allocation was the
start-up's largest cost and its memory peak (bench/README.md, issue 17). msgspec decodes
into these TypedDicts and skips every key they do not name while parsing, at C speed, and the
result is still plain dicts, so the converters in gangsched.core.api read them unchanged.

The shapes below are what `pod_from_raw`, `node_from_raw`, the cache's change fingerprints
and its problem reports read; a field read there but missing here would silently read as
absent, which tests/unit/edge/test_wire.py guards against (every pod and node of the test
fixtures converts to the same model either way). Leaves are typed only where the API
server's own schema guarantees the type; a page that does not validate anyway (an
aggregated or patched API server) is decoded the standard way, so typed decoding can make
a list cheaper but never make it fail.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import msgspec
import orjson

from gangsched.core.api.types import ObjectMeta

Decoder = Callable[[bytes], dict[str, Any]]


class _OwnerReference(TypedDict, total=False):
    name: str
    controller: bool


class _Meta(ObjectMeta, total=False):
    ownerReferences: list[_OwnerReference]


# -- pods ---------------------------------------------------------------------------------------
class _Container(TypedDict, total=False):
    """What a container contributes to placement; image, command, env, mounts and probes
    (most of a real pod's spec) are skipped."""

    name: str
    resources: dict[str, Any]
    ports: list[dict[str, Any]]
    restartPolicy: str


class _Volume(TypedDict, total=False):
    """Only the sources that need a claim; configMap, secret, projected, ... are skipped."""

    name: str
    persistentVolumeClaim: dict[str, Any]
    ephemeral: dict[str, Any]


class _PodSpec(TypedDict, total=False):
    schedulerName: str
    nodeName: str
    nodeSelector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: list[dict[str, Any]]
    topologySpreadConstraints: list[dict[str, Any]]
    containers: list[_Container]
    initContainers: list[_Container]
    overhead: dict[str, Any]
    resources: dict[str, Any]
    priority: int
    priorityClassName: str
    preemptionPolicy: str
    schedulingGroup: dict[str, Any]
    schedulingGates: list[dict[str, Any]]
    volumes: list[_Volume]
    hostNetwork: bool
    os: dict[str, Any]
    resourceClaims: list[dict[str, Any]]


class _ContainerStatus(TypedDict, total=False):
    """In-place resize: what the container holds now. State, image and ids are skipped."""

    name: str
    resources: dict[str, Any]
    allocatedResources: dict[str, Any]


class _Condition(TypedDict, total=False):
    """PodResizePending's reason; PodScheduled=False Unschedulable's time, where a wait for
    new capacity starts (capacity_wait). Messages and probe times are skipped."""

    type: str
    status: str
    reason: str
    lastTransitionTime: str


class _PodStatus(TypedDict, total=False):
    phase: str
    nominatedNodeName: str
    resourceClaimStatuses: list[dict[str, Any]]
    containerStatuses: list[_ContainerStatus]
    initContainerStatuses: list[_ContainerStatus]
    resize: str
    conditions: list[_Condition]


class _Pod(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: _Meta
    spec: _PodSpec
    status: _PodStatus


# -- nodes --------------------------------------------------------------------------------------
class _NodeSpec(TypedDict, total=False):
    unschedulable: bool
    taints: list[dict[str, Any]]


class _NodeStatus(TypedDict, total=False):
    """Images, conditions, addresses and nodeInfo (most of a real node) are skipped."""

    capacity: dict[str, Any]
    allocatable: dict[str, Any]


class _Node(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: _Meta
    spec: _NodeSpec
    status: _NodeStatus


# "continue" (the next page's token) is a Python keyword: only the functional form names it.
_ListMeta = TypedDict("_ListMeta", {"resourceVersion": str, "continue": str}, total=False)


class _PodList(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: _ListMeta
    items: list[_Pod]


class _NodeList(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: _ListMeta
    items: list[_Node]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a list page is decoded and converted.

    A page allocates ~15,000 objects, each one counting towards the next collection, and a
    collection of the older generations walks every object the cache already holds: with
    50,000 pods cached, collections were a quarter of the CPU of taking a list (offline, 30,000
    kwok pods: 4.0 -> 3.1 s). None of it is garbage a collection could find: JSON objects
    and the models built from them hold no cycles, and what a page leaves behind is freed
    by reference counting when the page is dropped.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _typed(shape: Any) -> Decoder:
    decoder = msgspec.json.Decoder(shape)

    def decode(raw: bytes) -> dict[str, Any]:
        with gc_paused():
            try:
                page: dict[str, Any] = decoder.decode(raw)
            except msgspec.ValidationError:
                fallback: dict[str, Any] = orjson.loads(raw)
                return fallback
        return page

    return decode


#: Decoders of list pages, by the resource path the informer lists.
LIST_DECODERS: dict[str, Decoder] = {
    "/api/v1/pods": _typed(_PodList),
    "/api/v1/nodes": _typed(_NodeList),
}


class _PodEvent(TypedDict, total=False):
    type: str
    object: _Pod


class _NodeEvent(TypedDict, total=False):
    type: str
    object: _Node


def _typed_event(shape: Any) -> Decoder:
    """One watch event decoded as a list page's item is. Each bind brings its pod back two or
    three times (the binding, then the kubelet's status), and decoding those events in full was
    3-4% of gangsched's samples over a precreated run (py-spy, issue 30); a running pod's 1.8 KB
    event takes 4.5 us typed against 7.8 us in full, and allocates no managedFields, container
    states or condition timestamps. An ERROR event carries a Status, not the kind: it is read
    in full, as is anything that does not fit the shape. No collection pause around it, as
    around a page: an event is a few dozen objects."""
    decoder = msgspec.json.Decoder(shape)

    def decode(raw: bytes) -> dict[str, Any]:
        try:
            event: dict[str, Any] = decoder.decode(raw)
        except msgspec.ValidationError:
            event = orjson.loads(raw)
            return event
        if event.get("type") == "ERROR":
            event = orjson.loads(raw)
        return event

    return decode


#: Decoders of watch events, by the resource path the informer watches.
WATCH_DECODERS: dict[str, Decoder] = {
    "/api/v1/pods": _typed_event(_PodEvent),
    "/api/v1/nodes": _typed_event(_NodeEvent),
}

#: Decodes one pod or node the way a list page's item is decoded (tests, explain).
decode_pod = _typed(_Pod)
decode_node = _typed(_Node)
