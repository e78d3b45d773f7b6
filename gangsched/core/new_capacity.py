"""Did a gang bind on capacity that was added for it? (issue 32 item 5, seen from outside.)

On a cluster that grows, an Unschedulable gang is what makes an autoscaler provision nodes,
and the operator wants to know how long that took and how many nodes it cost. A gang is
counted as bound on new capacity when some of the nodes it was bound to were created after
it became Unschedulable: the earliest `PodScheduled=False` reason `Unschedulable`
lastTransitionTime among its bound members (Pod.unschedulable_since). The nodes counted are
those nodes; the seconds run from that moment to the bind decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import Bind


@dataclass(frozen=True, slots=True)
class NewCapacity:
    #: From the gang's Unschedulable to its bind decision.
    seconds: float
    #: Nodes created after the gang became Unschedulable that its members were bound to.
    nodes: int


def bound_on_new_capacity(
    binds: Sequence[Bind], cluster: ClusterState, *, now: float
) -> NewCapacity | None:
    """What one cycle's binds say about new capacity (`now`: seconds since the epoch, the
    clock of the pods' conditions and the nodes' creation), or None when the gang was never
    Unschedulable or bound only on nodes older than that."""
    since_times = [
        pod.unschedulable_since
        for bind in binds
        if (pod := cluster.pods.get(bind.pod)) is not None and pod.unschedulable_since is not None
    ]
    if not since_times:
        return None
    since = min(since_times)
    new_nodes = {
        bind.node
        for bind in binds
        if (node := cluster.nodes.get(bind.node)) is not None and node.created > since
    }
    if not new_nodes:
        return None
    return NewCapacity(seconds=max(0.0, now - since), nodes=len(new_nodes))
