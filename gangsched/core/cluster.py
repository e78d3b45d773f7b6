"""The scheduler's view of the cluster: objects by key, group membership, and the snapshot.

Both drivers feed it: the operator from its informers, `simulate` from manifests and from
carrying out its own decisions. Everything the cycle needs is derived here once, on change,
rather than recomputed per cycle: the snapshot is updated incrementally and group membership
is an index. What gang health reads is counted per group (`group_revisions`), so its review
once a second looks again only at the gangs that changed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from gangsched.core.api.network_topology import NetworkTopology, resolve_gather_rules
from gangsched.core.autoscaling_room import NodePool
from gangsched.core.composite.model import CompositePodGroup
from gangsched.core.composite.tree import (
    BrokenTree,
    children_index,
    in_tree,
    leaves_below,
    root_of,
)
from gangsched.core.model import (
    Dialect,
    DisruptionBudget,
    GangMode,
    GroupRef,
    Node,
    Pod,
    PodGroup,
    PriorityClass,
)
from gangsched.core.reservations import CycleExtension, Extensions
from gangsched.core.snapshot import Snapshot
from gangsched.core.topology.request import GatherRule, TopologyRequest


@dataclass(slots=True)
class ClusterState:
    scheduler_name: str = "gangsched"
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    groups: dict[GroupRef, PodGroup] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    budgets: dict[str, DisruptionBudget] = field(default_factory=dict)
    snapshot: Snapshot = field(default_factory=Snapshot)
    members: defaultdict[GroupRef, dict[str, Pod]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    #: scheduling.k8s.io/v1alpha3 CompositePodGroups: the inner levels of PodGroup trees.
    composites: dict[GroupRef, CompositePodGroup] = field(default_factory=dict)
    #: Koordinator's ClusterNetworkTopology layers (None while none exists): an annotation
    #: gang's network-topology-spec is resolved against them whenever its group is built.
    network_topology: NetworkTopology | None = None
    #: Karpenter's NodePools by name (empty without Karpenter): what new nodes may still add
    #: for a gang that fits nowhere (core/autoscaling_room.py).
    node_pools: dict[str, NodePool] = field(default_factory=dict)
    #: CompositePodGroup -> children, rebuilt on the next question after any group changes.
    _children: dict[GroupRef, list[GroupRef]] | None = None
    #: Bumped by every change that can give a pending gang room it did not have: a pod that
    #: held capacity gone, moved, relabelled or resized, a nomination dropped or moved, a
    #: node added or changed, a PodGroup new or reprioritised. Binds and new pods only take
    #: room, so they leave it alone (`preemption.futile` relies on exactly that).
    freeing: int = 0
    #: Per group of members (a PodGroup's ref, an annotation gang's): `revision` as of its
    #: last change gang health reads (core/gang_health.py): a member came, went, was bound,
    #: unbound or marked terminating, or the PodGroup object changed. A change moves the ref
    #: to the end, so the dict is ordered by revision and what changed since a revision is
    #: read from its end. Lone pods have no entry (gang health ignores them).
    group_revisions: dict[GroupRef, int] = field(default_factory=dict)
    #: The last revision handed out (0: none yet).
    revision: int = 0
    #: Bumped when the set of node names changes, or a node goes down or comes back
    #: (`Node.down`): a member whose node is gone or down no longer holds its place, so every
    #: gang's health may have changed (group_revisions cannot say which).
    node_set_revision: int = 0
    #: Bumped when group_revisions drops the entries of groups without members or object
    #: (it would grow with every gang ever seen otherwise): a reader then reviews every gang.
    group_revisions_pruned: int = 0
    #: Our pods without a node, neither terminating nor finished, gated or not: the pods a
    #: question about pending work walks (`pending_refs`, the queue gauges), a few among
    #: tens of thousands bound. Kept by every change below that can move a pod in or out.
    unbound: dict[str, Pod] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        *,
        scheduler_name: str,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        groups: Iterable[PodGroup] = (),
        priority_classes: Iterable[PriorityClass] = (),
        budgets: Iterable[DisruptionBudget] = (),
        namespaces: dict[str, dict[str, str]] | None = None,
        extensions: Iterable[CycleExtension[Snapshot]] = (),
        composites: Iterable[CompositePodGroup] = (),
        network_topology: NetworkTopology | None = None,
    ) -> ClusterState:
        """`extensions`: what cycles reserve beside the nodes (gangsched.core.reservations),
        e.g. the volume state and, where claims can be written back, the DRA state (pods
        with resource claims are unschedulable without it, never bound without devices)."""
        state = cls(scheduler_name=scheduler_name, network_topology=network_topology)
        state.composites = {composite.ref: composite for composite in composites}
        state.nodes = {node.name: node for node in nodes}
        state.pods = {pod.key: pod for pod in pods}
        state.groups = {group.ref: group for group in groups}
        state.priority_classes = {pc.name: pc for pc in priority_classes}
        state.budgets = {pdb.key: pdb for pdb in budgets}
        state.snapshot = Snapshot.build(state.nodes.values(), state.pods.values())
        state.snapshot.namespace_labels = dict(namespaces or {})
        state.snapshot.extensions = Extensions(extensions)
        for pod in state.pods.values():
            state._index(pod)
            state.snapshot.pod_changed(None, pod)
        return state

    # --------------------------------------------------------------------------- questions
    def is_pending(self, pod: Pod) -> bool:
        """Ours to schedule now: our schedulerName, no node, not being deleted, not finished,
        no scheduling gate left (a gated pod waits outside every cycle, as upstream's
        SchedulingGates PreEnqueue keeps it out of the queue)."""
        return self._unbound_ours(pod) and not pod.scheduling_gates

    def is_gated(self, pod: Pod) -> bool:
        """Ours, unbound, and held by spec.schedulingGates."""
        return self._unbound_ours(pod) and bool(pod.scheduling_gates)

    def _unbound_ours(self, pod: Pod) -> bool:
        return (
            pod.node_name is None
            and pod.scheduler_name == self.scheduler_name
            and not pod.terminating
            and not pod.is_finished
        )

    def group_of(self, pod: Pod) -> GroupRef:
        return pod.group or GroupRef(Dialect.LONE_POD, pod.namespace, pod.name)

    def pod_group(self, ref: GroupRef) -> PodGroup | None:
        """The PodGroup object, or the implicit one of a lone pod or annotation gang."""
        group = self.groups.get(ref)
        if group is not None:
            return group
        if ref.dialect is Dialect.LONE_POD:
            pod = self.pods.get(ref.key)
            if pod is None:
                return None
            return PodGroup(ref=ref, min_member=1, created=pod.created)
        if ref.dialect is Dialect.KOORDINATOR:
            members = list(self.members.get(ref, {}).values())
            if not members:
                return None
            # Koordinator defines the gang from the first member that announces it with a
            # valid size (later members' annotations are ignored): the oldest here.
            announcing = [p for p in members if p.annotation_min_available]
            first = min(announcing, key=lambda p: (p.created, p.name)) if announcing else None
            spec = first.gang_annotations if first is not None else None
            # Finished pods are no members (kube-scheduler's informer drops them): a gang
            # sized by its pod count does not wait for pods that already ran.
            live = [p for p in members if not p.is_finished]
            topology = self._annotation_topology(spec.gather) if spec else None
            return PodGroup(
                ref=ref,
                min_member=(spec.min_available or 1) if spec else max(len(live), 1),
                created=min(p.created for p in members),
                gang_group=spec.gang_group if spec else (),
                match_policy=spec.match_policy if spec else None,
                gang_mode=spec.mode if spec else GangMode.STRICT,
                total_number=spec.total_number if spec else None,
                topology=topology,
            )
        return None

    def _annotation_topology(self, rules: tuple[GatherRule, ...]) -> TopologyRequest | None:
        """An annotation gang's network-topology-spec on the current layers; a layer they do
        not define leaves the gang unplaced with the reason (a PodGroup object naming one is
        refused when read; the pods of an annotation gang are read before the layers may be)."""
        request, problems = resolve_gather_rules(rules, self.network_topology)
        if not problems:
            return request
        reason = "; ".join(f"{field}: {message}" for field, message in problems)
        return TopologyRequest(origin=problems[0][0], problem=reason)

    def _resolve_gang(self, ref: GroupRef) -> GroupRef:
        """A name in a GangGroup list: the PodGroup of that name, else the annotation gang."""
        if ref.dialect not in (Dialect.SIGS, Dialect.KOORDINATOR):
            return ref
        sigs = GroupRef(Dialect.SIGS, ref.namespace, ref.name)
        if sigs in self.groups:
            return sigs
        annotation = GroupRef(Dialect.KOORDINATOR, ref.namespace, ref.name)
        return annotation if annotation in self.members else ref

    def unit_of(self, ref: GroupRef) -> tuple[GroupRef, ...]:
        """The refs placed together with `ref`: its own GangGroup list, or itself alone.

        Directional, as Koordinator's Permit: when B lists A and B, B's members go only
        together with A satisfied (A's pending members are placed in the same cycle); A, which
        lists nothing, goes alone. A CompositePodGroup: every PodGroup of its tree."""
        if ref.dialect is Dialect.COMPOSITE:
            return tuple(leaves_below(ref, self.tree_children()))
        group = self.pod_group(ref) if ref.dialect is Dialect.KOORDINATOR else self.groups.get(ref)
        if group is None or not group.gang_group:
            return (ref,)
        refs = {self._resolve_gang(listed) for listed in group.gang_group} | {ref}
        return tuple(sorted(refs, key=_ref_order)) if len(refs) > 1 else (ref,)

    def tree_children(self) -> dict[GroupRef, list[GroupRef]]:
        """CompositePodGroup -> its children (PodGroups and CompositePodGroups), in order."""
        if self._children is None:
            self._children = children_index(self.groups, self.composites)
        return self._children

    def tree_root(self, ref: GroupRef) -> GroupRef | BrokenTree:
        """The root of the tree PodGroup `ref` belongs to (itself when it has no parent)."""
        return root_of(ref, self.groups, self.composites)

    def unit_key(self, ref: GroupRef) -> GroupRef:
        """The queue key of `ref`'s unit: a member whose own unit is the same one (so gangs
        that list each other share one entry), else `ref` itself (B listing A and B while A
        lists nothing is B's own entry; A keeps one of its own). A PodGroup in a tree of
        CompositePodGroups: the tree's root, or itself while the tree is broken."""
        if in_tree(ref, self.groups) or ref.dialect is Dialect.COMPOSITE:
            root = self.tree_root(ref)
            return root if isinstance(root, GroupRef) else ref
        unit = self.unit_of(ref)
        if len(unit) == 1:
            return ref
        return next((other for other in unit if self.unit_of(other) == unit), ref)

    def pending_refs(self) -> set[GroupRef]:
        return {self.group_of(pod) for pod in self.unbound.values() if self.is_pending(pod)}

    def group_members(self, ref: GroupRef) -> list[Pod]:
        if ref.dialect is Dialect.LONE_POD:
            pod = self.pods.get(ref.key)
            # A pod that has joined a group since is that group's member, not a lone pod.
            return [pod] if pod is not None and pod.group is None else []
        return list(self.members.get(ref, {}).values())

    # ----------------------------------------------------------------------------- changes
    def upsert_pod(self, pod: Pod) -> None:
        old = self.pods.get(pod.key)
        if old is not None and _frees_room(old, pod):
            self.freeing += 1
        if old is not None:
            self._unindex(old)
            self.snapshot.unplace(old)
            self.snapshot.clear_nomination(old.key)
            self.snapshot.commit()
        self.pods[pod.key] = pod
        self._index(pod)
        self.snapshot.pod_changed(old, pod)
        if old is not None and old.group != pod.group:
            self._touch(old.group)
        self._touch(pod.group)
        if pod.holds_resources and pod.node_name in self.snapshot.index:
            self.snapshot.place(pod, self.snapshot.index[pod.node_name])

    def delete_pod(self, key: str) -> Pod | None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            if pod.node_name is not None or pod.nominated_node_name is not None:
                self.freeing += 1
            self._unindex(pod)
            self._touch(pod.group)
            self.snapshot.pod_changed(pod, None)
            self.snapshot.unplace(pod)
            self.snapshot.clear_nomination(key)
            self.snapshot.commit()
        return pod

    def bind(self, pod: Pod, node_name: str) -> None:
        """Record a placement decided by a cycle (its snapshot entry is already committed)."""
        pod.node_name = node_name
        self.unbound.pop(pod.key, None)
        self._touch(pod.group)
        if pod.nominated_node_name is not None:
            self.freeing += pod.nominated_node_name != node_name  # the reservation moved
            pod.nominated_node_name = None
        self.snapshot.clear_nomination(pod.key)
        self.snapshot.commit()

    def forget(self, pod: Pod) -> None:
        """Undo an assumed placement whose bind failed."""
        self.freeing += 1
        self.snapshot.unplace(pod)
        pod.node_name = None
        self._keep_unbound(pod)
        self._touch(pod.group)

    def nominate(self, pod: Pod, node_name: str | None) -> None:
        if pod.nominated_node_name not in (None, node_name):
            self.freeing += 1
        pod.nominated_node_name = node_name
        if node_name is None or node_name not in self.snapshot.index:
            self.snapshot.clear_nomination(pod.key)
        else:
            self.snapshot.nominate(pod, self.snapshot.index[node_name])
        self.snapshot.commit()

    def set_terminating(self, pod: Pod, terminating: bool) -> None:
        """Mark a pod (not) terminating in place, e.g. when its eviction is sent or failed.
        The snapshot counts terminating pods apart (topology spread ignores them), so the pod
        is taken off and put back around the change; its capacity stays where it is."""
        node = self.snapshot.placed_at(pod)
        if node is not None:
            self.snapshot.hide(pod, node)
        pod.terminating = terminating
        self._keep_unbound(pod)
        self._touch(pod.group)
        if node is not None:
            self.snapshot.show(pod, node)

    def upsert_node(self, node: Node) -> None:
        self.freeing += 1
        old = self.nodes.get(node.name)
        if old is None or old.down != node.down:
            self.node_set_revision += 1
        self.nodes[node.name] = node
        self.snapshot.update_node(node)

    def replace_nodes(self, nodes: list[Node]) -> None:
        """Every node anew (a relist): any of them may have room it did not have."""
        self.freeing += 1
        old = self.nodes
        self.nodes = {node.name: node for node in nodes}
        if self.nodes.keys() != old.keys() or _down(self.nodes) != _down(old):
            self.node_set_revision += 1
        self.snapshot.set_nodes(nodes)

    def replace_namespace_labels(self, labels: dict[str, dict[str, str]]) -> None:
        """Every namespace's labels anew (a relist); see set_namespace_labels."""
        if self.snapshot.namespace_labels != labels:
            self.freeing += 1
            self.snapshot.namespace_labels = labels

    def set_namespace_labels(self, name: str, labels: dict[str, str] | None) -> None:
        """A namespace's labels (None: gone); namespace selectors of affinity terms read them,
        so a change may lift an anti-affinity conflict."""
        known = self.snapshot.namespace_labels
        if known.get(name) == labels:
            return
        self.freeing += 1
        if labels is None:
            known.pop(name, None)
        else:
            known[name] = labels

    def delete_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.node_set_revision += 1
        self.snapshot.remove_node(name)

    def upsert_group(self, group: PodGroup) -> None:
        old = self.groups.get(group.ref)
        if old is None or old.parent != group.parent or old.created != group.created:
            self._children = None
        if old is None or old.priority != group.priority:
            self.freeing += 1  # its pods' priority as victims may have changed
        self.groups[group.ref] = group
        self._touch(group.ref)

    def delete_group(self, ref: GroupRef) -> None:
        if self.groups.pop(ref, None) is not None:
            self._touch(ref)
            self._children = None
            self.freeing += 1  # its pods' priority as victims is their own again

    def upsert_composite(self, composite: CompositePodGroup) -> None:
        self.composites[composite.ref] = composite
        self._children = None

    def delete_composite(self, ref: GroupRef) -> None:
        if self.composites.pop(ref, None) is not None:
            self._children = None

    def changed_since(self, revision: int) -> Iterator[GroupRef]:
        """The groups changed after `revision` (group_revisions), newest first: read from
        the end of the dict, so a reader pays for what changed, not for every group."""
        for ref, changed in reversed(self.group_revisions.items()):
            if changed <= revision:
                return
            yield ref

    def _touch(self, ref: GroupRef | None) -> None:
        """`ref` changed as gang health sees it (group_revisions)."""
        if ref is None or ref.dialect is Dialect.LONE_POD:
            return
        self.revision += 1
        revisions = self.group_revisions
        revisions.pop(ref, None)
        revisions[ref] = self.revision
        if len(revisions) > 2 * (len(self.members) + len(self.groups)) + 1024:
            # Mostly groups long gone: drop those (amortised, as a dict grows).
            kept = {r: n for r, n in revisions.items() if r in self.members or r in self.groups}
            self.group_revisions = kept
            self.group_revisions_pruned += 1

    def _index(self, pod: Pod) -> None:
        if pod.group is not None:
            self.members[pod.group][pod.key] = pod
        self._keep_unbound(pod)
        if pod.nominated_node_name and pod.node_name is None:
            index = self.snapshot.index.get(pod.nominated_node_name)
            if index is not None:
                self.snapshot.nominate(pod, index)
                self.snapshot.commit()

    def _keep_unbound(self, pod: Pod) -> None:
        if self._unbound_ours(pod):
            self.unbound[pod.key] = pod
        else:
            self.unbound.pop(pod.key, None)

    def _unindex(self, pod: Pod) -> None:
        self.unbound.pop(pod.key, None)
        if pod.group is not None:
            members = self.members.get(pod.group)
            if members is not None:
                members.pop(pod.key, None)
                if not members:
                    del self.members[pod.group]


def _frees_room(old: Pod, new: Pod) -> bool:
    """Whether replacing `old` by `new` may leave room another pod could use (a pending pod
    bound, or the status of a running one updated, never does)."""
    held = old.nominated_node_name
    # A reservation dropped or moved frees room, unless the pod was bound where it was held.
    if held is not None and held not in (new.nominated_node_name, new.node_name):
        return True
    if old.node_name is None:
        return False
    return (
        new.node_name != old.node_name
        or not new.holds_resources
        or new.terminating != old.terminating
        or new.labels != old.labels
        or new.requests != old.requests
        or new.host_ports != old.host_ports
    )


def _ref_order(ref: GroupRef) -> tuple[str, str, str]:
    return ref.namespace, ref.name, ref.dialect.value


def _down(nodes: dict[str, Node]) -> set[str]:
    return {name for name, node in nodes.items() if node.down}
