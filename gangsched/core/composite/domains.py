"""Topology per level of a tree: each CompositePodGroup with `schedulingConstraints.topology`
keeps its whole subtree inside one domain of that label, nested inside its parent's domain
(KEP-6012 with KEP-5732: constraints resolve top-down, largest domain first).

For each candidate domain, tightest first (the fullest by MostAllocated over CPU and memory
with the subtree's minimum placed, among those with room for it, so big domains stay whole for
big trees, as the topology placer does for gangs), the subtree's own cycle runs with every
member confined to the domain, nested constraints below choosing their domains inside it.
The first domain that holds the subtree wins. A subtree with members already bound stays in
the domain that holds them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gangsched.core.composite.tree import TreeNode
from gangsched.core.cycle import CycleResult, GangMember
from gangsched.core.framework import Framework
from gangsched.core.model import GroupRef
from gangsched.core.plugins.most_allocated import MostAllocated
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.topology.bounds import usable_nodes
from gangsched.core.topology.domain_filter import confined
from gangsched.core.topology.domains import Domain, partition
from gangsched.core.topology.placement import TopologyPlacer

#: Domains tried per constrained level and attempt at most (the topology placer's budget).
MAX_DOMAINS = 32


def candidate_domains(
    node: TreeNode,
    snap: Snapshot,
    parts: dict[GroupRef, GangMember],
    outer: BoolVector | None,
    framework: Framework,
) -> list[Domain]:
    """The domains of `node`'s key worth trying, tightest first (module doc). Capacity is
    counted only on nodes some pending member of the subtree may use (the node-static
    filters), so domains nothing may run in neither qualify nor use up the budget."""
    assert node.composite is not None and node.composite.topology_key is not None
    domains = list(partition(snap, node.composite.topology_key).domains)
    if outer is not None:
        domains = [d for d in domains if bool((d.mask & outer).any())]
    leaves = [parts[leaf.ref] for leaf in node.leaves() if leaf.ref in parts]
    pinned = _bound_nodes(leaves, snap)
    if pinned:
        domains = [d for d in domains if all(bool(d.mask[i]) for i in pinned)]
    need = _minimum_demand(leaves, snap)
    free = np.clip(snap.allocatable - snap.requested, 0, None)
    usable = usable_nodes(framework, [pod for part in leaves for pod in part.pending], snap)
    scored = []
    for domain in domains:
        rows = domain.mask & outer if outer is not None else domain.mask
        rows = rows & usable
        if not rows.any() or (free[rows].sum(axis=0) < need).any():
            continue
        fraction = _allocated_after(snap, rows, need)
        scored.append((-fraction, domain.name, domain))
    return [domain for *_, domain in sorted(scored, key=lambda s: (s[0], s[1]))][:MAX_DOMAINS]


def _allocated_after(snap: Snapshot, rows: BoolVector, need: np.ndarray) -> float:
    """How full the domain would be with the subtree's minimum in it: MostAllocated over CPU
    and memory (kube-scheduler's default resources, weight 1 each), as upstream scores a
    placement. Fractions, not summed free room: in bytes, memory would outweigh every other
    resource, and a one-node rack would count as tighter than a fuller two-node rack."""
    used = snap.requested[rows].sum(axis=0) + need
    alloc = snap.allocatable[rows].sum(axis=0)
    fractions = [
        min(float(used[col]) / float(alloc[col]), 1.0)
        for name in ("cpu", "memory")
        if (col := snap.columns.get(name)) is not None and alloc[col] > 0
    ]
    return sum(fractions) / len(fractions) if fractions else 0.0


def bound_domains(node: TreeNode, snap: Snapshot, parts: dict[GroupRef, GangMember]) -> list[str]:
    """The values of `node`'s key holding members of its subtree already bound: more than
    one means no domain can hold the subtree (upstream: an error on the tree)."""
    assert node.composite is not None and node.composite.topology_key is not None
    key = node.composite.topology_key
    leaves = [parts[leaf.ref] for leaf in node.leaves() if leaf.ref in parts]
    values = {snap.nodes[i].labels.get(key, "") for i in _bound_nodes(leaves, snap)}
    return sorted(values)


def confined_placer(
    placer: TopologyPlacer, refs: Iterable[GroupRef], mask: BoolVector, name: str
) -> TopologyPlacer:
    """`placer` with the members of `refs` kept to `mask` (leaf-level topology still
    honoured)."""
    masks = dict.fromkeys(refs, mask)
    framework = confined(placer.framework, masks, dict.fromkeys(masks, name))
    return TopologyPlacer(framework, placer.config, placer.topology)


def packing_placer(placer: TopologyPlacer) -> TopologyPlacer:
    """`placer` with its filters (domain confinement included) and nodes scored fullest
    first (MostAllocated over CPU and memory, as the gang cycle's bin-packing attempt): the
    level-by-level pass that fills nodes in use before it opens an idle one, where the
    pod-by-pod tightest search cannot keep levels in their domains."""
    framework = Framework(
        filters=placer.framework.filters,
        scores=[(MostAllocated({"cpu": 1.0, "memory": 1.0}), 1.0)],
        pre_filters=placer.framework.pre_filters,
    )
    return TopologyPlacer(framework, placer.config, placer.topology)


def leaf_domain_framework(
    framework: Framework, part: GangMember, placed: CycleResult, snap: Snapshot
) -> Framework:
    """The framework that places a leaf's members beyond minCount: kept to the domain its
    own required topology key gave the members already bound or placed (the gang cycle's
    topology placer does the same for the members it places itself)."""
    request = part.group.topology
    key = request.required if request is not None else None
    if key is None:
        return framework
    nodes = [snap.index[p.node_name] for p in part.bound if p.node_name in snap.index]
    nodes += [index for _, index in placed.placements]
    for domain in partition(snap, key).domains:
        if nodes and all(bool(domain.mask[i]) for i in nodes):
            return confined(framework, {part.group.ref: domain.mask}, {part.group.ref: domain.name})
    return framework


def _bound_nodes(leaves: list[GangMember], snap: Snapshot) -> list[int]:
    nodes = []
    for part in leaves:
        for pod in part.bound:
            index = snap.index.get(pod.node_name or "")
            if index is not None:
                nodes.append(index)
    return nodes


def _minimum_demand(leaves: list[GangMember], snap: Snapshot) -> np.ndarray:
    """A lower bound on what the subtree needs: nothing when it may place no new pod (a
    bound quorum), else the smallest leaf's minimum: cheap and never too strict."""
    best: np.ndarray | None = None
    for part in leaves:
        short = part.group.min_member - part.quorum_bound
        if short <= 0 or len(part.pending) < short:
            continue
        vectors = np.sort(np.stack([snap.vector(pod) for pod in part.pending]), axis=0)
        need = vectors[:short].sum(axis=0)
        if best is None or need.sum() < best.sum():
            best = need
    if best is None:
        return np.zeros(snap.allocatable.shape[1] if len(snap) else 0, dtype=np.int64)
    return best
