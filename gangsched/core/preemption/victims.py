"""Potential preemption victims, grouped into the units that are evicted together.

KEP-5710 makes the preemption unit explicit: a pod of a DisruptionMode All PodGroup cannot be
evicted on its own, because the rest of its group would keep running without making progress.
So the unit is either one pod (no group, or a Single-mode group) or the whole All-mode group,
all its bound pods on every node. A unit's priority is its PodGroup's priority when the group
names one (that is the priority the group was admitted with), else the pod's own; an All-mode
unit is a victim only when the whole unit is of lower priority than the preemptor.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.tree import highest_all_ancestor, leaves_below
from gangsched.core.cycle import Gang
from gangsched.core.model import PREEMPT_NEVER, DisruptionMode, GroupRef, Pod, PodGroup
from gangsched.core.snapshot import Snapshot

_FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Quorum:
    """A Single-mode PodGroup's quorum as preemption sees it: evicting pods one by one is
    allowed, but once fewer than `min_member` stay bound the rest run without making progress
    (a gang is a workload: upstream's and Koordinator's preemption reason in workloads)."""

    ref: GroupRef
    min_member: int
    #: Members bound now (not terminating, not finished), on any node.
    bound: int

    def stranded(self, evicted: int) -> int:
        """Members left running without a quorum when `evicted` of them go; 0 when the group
        keeps its quorum or had already lost it (its remnants were stranded before)."""
        left = self.bound - evicted
        return max(left, 0) if self.bound >= self.min_member > left else 0


@dataclass(slots=True, eq=False)
class VictimUnit:
    """One thing preemption may evict: a single pod, or an All-mode group as a whole."""

    #: Position in the list of potential victims, which is sorted by key: a stable identity
    #: for sets and the final tie-break of every order.
    index: int
    #: "ns/name" of the pod, or of the All-mode PodGroup.
    key: str
    #: Every pod evicted with the unit (an All-mode group's pods on every node).
    pods: tuple[Pod, ...]
    #: The pods the snapshot holds, with their node index: what a dry run takes away.
    placed: tuple[tuple[Pod, int], ...]
    priority: int
    #: The All-mode PodGroup, or None for a single pod.
    group: GroupRef | None
    #: Start time of the unit: its oldest pod (victims are compared youngest first).
    created: float
    #: PodGroups (any mode) that lose a pod when the unit goes: the groups-disrupted count.
    groups: tuple[GroupRef, ...]
    #: Node indices the unit occupies (distinct).
    nodes: tuple[int, ...]
    #: For a pod of a Single-mode PodGroup: the group's quorum (see `Quorum`).
    quorum: Quorum | None = None

    @property
    def is_group(self) -> bool:
        return self.group is not None

    @property
    def size(self) -> int:
        return len(self.pods)

    @property
    def workload_count(self) -> int:
        """Workloads the unit disrupts on its own: its PodGroups, or 1 for a lone pod (a
        workload of its own); `cost.workloads` counts a set's distinct ones."""
        return len(self.groups) or 1

    def __repr__(self) -> str:
        return f"VictimUnit({self.key}, prio={self.priority}, pods={self.size})"


def part_priority(group: PodGroup, pods: Iterable[Pod]) -> int:
    """A PodGroup's priority: its own when it names a class, else its pods' (validated equal)."""
    if group.priority is not None:
        return group.priority
    return max((pod.priority for pod in pods), default=0)


def gang_priority(gang: Gang) -> int:
    """The preemptor's priority. A GangGroup whose parts disagree (a KEP non-goal) preempts
    with its lowest part priority, so no part ever evicts a pod of its own priority or more."""
    return min(
        (part_priority(part.group, part.pending or part.bound) for part in gang.parts),
        default=0,
    )


def preemption_disabled(gang: Gang, cluster: ClusterState) -> bool:
    """preemptionPolicy Never on any pending pod, on a PodGroup, or on a group's class; for a
    tree, on its root CompositePodGroup (upstream takes the policy from the root)."""
    root = gang.tree.composite if gang.tree is not None else None
    if root is not None:
        pc = cluster.priority_classes.get(root.priority_class_name)
        policy = root.preemption_policy or (pc.preemption_policy if pc is not None else None)
        if policy == PREEMPT_NEVER:
            return True
    for part in gang.parts:
        if part.group.preemption_policy == PREEMPT_NEVER:
            return True
        pc = cluster.priority_classes.get(part.group.priority_class_name)
        if (
            part.group.preemption_policy is None
            and pc is not None
            and pc.preemption_policy == PREEMPT_NEVER
        ):
            return True
        if any(pod.preemption_policy == PREEMPT_NEVER for pod in part.pending):
            return True
    return False


def victim_priority(pod: Pod, cluster: ClusterState) -> int:
    """Priority of a running pod as a victim: its PodGroup's, if the group names one."""
    if pod.group is not None:
        group = cluster.groups.get(pod.group)
        if group is not None and group.priority is not None:
            return group.priority
    return pod.priority


@dataclass(slots=True)
class VictimTable:
    """The potential victims, plus one entry per victim pod the snapshot holds (owning
    unit, node index, requests), gathered in the same pass for the array-based searches."""

    units: list[VictimUnit]
    owners: list[VictimUnit]
    nodes: list[int]
    requests: list[dict[str, int]]


def collect_victims(gang: Gang, cluster: ClusterState, priority: int) -> list[VictimUnit]:
    """Every unit of strictly lower priority than `priority` that preemption may evict."""
    return collect_victim_table(gang, cluster, priority).units


def collect_victim_table(gang: Gang, cluster: ClusterState, priority: int) -> VictimTable:
    """Every unit of strictly lower priority than `priority` that preemption may evict.

    Only pods that hold capacity in the snapshot and are not already terminating count; the
    preemptor's own gang is never a victim. One pass over the snapshot's pods with group
    lookups memoised per GroupRef (object, then value), since this runs on clusters of
    50,000 pods.
    """
    snap: Snapshot = cluster.snapshot
    own_refs = {part.group.ref for part in gang.parts}
    # The gang's bound members are excluded through their group ref; its pending pods are
    # not in the snapshot. Checking identities as well costs little and guards odd states.
    own_ids = {id(pod) for part in gang.parts for pod in (*part.pending, *part.bound)}
    groups = cluster.groups
    composites = cluster.composites
    #: id(GroupRef) -> (ref is the gang's own, the PodGroup or None, the All-mode unit or None,
    #: the Single-mode group's quorum or None)
    seen_refs: dict[int, tuple[bool, PodGroup | None, GroupRef | None, Quorum | None]] = {}
    # Pods read from the API server each carry their own GroupRef object: the memo by
    # object is the fast path, the one by value keeps the group work once per group (its
    # quorum counts every member: once per pod, that was members x pods per search).
    by_value: dict[GroupRef, tuple[bool, PodGroup | None, GroupRef | None, Quorum | None]] = {}
    all_mode_kind = DisruptionMode.ALL
    singles: list[VictimUnit] = []
    owners: list[VictimUnit] = []
    pod_nodes: list[int] = []
    requests: list[dict[str, int]] = []
    all_mode: dict[GroupRef, list[tuple[Pod, int]]] = {}
    for i, node_pods in enumerate(snap.node_pods):
        node_tuple = (i,)
        for key, pod in node_pods.items():
            ref = pod.group
            prio = pod.priority
            if ref is None and prio >= priority:
                continue  # the common "not a victim" case, decided first
            if pod.terminating or pod.phase in _FINISHED or id(pod) in own_ids:
                continue
            groups_of: tuple[GroupRef, ...] = ()
            quorum = None
            if ref is not None:
                cached = seen_refs.get(id(ref))
                if cached is None:
                    cached = by_value.get(ref)
                    if cached is not None:
                        seen_refs[id(ref)] = cached
                if cached is None:
                    found = groups.get(ref)
                    unit_ref: GroupRef | None = None
                    if found is not None and found.parent is not None:
                        # KEP-6012: the highest DisruptionMode All level above goes whole.
                        unit_ref = highest_all_ancestor(ref, groups, composites)
                    elif found is not None and found.disruption_mode is all_mode_kind:
                        unit_ref = ref
                    quorum = (
                        _quorum(found, cluster)
                        if found is not None and unit_ref is None and ref not in own_refs
                        else None
                    )
                    cached = (ref in own_refs, found, unit_ref, quorum)
                    seen_refs[id(ref)] = cached
                    by_value[ref] = cached
                own, group, unit_ref, quorum = cached
                if own:
                    continue
                if group is not None:
                    if unit_ref is not None:
                        all_mode.setdefault(unit_ref, []).append((pod, i))
                        continue
                    if group.priority is not None:
                        prio = group.priority
                groups_of = (ref,)
            if prio >= priority:
                continue
            unit = VictimUnit(
                -1, key, (pod,), ((pod, i),), prio, None, pod.created, groups_of, node_tuple, quorum
            )
            singles.append(unit)
            owners.append(unit)
            pod_nodes.append(i)
            requests.append(pod.requests)
    units = singles
    children = cluster.tree_children() if composites else {}
    for ref, placed in all_mode.items():
        composite = composites.get(ref)
        if composite is not None:
            prio = composite.priority
            members = [
                pod for leaf in leaves_below(ref, children) for pod in cluster.group_members(leaf)
            ]
        else:
            prio = part_priority(groups[ref], (pod for pod, _ in placed))
            members = cluster.group_members(ref)
        if prio >= priority:
            continue
        evicted = [pod for pod, _ in placed]
        included = {pod.key for pod in evicted}
        for pod in members:
            # Members bound to nodes the snapshot does not know still go with their group.
            if pod.key in included or pod.node_name is None or pod.terminating:
                continue
            if pod.is_finished:
                continue
            evicted.append(pod)
        unit = VictimUnit(
            index=-1,
            key=ref.key,
            pods=tuple(evicted),
            placed=tuple(placed),
            priority=prio,
            group=ref,
            created=min(pod.created for pod in evicted),
            # A tree disrupts its CompositePodGroup as well as each PodGroup losing pods.
            groups=(
                (ref, *sorted({p.group for p in evicted if p.group is not None}, key=str))
                if composite is not None
                else (ref,)
            ),
            nodes=tuple(sorted({i for _, i in placed})),
        )
        units.append(unit)
        for pod, i in placed:
            owners.append(unit)
            pod_nodes.append(i)
            requests.append(pod.requests)
    # Stable: a pod and an All group with the same "ns/name" keep pods first.
    units.sort(key=attrgetter("key"))
    for index, unit in enumerate(units):
        unit.index = index
    return VictimTable(units, owners, pod_nodes, requests)


def _quorum(group: PodGroup, cluster: ClusterState) -> Quorum | None:
    """The quorum of a Single-mode group, None when losing members cannot strand any."""
    if group.min_member <= 1:
        return None
    bound = sum(
        1
        for pod in cluster.group_members(group.ref)
        if pod.node_name is not None and not pod.terminating and not pod.is_finished
    )
    return Quorum(group.ref, group.min_member, bound)


def stranded_by(pods: Iterable[Pod], cluster: ClusterState) -> int:
    """Members of Single-mode groups left running below their quorum once `pods` go (the
    same count as `cost.stranded_members`, from evicted pods rather than victim units)."""
    evicted: dict[GroupRef, int] = {}
    for pod in pods:
        if pod.group is not None:
            evicted[pod.group] = evicted.get(pod.group, 0) + 1
    total = 0
    for ref, count in evicted.items():
        group = cluster.groups.get(ref)
        if group is None or group.disruption_mode is DisruptionMode.ALL:
            continue
        quorum = _quorum(group, cluster)
        total += quorum.stranded(count) if quorum is not None else 0
    return total


# ---------------------------------------------------------------------------------- orders
# Every order ends with the unit key so that results never depend on dict iteration order.


def importance_key(unit: VictimUnit, violating: frozenset[int]) -> tuple[object, ...]:
    """KEP-5710's reprieve order, most important first: PDB-violating victims first, then
    higher priority, then groups before single pods, then older first."""
    return (
        unit.index not in violating,
        -unit.priority,
        not unit.is_group,
        unit.created,
        unit.key,
    )


def costliest_key(unit: VictimUnit, violating: frozenset[int]) -> tuple[object, ...]:
    """mincost's reprieve order: the victims whose eviction costs most by the documented
    order are offered back first (PDB violators, higher priority, more pods, older)."""
    return (
        unit.index not in violating,
        -unit.priority,
        -unit.size,
        -unit.workload_count,
        unit.created,
        unit.key,
    )


def cheapest_key(unit: VictimUnit, violating: frozenset[int]) -> tuple[object, ...]:
    """Removal order for the steered searches: cheapest victims first."""
    return (
        unit.index in violating,
        unit.priority,
        unit.size,
        unit.workload_count,
        -unit.created,
        unit.key,
    )
