"""The allocation written back for a claim: the devices picked and where the pod may run.

A claim allocated from node-local devices pins the pod to that node (a metadata.name field
selector, as kube-scheduler writes it); devices of network-attached slices carry their
slice's node selector; devices available everywhere leave the allocation without one. The
classes' and the claim's driver configuration is copied in, as upstream's allocator does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gangsched.core.dra.allocator import Pick
from gangsched.core.dra.inventory import DeviceEntry, NodeDevices
from gangsched.core.dra.model import (
    AllocatedConfig,
    Allocation,
    ClaimSpec,
    ConfigSource,
    DeviceClass,
    DeviceResult,
)
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import Node


def allocation_of_picks(
    picks: list[Pick],
    *,
    entries: Sequence[DeviceEntry],
    devices: NodeDevices,
    node: Node,
    spec: ClaimSpec,
    classes: Mapping[str, DeviceClass],
) -> Allocation:
    """The Allocation for the allocator's picks on `node` (`devices`: the node's view of
    the inventory's `entries`) for a claim with `spec`."""
    results = []
    local = False
    expressions: list[Requirement] = []
    fields: list[Requirement] = []
    for pick in picks:
        entry = entries[devices.devices[pick.position]]
        results.append(
            DeviceResult(
                request=pick.request,
                driver=entry.driver,
                pool=entry.pool,
                device=entry.device.name,
                admin_access=pick.admin_access,
            )
        )
        if entry.slice.node_name is not None:
            local = True
        elif entry.slice.node_selector:
            term = entry.slice.node_selector[0]
            expressions += [r for r in term.match_expressions if r not in expressions]
            fields += [r for r in term.match_fields if r not in fields]
    selector: tuple[NodeSelectorTerm, ...] | None = None
    if local:
        selector = (
            NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", (node.name,)),)),
        )
    elif expressions or fields:
        selector = (
            NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),
        )
    return Allocation(
        results=tuple(results),
        node_selector=selector,
        config=allocated_config(spec, picks, classes),
    )


def allocated_config(
    spec: ClaimSpec, picks: Sequence[Pick], classes: Mapping[str, DeviceClass]
) -> tuple[AllocatedConfig, ...]:
    """What kube-scheduler's allocator copies into status.allocation.devices.config for the
    drivers: first each class's config, once per class, naming the requests (a
    `firstAvailable` request by its chosen "<request>/<sub>") that use the class; then each
    of the claim's own entries that applies to no request in particular, or to one of its
    requests, or to the chosen alternative of one (an entry for an alternative not chosen is
    left out)."""
    chosen = {pick.request.partition("/")[0]: pick.request for pick in picks}
    by_class: dict[str, list[str]] = {}
    for request in spec.requests:
        name = chosen.get(request.name)
        if name is None:
            continue
        alternative = request.exactly or next(
            (a for a in request.first_available if f"{request.name}/{a.name}" == name), None
        )
        if alternative is not None:
            by_class.setdefault(alternative.class_name, []).append(name)
    out: list[AllocatedConfig] = []
    for class_name, names in by_class.items():
        device_class = classes.get(class_name)
        for config in device_class.config if device_class is not None else ():
            out.append(
                AllocatedConfig(ConfigSource.FROM_CLASS, replace(config, requests=tuple(names)))
            )
    applies = {request.name for request in spec.requests} | set(chosen.values())
    for config in spec.config:
        if not config.requests or applies.intersection(config.requests):
            out.append(AllocatedConfig(ConfigSource.FROM_CLAIM, config))
    return tuple(out)
