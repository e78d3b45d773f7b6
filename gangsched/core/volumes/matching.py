"""Which nodes a volume's node affinity, a class's topology or a label selector admits.

The node half of component-helpers' FindMatchingVolume and kube-scheduler's
checkVolumeProvisions: a PV's node affinity must admit the node; a claim is provisioned on
nodes its class's allowedTopologies admit (and, for CSI drivers that publish capacity, where
a CSIStorageCapacity's nodeTopology selects the node). Which PV fits a claim is
`static_index`'s; the capacity check, VolumeBinding's (`binding`).

Per-node answers are NumPy masks. Node affinity of the common local-PV shape (one hostname
or node name) sets the few matching indices directly instead of evaluating every node.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.labels import LabelSelector, NodeSelectorTerm, any_term_matches
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.volumes.model import PersistentVolume, StorageClass

HOSTNAME_LABEL = "kubernetes.io/hostname"
_PLUGIN = "VolumeBinding"


def hostname_index(snap: Snapshot) -> dict[str, list[int]]:
    def compute() -> dict[str, list[int]]:
        index: dict[str, list[int]] = {}
        for i, node in enumerate(snap.nodes):
            hostname = node.labels.get(HOSTNAME_LABEL)
            if hostname is not None:
                index.setdefault(hostname, []).append(i)
        return index

    result: dict[str, list[int]] = snap.cached_mask(_PLUGIN, "hostnames", compute)
    return result


def terms_mask(snap: Snapshot, terms: tuple[NodeSelectorTerm, ...] | None) -> BoolVector:
    """Nodes admitted by required node selector terms (None admits every node). The local-PV
    shape (one hostname or node name per term) is computed directly and not cached: a
    cluster of 10,000 local PVs would otherwise cache 10,000 node masks."""
    if terms is None:
        return np.ones(len(snap), dtype=np.bool_)
    fast = _single_node_terms(snap, terms)
    if fast is not None:
        return fast

    def compute() -> BoolVector:
        return np.fromiter(
            (any_term_matches(terms, node.name, node.labels) for node in snap.nodes),
            dtype=np.bool_,
            count=len(snap),
        )

    mask: BoolVector = snap.cached_mask(_PLUGIN, ("terms", terms), compute)
    return mask


def _single_node_terms(snap: Snapshot, terms: tuple[NodeSelectorTerm, ...]) -> BoolVector | None:
    """Terms each made of one `hostname In [...]` or `metadata.name In [...]` requirement."""
    indices = single_node_indices(snap, terms)
    if indices is None:
        return None
    mask = np.zeros(len(snap), dtype=np.bool_)
    mask[indices] = True
    return mask


def single_node_indices(
    snap: Snapshot,
    terms: tuple[NodeSelectorTerm, ...],
    hostnames: dict[str, list[int]] | None = None,
) -> list[int] | None:
    """The node indices of the local-PV affinity shape, or None for any other shape."""
    out: list[int] = []
    for term in terms:
        reqs = term.match_expressions + term.match_fields
        if len(reqs) != 1 or reqs[0].operator != "In":
            return None
        req = reqs[0]
        if term.match_fields and req.key == "metadata.name":
            out += [snap.index[v] for v in req.values if v in snap.index]
        elif term.match_expressions and req.key == HOSTNAME_LABEL:
            if hostnames is None:
                hostnames = hostname_index(snap)
            for value in req.values:
                out += hostnames.get(value, ())
        else:
            return None
    return out


def volume_admits(volume: PersistentVolume, snap: Snapshot, node: int) -> bool:
    if volume.node_affinity is None:
        return True
    n = snap.nodes[node]
    return any_term_matches(volume.node_affinity, n.name, n.labels)


# -------------------------------------------------------------------------- provisioning
def topology_mask(snap: Snapshot, storage_class: StorageClass) -> BoolVector:
    if not storage_class.can_provision:
        return np.zeros(len(snap), dtype=np.bool_)
    return terms_mask(snap, storage_class.allowed_topologies)


def selector_mask(snap: Snapshot, selector: LabelSelector) -> BoolVector:
    """Nodes whose labels a label selector matches (CSIStorageCapacity nodeTopology)."""

    def compute() -> BoolVector:
        return np.fromiter(
            (selector.matches(node.labels) for node in snap.nodes),
            dtype=np.bool_,
            count=len(snap),
        )

    mask: BoolVector = snap.cached_mask(_PLUGIN, ("selector", selector), compute)
    return mask
