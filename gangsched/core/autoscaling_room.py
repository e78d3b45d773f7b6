"""Can Karpenter still add what a gang lacks? (issue 32 item 1, a gang over the pool's limit.)

Karpenter provisions pod by pod up to each NodePool's `spec.limits`: for a gang larger than
what the pools may still add it launches part of what the gang needs, nothing binds, and since
every provisioning pass nominates those nodes for the still-`Unschedulable` members, they are
never consolidated. So before the scheduler marks a complete gang `Unschedulable` (the reason
Karpenter provisions for, its `FailedToSchedule`), it asks this bound: if, for some resource,
the members the gang still needs request more than the free allocatable of every existing node
plus the room of every NodePool that may launch nodes for them, no new node can make the gang
fit, and the members get `NodePoolLimitReached` instead, which Karpenter ignores.

The bound is deliberately loose, so that it never holds back a gang that could fit: it sums
free capacity over every node whose labels meet some member's nodeSelector (cordoned or not,
whatever its taints and affinities), counts a pool's room as its limit minus the smaller of
its `status.resources` and the capacity of its nodes seen, treats a resource a pool does not
limit as unbounded, and leaves a pool out only when its template contradicts a member's
nodeSelector.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gangsched.core.api.errors import InvalidObject, Problem
from gangsched.core.cycle import Gang
from gangsched.core.model import Node, Pod
from gangsched.core.quantity import QuantityError, format_bytes, format_milli, to_milli, to_units
from gangsched.core.resources import CPU, PODS, ResourceList
from gangsched.core.snapshot import Snapshot

#: The PodScheduled reason of a complete gang no node Karpenter may still add can make fit:
#: not `Unschedulable`, so Karpenter neither provisions nor nominates for its members.
NODE_POOL_LIMIT_REACHED = "NodePoolLimitReached"
#: The label Karpenter puts on every node it launches: the NodePool's name.
NODEPOOL_LABEL = "karpenter.sh/nodepool"
KIND = "NodePool"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `spec.template.spec.requirements` entry of a NodePool."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def excludes(self, value: str) -> bool:
        """Whether no node launched under this requirement can carry `key=value`."""
        if self.operator == "In":
            return value not in self.values
        if self.operator == "NotIn":
            return value in self.values
        return self.operator == "DoesNotExist"


@dataclass(frozen=True, slots=True)
class NodePool:
    """What the bound needs of a karpenter.sh/v1 NodePool."""

    name: str
    #: spec.limits, as integers (CPU in millicores); a resource not here is unbounded.
    limits: Mapping[str, int] = field(default_factory=dict)
    #: status.resources: what Karpenter counts as the pool's already.
    used: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()

    def may_launch_for(self, pod: Pod) -> bool:
        """False only when the template contradicts the pod's nodeSelector (sound: a pool
        that could launch for the pod is never left out)."""
        for key, value in pod.constraints.node_selector:
            if key in self.labels and self.labels[key] != value:
                return False
            if any(r.key == key and r.excludes(value) for r in self.requirements):
                return False
        return True

    def room(self, resource: str, seen: Mapping[str, int]) -> int | None:
        """What the pool may still add of `resource` (None: unbounded); `seen` is the
        capacity of its nodes in the cluster, in case status.resources runs ahead of them
        (NodeClaims launched whose nodes are not registered yet)."""
        if resource not in self.limits:
            return None
        used = min(self.used.get(resource, 0), seen.get(resource, 0))
        return max(0, self.limits[resource] - used)


def amount(resource: str, value: str | int | float) -> int:
    return to_milli(value) if resource == CPU else to_units(value)


def render(resource: str, value: int) -> str:
    if resource == CPU:
        return format_milli(value)
    if resource.endswith("memory") or resource.endswith("storage"):
        return format_bytes(value)
    return str(value)


def node_pool_from_raw(obj: Mapping[str, object]) -> NodePool:
    """A NodePool from its JSON; InvalidObject naming the field when a quantity is bad."""
    metadata = obj.get("metadata")
    name = str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    assert isinstance(spec, dict) and isinstance(status, dict)
    problems: list[Problem] = []

    def quantities(raw: object, path: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for resource, value in (raw if isinstance(raw, dict) else {}).items():
            try:
                out[str(resource)] = amount(str(resource), value)
            except QuantityError as exc:
                problems.append(Problem(KIND, "", name, f"{path}.{resource}", str(exc)))
        return out

    limits = quantities(spec.get("limits"), "spec.limits")
    used = quantities(status.get("resources"), "status.resources")
    if problems:
        raise InvalidObject(problems)
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    assert isinstance(template, dict)
    meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
    inner = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    assert isinstance(meta, dict) and isinstance(inner, dict)
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    assert isinstance(labels, dict)
    requirements = tuple(
        Requirement(
            key=str(r.get("key", "")),
            operator=str(r.get("operator", "")),
            values=tuple(str(v) for v in r.get("values") or ()),
        )
        for r in inner.get("requirements") or ()
        if isinstance(r, dict)
    )
    return NodePool(
        name=name,
        limits=limits,
        used=used,
        labels={str(k): str(v) for k, v in labels.items()},
        requirements=requirements,
    )


def gang_needs(gang: Gang) -> ResourceList:
    """A lower bound of what the gang still needs to reach minMember in every part: per
    resource, the sum of the smallest requests of as many pending members as are missing."""
    needs: ResourceList = {}
    for part in gang.parts:
        missing = part.group.min_member - part.quorum_bound
        if missing <= 0:
            continue
        resources = {name for pod in part.pending for name in pod.requests}
        for resource in resources:
            smallest = sorted(pod.requests.get(resource, 0) for pod in part.pending)[:missing]
            needs[resource] = needs.get(resource, 0) + sum(smallest)
    return {resource: value for resource, value in needs.items() if value > 0}


def free_capacity(snapshot: Snapshot, pending: Sequence[Pod]) -> ResourceList:
    """Free allocatable summed over the nodes whose labels meet some pending member's
    nodeSelector (negative free counts 0): a node no member may use helps no member. Cordoned
    nodes count (a member may tolerate the unschedulable taint), as do taints and affinities."""
    usable = [
        i
        for i, node in enumerate(snapshot.nodes)
        if any(
            all(node.labels.get(key) == value for key, value in pod.constraints.node_selector)
            for pod in pending
        )
    ]
    if not snapshot.columns or not usable:
        return {}
    totals = np.clip(snapshot.free()[usable], 0, None).sum(axis=0)
    return {name: int(totals[column]) for name, column in snapshot.columns.items()}


def pool_capacity(nodes: Iterable[Node]) -> dict[str, ResourceList]:
    """Allocatable of the nodes Karpenter launched, per NodePool (allocatable is at most the
    capacity status.resources counts, so a pool's room is never underestimated)."""
    seen: dict[str, ResourceList] = {}
    for node in nodes:
        pool = node.labels.get(NODEPOOL_LABEL)
        if pool is None:
            continue
        counted = seen.setdefault(pool, {})
        for resource, value in node.allocatable.items():
            counted[resource] = counted.get(resource, 0) + value
    return seen


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A resource the gang needs more of than existing free capacity plus pool room."""

    resource: str
    needs: int
    free: int
    room: int
    #: Each matching pool limiting the resource: (name, limit, room left).
    pools: tuple[tuple[str, int, int], ...]

    @property
    def message(self) -> str:
        r = self.resource
        pools = "; ".join(
            f"pool {name} at its {r} limit {render(r, limit)}"
            if left == 0
            else f"pool {name} has {render(r, left)} of its {r} limit {render(r, limit)} left"
            for name, limit, left in self.pools
        )
        return (
            f"the gang needs {render(r, self.needs)} {r}, more than the {render(r, self.free)} "
            f"free on its nodes and the {render(r, self.room)} the NodePools can still add: "
            f"{pools or 'no NodePool may launch nodes for it'}"
        )


def pool_limit_shortfall(
    gang: Gang,
    *,
    snapshot: Snapshot,
    pools: Sequence[NodePool],
    nodes: Iterable[Node],
) -> Shortfall | None:
    """The first resource (by name) that no new node can supply enough of, or None when
    the gang may fit once Karpenter adds nodes (or no NodePool exists: no Karpenter)."""
    if not pools:
        return None
    needs = gang_needs(gang)
    if not needs:
        return None
    pending = [pod for part in gang.parts for pod in part.pending]
    matching = [p for p in pools if any(p.may_launch_for(pod) for pod in pending)]
    free = free_capacity(snapshot, pending)
    seen = pool_capacity(nodes)
    for resource in sorted(needs):
        if resource == PODS:
            continue
        rooms = [(pool, pool.room(resource, seen.get(pool.name, {}))) for pool in matching]
        if any(room is None for _, room in rooms):
            continue
        room = sum(r for _, r in rooms if r is not None)
        have = free.get(resource, 0)
        if needs[resource] > have + room:
            return Shortfall(
                resource=resource,
                needs=needs[resource],
                free=have,
                room=room,
                pools=tuple(
                    (pool.name, pool.limits[resource], r) for pool, r in rooms if r is not None
                ),
            )
    return None
