"""A pod's resource requests and host ports, as kube-scheduler counts them.

Requests follow component-helpers' PodRequests (sidecars, the init peak, pod-level
resources, overhead, in-place resize) so that what gangsched reserves on a node is what the
kubelet will admit; host ports follow the API server's hostNetwork defaulting.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from gangsched.core.api.fields import Reader, child, item
from gangsched.core.model import HostPort
from gangsched.core.resources import CPU, MEMORY, ResourceList, effective_requests, max_each

PROTOCOLS = ("TCP", "UDP", "SCTP")
#: A container's resources.requests then resources.limits, flat: name, quantity, ..., None,
#: name, quantity, ..., None (names and quantities are strings, so None ends each part).
RequirementsKey = tuple[str | None, ...]


def _read_requirements(r: Reader, raw: Any, field: str) -> ResourceList:
    """A container's requests, defaulted from its limits as the API server does."""
    if raw is None:
        return {}
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


def _plain_container_requests(entry: Any) -> ResourceList | None:
    """A container's requests without reading it field by field: the containers of a
    workload's pods carry the same few resources, so a valid set is converted once. Only
    for a container whose name is a string or absent and which has no ports (nothing else
    of it is read); None for any other, or when its resources would record a problem (the
    full reading then records them)."""
    if type(entry) is not dict or entry.get("ports") is not None:
        return None
    name = entry.get("name")
    if name is not None and type(name) is not str:
        return None
    key = _requirements_key(entry.get("resources"))
    known = None if key is None else _valid_requirements(key)
    return None if known is None else dict(known)  # the caller's to change


def _requirements_key(raw: Any) -> RequirementsKey | None:
    """resources.requests and .limits (RequirementsKey) when every name and quantity is a
    string (their exact JSON type: equal keys then mean equal input); None for anything
    else."""
    if raw is None:
        return (None, None)
    if type(raw) is not dict:
        return None
    key: list[str | None] = []
    for part in (raw.get("requests"), raw.get("limits")):
        if part is not None:  # absent reads as empty
            if type(part) is not dict:
                return None
            for name, quantity in part.items():
                if type(name) is not str or type(quantity) is not str:
                    return None
                key += (name, quantity)
        key.append(None)  # ends the part
    return tuple(key)


@lru_cache(maxsize=512)
def _valid_requirements(key: RequirementsKey) -> ResourceList | None:
    """The requests a key stands for, or None when reading them records a problem.
    Shared between containers: callers copy it."""
    split = key.index(None)
    requests, limits = key[:split], key[split + 1 : -1]
    raw = {
        "requests": dict(zip(requests[::2], requests[1::2], strict=True)),
        "limits": dict(zip(limits[::2], limits[1::2], strict=True)),
    }
    scratch = Reader("Pod")
    converted = _read_requirements(scratch, raw, "resources")
    return None if scratch.problems else converted


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
    if status.get(key) is None:
        return out
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


def read_containers(
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
        plain = _plain_container_requests(entry)
        if plain is not None:
            steady.append(_with_actual(entry.get("name") or "", plain, actual, infeasible))
            continue
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
    if init or len(steady) != 1:
        requests = effective_requests(steady, init)
    else:  # what effective_requests gives for one container and no init containers
        requests = {name: value for name, value in steady[0].items() if value}
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
