"""NodePorts: a pod asking for host ports needs them free on the node.

Evicting the pod holding a port frees it, so the rejection is resolvable by preemption.
"""

from __future__ import annotations

from gangsched.core.framework import PodContext
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code

REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts:
    name = "NodePorts"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return bool(ctx.pod.host_ports)

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        # Only nodes where some pod holds a host port can conflict: visit just those.
        result = candidates.copy()
        for node in snap.port_holders:
            if candidates[node] and self._conflicts(ctx, snap, node):
                result[node] = False
        return result

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return [(REASON, Code.UNSCHEDULABLE)]

    @staticmethod
    def _conflicts(ctx: PodContext, snap: Snapshot, node: int) -> bool:
        wanted = ctx.pod.host_ports
        for other in snap.port_holders.get(node, {}).values():
            for used in other.host_ports:
                if any(port.conflicts(used) for port in wanted):
                    return True
        return False
