"""The allocation written back for a claim: the devices picked and where the pod may run.

A claim allocated from node-local devices pins the pod to that node (a metadata.name field
selector, as kube-scheduler writes it); devices of network-attached slices carry their
slice's node selector; devices available everywhere leave the allocation without one.
"""

from __future__ import annotations

from collections.abc import Sequence

from gangsched.core.dra.allocator import Pick
from gangsched.core.dra.inventory import DeviceEntry, NodeDevices
from gangsched.core.dra.model import Allocation, DeviceResult
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import Node


def allocation_of_picks(
    picks: list[Pick], *, entries: Sequence[DeviceEntry], devices: NodeDevices, node: Node
) -> Allocation:
    """The Allocation for the allocator's picks on `node` (`devices`: the node's view of
    the inventory's `entries`)."""
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
    return Allocation(results=tuple(results), node_selector=selector)
