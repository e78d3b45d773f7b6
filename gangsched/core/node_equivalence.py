"""Nodes a placement search may treat as one: of nodes alike, trying one stands for all.

Both backtracking searches, the gang placer's (core/gang_placer.py) and the tree's across
its levels (core/composite/search.py), skip a node whose signature they have tried already
for the same pod, as long as no member cares which node it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gangsched.core.model import Pod
from gangsched.core.snapshot import Snapshot

HOSTNAME_LABEL = "kubernetes.io/hostname"


def nodes_interchangeable(order: list[Pod], snap: Snapshot) -> bool:
    """Nodes with equal free capacity, labels (but the hostname) and taints are
    interchangeable for the search unless a member cares about node identity, ports or
    other pods; then trying one of them stands for all."""
    if snap.anti_affinity_pods:  # placed pods' anti-affinity tells nodes apart
        return False
    for pod in order:
        c = pod.constraints
        if c.node_name or pod.host_ports or pod.affinity or pod.anti_affinity or pod.spread:
            return False
        if pod.volume_claims:  # PVs (local ones above all) tell nodes apart
            return False
        if any(key == HOSTNAME_LABEL for key, _ in c.node_selector):
            return False
        for term in c.required_terms or ():
            if term.match_fields or any(r.key == HOSTNAME_LABEL for r in term.match_expressions):
                return False
    return True


def node_signature(snap: Snapshot, node: int) -> object:
    """What tells a node apart for the search: its free capacity, labels (but the hostname),
    taints and cordon."""
    n = snap.nodes[node]
    free = (snap.allocatable[node] - snap.requested[node]).tobytes()
    labels = tuple(sorted((k, v) for k, v in n.labels.items() if k != HOSTNAME_LABEL))
    return (free, labels, n.taints, n.unschedulable)


def nodes_to_try(
    snap: Snapshot,
    ranked: Iterable[int],
    *,
    width: int,
    budget: list[int],
    dedupe: bool,
) -> Iterator[int]:
    """The nodes one step of a backtracking search tries for a pod, best first: at most
    `width` of them, each taking one from the search's shared `budget` (checked as each is
    asked for, so what the deeper steps spent counts), and with `dedupe` one node of each
    signature."""
    seen: set[object] = set()
    tried = 0
    for node in ranked:
        if tried >= width or budget[0] <= 0:
            return
        if dedupe:
            signature = node_signature(snap, int(node))
            if signature in seen:
                continue
            seen.add(signature)
        tried += 1
        budget[0] -= 1
        yield int(node)
