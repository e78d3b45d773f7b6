"""Resource lists as integers: CPU in millicores, everything else in whole units.

Integers make sums exact and let the snapshot hold them in NumPy int64 columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

#: Columns every snapshot has, in this order; extended resources follow, sorted by name.
STANDARD_RESOURCES: tuple[str, ...] = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)

ResourceList = dict[str, int]


def add(into: ResourceList, other: Mapping[str, int]) -> ResourceList:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value
    return into


def max_each(into: ResourceList, other: Mapping[str, int]) -> ResourceList:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value
    return into


def effective_requests(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[tuple[Mapping[str, int], bool]] = (),
    overhead: Mapping[str, int] | None = None,
) -> ResourceList:
    """The pod request as kube-scheduler computes it.

    Init containers are given in spec order as (requests, is_sidecar). A sidecar (restartable
    init container) runs for the pod's whole life, so it adds to the steady state and to every
    init container started after it; the result is max(steady state, peak during init) plus
    the pod overhead.
    """
    steady: ResourceList = {}
    for requests in containers:
        add(steady, requests)
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for requests, is_sidecar in init_containers:
        if is_sidecar:
            add(sidecars, requests)
            max_each(init_peak, sidecars)
        else:
            max_each(init_peak, add(dict(requests), sidecars))
    add(steady, sidecars)
    max_each(steady, init_peak)
    if overhead:
        add(steady, overhead)
    return {name: value for name, value in steady.items() if value}


def is_extended(name: str) -> bool:
    """Extended resources are the domain-prefixed names, e.g. nvidia.com/gpu."""
    return (name not in STANDARD_RESOURCES and "/" in name) or name.startswith("hugepages-")
