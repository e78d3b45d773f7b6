"""The cluster as one scheduling cycle sees it, with cheap assume and exact rollback.

Node capacity and usage live in NumPy int64 matrices (one row per node, one column per
resource) so that "which nodes fit this pod" is one vectorised comparison over every node
instead of a Python loop. The snapshot is long-lived and updated incrementally by its owner
(the cluster cache); a cycle takes a checkpoint, assumes pods, and either keeps the result or
rolls back to the checkpoint, so a failed group leaves no trace and taking a snapshot is O(1).

What a pod needs decided beside its node (volumes, DRA devices) belongs to the snapshot's
extensions (gangsched.core.reservations): each reserves with the placements, is journaled and
rolled back with them, and hands the edge what to write before the pods bind. The snapshot
knows the protocol only, never an extension.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gangsched.core.decisions import Decision
from gangsched.core.model import GroupRef, Node, Pod, PodAffinityTerm
from gangsched.core.pod_counts import PodCounts, TermCounts, scoring_terms
from gangsched.core.reservations import Extensions, Undo
from gangsched.core.resources import PODS, STANDARD_RESOURCES

IntMatrix = npt.NDArray[np.int64]
IntVector = npt.NDArray[np.int64]
BoolVector = npt.NDArray[np.bool_]
FloatMatrix = npt.NDArray[np.float64]

_ADD, _REMOVE, _NOMINATE, _UNNOMINATE = range(4)
#: A journal entry: a placement change, or the undo of a change an extension made.
_Entry = tuple[int, Pod, int] | Undo


@dataclass(slots=True)
class _Reservation:
    pod: Pod
    node: int


@dataclass(slots=True, eq=False)
class Snapshot:
    """Nodes sorted by name (so every order derived from indices is deterministic)."""

    nodes: list[Node] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    columns: dict[str, int] = field(default_factory=dict)
    allocatable: IntMatrix = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    requested: IntMatrix = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    node_pods: list[dict[str, Pod]] = field(default_factory=list)
    #: Pods nominated to a node (after preemption) keep its freed capacity reserved.
    nominated: dict[str, _Reservation] = field(default_factory=dict)
    #: Namespace labels, for pod affinity namespaceSelector.
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Bumped whenever node labels, taints or the node set change: invalidates cached masks.
    node_generation: int = 0
    #: What cycles reserve beside the nodes (gangsched.core.reservations), by type.
    extensions: Extensions[Snapshot] = field(default_factory=Extensions)
    _journal: list[_Entry] = field(default_factory=list)
    #: Bumped when a rollback or a commit shortens the journal, after which its length no
    #: longer tells one state from another (see `version`).
    _rewinds: int = 0
    _vector_cache: dict[tuple[tuple[str, int], ...], IntVector] = field(default_factory=dict)
    _mask_cache: dict[tuple[str, Hashable], Any] = field(default_factory=dict)
    _inverse: FloatMatrix | None = None
    _inverse_generation: int = -1
    _mask_generation: int = -1
    #: Bound pods that carry required anti-affinity terms (checked for symmetry).
    anti_affinity_pods: dict[str, tuple[Pod, int]] = field(default_factory=dict)
    #: Per node, the placed pods holding host ports: NodePorts reads only these.
    port_holders: dict[int, dict[str, Pod]] = field(default_factory=dict)
    #: Placed pods matching the affinity and spread plugins' questions, per node, kept
    #: current by show/hide (and so undone by rollback): a constrained gang costs O(members).
    pod_counts: PodCounts = field(default_factory=PodCounts)
    #: The required anti-affinity terms placed pods carry, per node (symmetry checks).
    anti_affinity_terms: TermCounts[PodAffinityTerm] = field(
        default_factory=lambda: TermCounts(lambda pod: pod.anti_affinity)
    )
    #: The weighted terms placed pods carry for InterPodAffinity's score (symmetry).
    scoring_terms: TermCounts[tuple[int, PodAffinityTerm]] = field(
        default_factory=lambda: TermCounts(scoring_terms)
    )
    #: Node of every placed pod, by key (a pod assumed in this cycle has no node_name yet).
    located: dict[str, int] = field(default_factory=dict)

    # ----------------------------------------------------------------------------- building
    @classmethod
    def build(cls, nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> Snapshot:
        snap = cls()
        snap.set_nodes(nodes)
        for pod in pods:
            if pod.holds_resources and pod.node_name in snap.index:
                snap._place(pod, snap.index[pod.node_name])
        return snap

    def set_nodes(self, nodes: Iterable[Node]) -> None:
        """Replace the node set, keeping the pods of nodes that remain."""
        ordered = sorted(nodes, key=lambda node: node.name)
        old_pods = {self.nodes[i].name: self.node_pods[i] for i in range(len(self.nodes))}
        names: set[str] = set(STANDARD_RESOURCES)
        for node in ordered:
            names.update(node.allocatable)
        self.columns = {name: i for i, name in enumerate(STANDARD_RESOURCES)}
        for name in sorted(names - set(STANDARD_RESOURCES)):
            self.columns[name] = len(self.columns)
        self.nodes = ordered
        self.index = {node.name: i for i, node in enumerate(ordered)}
        self.allocatable = np.zeros((len(ordered), len(self.columns)), dtype=np.int64)
        self.requested = np.zeros_like(self.allocatable)
        self.node_pods = [{} for _ in ordered]
        self.anti_affinity_pods = {}
        self.port_holders = {}
        self.located = {}
        self.pod_counts.reset(len(ordered))
        self.anti_affinity_terms.reset(len(ordered))
        self.scoring_terms.reset(len(ordered))
        self._vector_cache.clear()
        for i, node in enumerate(ordered):
            self._write_allocatable(i, node)
        for name, pods in old_pods.items():
            if name in self.index:
                for pod in pods.values():
                    self._place(pod, self.index[name])
        self.nominated = {
            key: res
            for key, res in self.nominated.items()
            if res.pod.nominated_node_name in self.index
        }
        for res in self.nominated.values():
            res.node = self.index[res.pod.nominated_node_name or ""]
        self.node_generation += 1

    def update_node(self, node: Node) -> None:
        """A node changed in place (labels, taints, capacity); a new name means set_nodes."""
        i = self.index.get(node.name)
        if i is None or any(name not in self.columns for name in node.allocatable):
            self.set_nodes([*(n for n in self.nodes if n.name != node.name), node])
            return
        self.nodes[i] = node
        self._write_allocatable(i, node)
        self.node_generation += 1

    def remove_node(self, name: str) -> None:
        if name in self.index:
            self.set_nodes(n for n in self.nodes if n.name != name)

    def _write_allocatable(self, i: int, node: Node) -> None:
        row = np.zeros(len(self.columns), dtype=np.int64)
        for name, value in node.allocatable.items():
            row[self.columns[name]] = value
        self.allocatable[i] = row

    # ------------------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self.nodes)

    def vector(self, pod: Pod) -> IntVector:
        """The pod's requests as a row aligned with `columns` (pods column = 1).

        Requests of resources no node has get a column of their own with zero capacity, so
        they fail the fit check with "Insufficient <name>" like kube-scheduler.
        """
        key = tuple(sorted(pod.requests.items()))
        cached = self._vector_cache.get(key)
        if cached is not None:
            return cached
        for name in pod.requests:
            if name not in self.columns:
                self._add_column(name)
        vec = np.zeros(len(self.columns), dtype=np.int64)
        for name, value in pod.requests.items():
            vec[self.columns[name]] = value
        vec[self.columns[PODS]] = 1
        vec.flags.writeable = False
        self._vector_cache[key] = vec
        return vec

    def _add_column(self, name: str) -> None:
        self.columns[name] = len(self.columns)
        pad = np.zeros((len(self.nodes), 1), dtype=np.int64)
        self.allocatable = np.hstack([self.allocatable, pad])
        self.requested = np.hstack([self.requested, pad])
        self._vector_cache.clear()

    def free(self) -> IntMatrix:
        return self.allocatable - self.requested

    def pods(self) -> Iterator[Pod]:
        for pods in self.node_pods:
            yield from pods.values()

    def node_of(self, pod: Pod) -> int | None:
        return None if pod.node_name is None else self.index.get(pod.node_name)

    def nominated_nodes(self, pods: Iterable[Pod]) -> set[int]:
        """The nodes the pods are nominated to (status.nominatedNodeName), known ones only."""
        return {
            self.index[pod.nominated_node_name]
            for pod in pods
            if pod.nominated_node_name is not None and pod.nominated_node_name in self.index
        }

    def placed_at(self, pod: Pod) -> int | None:
        """The node this very pod object is placed on in the snapshot (assumed or bound)."""
        node = self.located.get(pod.key)
        if node is None or self.node_pods[node].get(pod.key) is not pod:
            return None
        return node

    def inverse_allocatable(self) -> FloatMatrix:
        """1 / allocatable per node and resource (0 where the node has none), cached until
        capacity changes: scoring multiplies by it instead of dividing on every attempt."""
        if (
            self._inverse is None
            or self._inverse_generation != self.node_generation
            or self._inverse.shape != self.allocatable.shape
        ):
            alloc = self.allocatable.astype(np.float64)
            inverse = np.zeros_like(alloc)
            np.divide(1.0, alloc, out=inverse, where=alloc > 0)
            self._inverse, self._inverse_generation = inverse, self.node_generation
        return self._inverse

    def cached_mask(self, plugin: str, constraints: Hashable, compute: Callable[[], Any]) -> Any:
        """Memoise per-node results that depend only on node labels/taints and part of the
        pod's spec (e.g. its NodeConstraints); identical gang members then share one
        computation."""
        if self._mask_generation != self.node_generation:
            self._mask_cache.clear()
            self._mask_generation = self.node_generation
        key = (plugin, constraints)
        value = self._mask_cache.get(key)
        if value is None:
            value = compute()
            self._mask_cache[key] = value
        return value

    def reserved(
        self, priority: int, group: GroupRef | None, exclude: str | None = None
    ) -> IntMatrix | None:
        """Capacity held for nominated pods of at least `priority` from other groups.

        A pod being scheduled must fit beside these, so capacity freed by preemption is not
        taken by lower-priority pods while the victims terminate. `exclude` is the pod being
        scheduled (a lone pod has no group to exclude itself by), and nominated pods already
        assumed on their node in this cycle hold their capacity there and are not counted
        twice (members of one GangGroup nominated by the same preemption).
        """
        rows = [
            res
            for res in self.nominated.values()
            if res.pod.priority >= priority
            and (group is None or res.pod.group != group)
            and res.pod.key != exclude
            and res.pod.key not in self.node_pods[res.node]
        ]
        if not rows:
            return None
        vectors = [(res.node, self.vector(res.pod)) for res in rows]  # may add columns
        extra = np.zeros_like(self.requested)
        for node, vector in vectors:
            extra[node] += vector
        return extra

    # ------------------------------------------------------------------- assume / rollback
    def assume(self, pod: Pod, node: int) -> None:
        """Place a pending pod on a node for the rest of the cycle (journaled). Every
        extension reserves what the pod needs there (a PV, a provisioning node, devices)
        here too, journaled alike, so every search path and preemption's dry runs keep
        those decisions consistent with the placements."""
        self._place(pod, node)
        self._journal.append((_ADD, pod, node))
        for extension in self.extensions:
            undos = extension.reserve(self, pod, node)
            if undos:
                self._journal.extend(undos)

    def remove(self, pod: Pod) -> None:
        """Take a placed pod off its node (preemption dry runs, deletions); journaled."""
        node = self.node_of(pod)
        if node is not None and pod.key in self.node_pods[node]:
            self.remove_at(pod, node)
            return
        for i, pods in enumerate(self.node_pods):  # assumed in this cycle: no node_name yet
            if pods.get(pod.key) is pod:
                self.remove_at(pod, i)
                return

    def remove_at(self, pod: Pod, node: int) -> None:
        self._unplace(pod, node)
        self._journal.append((_REMOVE, pod, node))
        for extension in self.extensions:
            undos = extension.release(self, pod)
            if undos:
                self._journal.extend(undos)

    def nominate(self, pod: Pod, node: int) -> None:
        previous = self.nominated.get(pod.key)
        if previous is not None:
            self._journal.append((_UNNOMINATE, previous.pod, previous.node))
        self.nominated[pod.key] = _Reservation(pod, node)
        self._journal.append((_NOMINATE, pod, node))

    def clear_nomination(self, pod_key: str) -> None:
        res = self.nominated.pop(pod_key, None)
        if res is not None:
            self._journal.append((_UNNOMINATE, res.pod, res.node))

    def checkpoint(self) -> int:
        return len(self._journal)

    def version(self) -> tuple[int, int, int]:
        """Differs whenever pods or nodes may have changed since it was taken, for caches of
        what a plugin computed from the snapshot. The journal's length alone is no such key:
        a rollback followed by a different assume comes back to the same length."""
        return (len(self._journal), self._rewinds, self.node_generation)

    def rollback(self, mark: int) -> None:
        if len(self._journal) > mark:
            self._rewinds += 1
        while len(self._journal) > mark:
            entry = self._journal.pop()
            if not isinstance(entry, tuple):
                entry()
                continue
            op, pod, node = entry
            if op == _ADD:
                self._unplace(pod, node)
            elif op == _REMOVE:
                self._place(pod, node)
            elif op == _NOMINATE:
                self.nominated.pop(pod.key, None)
            else:
                self.nominated[pod.key] = _Reservation(pod, node)

    def commit(self) -> None:
        """Keep everything assumed since the last commit."""
        if self._journal:
            self._rewinds += 1
        self._journal.clear()
        for extension in self.extensions:
            extension.commit()

    def write_backs(self) -> list[Decision]:
        """What the extensions decided for the kept cycle as a whole, for the edge to write
        before any of its pods binds."""
        return [decision for extension in self.extensions for decision in extension.write_backs()]

    def pod_write_backs(self, pod: Pod, node: str) -> list[Decision]:
        """What the extensions decided for `pod`, placed on `node` by the kept cycle, for
        the edge to write before the pod binds."""
        return [
            decision
            for extension in self.extensions
            for decision in extension.pod_write_backs(pod, node)
        ]

    # ------------------------------------------------------------ untracked (cache) updates
    def place(self, pod: Pod, node: int) -> None:
        """Record a bound pod observed in the cluster (not part of any cycle)."""
        self._place(pod, node)

    def unplace(self, pod: Pod) -> None:
        i = self.node_of(pod)
        if i is not None and pod.key in self.node_pods[i]:
            self._unplace(pod, i)

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """The cluster's copy of a pod changed (old None: new; new None: deleted), for the
        extensions' indexes of pods."""
        for extension in self.extensions:
            extension.pod_changed(old, new)

    def _place(self, pod: Pod, node: int) -> None:
        pods = self.node_pods[node]
        if pod.key in pods:
            raise ValueError(f"pod {pod.key} is already on node {self.nodes[node].name}")
        vector = self.vector(pod)  # first: it may widen `requested` by a new resource column
        self.requested[node] += vector
        self.show(pod, node)

    def _unplace(self, pod: Pod, node: int) -> None:
        vector = self.vector(pod)
        self.requested[node] -= vector
        self.hide(pod, node)

    def show(self, pod: Pod, node: int) -> None:
        """Make a pod visible on its node to the pod-reading plugins (ports, affinity, spread)
        without touching capacity. Preemption's fast path pairs it with `hide`."""
        self.node_pods[node][pod.key] = pod
        self.located[pod.key] = node
        self.pod_counts.added(pod, node)
        if pod.anti_affinity:
            self.anti_affinity_pods[pod.key] = (pod, node)
            self.anti_affinity_terms.added(pod, node)
        if pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity:
            self.scoring_terms.added(pod, node)
        if pod.host_ports:
            self.port_holders.setdefault(node, {})[pod.key] = pod

    def hide(self, pod: Pod, node: int) -> None:
        del self.node_pods[node][pod.key]
        if self.located.get(pod.key) == node:
            del self.located[pod.key]
        self.pod_counts.removed(pod, node)
        if pod.anti_affinity:
            self.anti_affinity_terms.removed(pod, node)
        if pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity:
            self.scoring_terms.removed(pod, node)
        self.anti_affinity_pods.pop(pod.key, None)
        if pod.host_ports:
            holders = self.port_holders.get(node)
            if holders is not None:
                holders.pop(pod.key, None)
                if not holders:
                    del self.port_holders[node]
