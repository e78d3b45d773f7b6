"""One topology domain for a gang's new nodes (issue 32 item 1): Karpenter reads each pod's
node affinity, not the PodGroup, so a gang required in one domain (zone, rack) gets nodes in
several unless every member's affinity names the same domain before Karpenter sees it.

The API server lets a pod's required node affinity be narrowed only while the pod has
scheduling gates (KEP-3838). So members created with the gate gangsched owns,
`gangsched.io/topology-domain`, are held until all `minMember` of them exist; then this module
picks one domain and states, as one value, which members to narrow and to which domain. The
edge (edge/domain_pinning.py) writes the narrowing to every member first and lifts the gate
only once all narrowings are in: a narrowing cannot be undone, and a member ungated in another
domain than the rest would break the gang.

The domain: the one bound members already use; else one whose existing free capacity (summed,
a loose estimate) covers what the gang needs; else one a matching NodePool may launch in (the
values its template allows for the key, or every domain the nodes show when it does not
restrict the key). Ties go to the most free CPU, then the name, so every review picks the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gangsched.core.autoscaling_room import NodePool, pool_capacity
from gangsched.core.cluster import ClusterState
from gangsched.core.model import GroupRef, Node, Pod, PodGroup
from gangsched.core.resources import CPU, PODS, ResourceList

#: The scheduling gate gangsched owns: a member created with it (and no other gate) waits
#: until gangsched has narrowed its node affinity to the gang's domain, then gangsched lifts it.
DOMAIN_GATE = "gangsched.io/topology-domain"
#: Events on the PodGroup: the domain chosen, and a narrowing or gate removal that failed.
DOMAIN_CHOSEN = "TopologyDomainChosen"
DOMAIN_PIN_FAILED = "TopologyDomainPinFailed"


@dataclass(frozen=True, slots=True)
class DomainPin:
    """Narrow every member to `key In [domain]`, then lift DOMAIN_GATE from each."""

    group: GroupRef
    key: str
    domain: str
    #: (pod key, uid) of every gated member, in name order.
    members: tuple[tuple[str, str], ...]
    #: Why this domain, for the event.
    why: str

    @property
    def note(self) -> str:
        return (
            f"members {self.key}={self.domain} ({self.why}): their node affinity is narrowed "
            f"to it and the {DOMAIN_GATE} gate lifted"
        )


def held_by_domain_gate(pod: Pod) -> bool:
    return pod.scheduling_gates == (DOMAIN_GATE,)


def domain_pins(cluster: ClusterState) -> list[DomainPin]:
    """Every gang ready to be pinned: its PodGroup requires one domain, and at least
    minMember members exist, the unbound ones all gangsched's and held by DOMAIN_GATE alone."""
    pins: list[DomainPin] = []
    for ref in sorted(cluster.members, key=lambda r: (r.dialect.value, r.namespace, r.name)):
        group = cluster.pod_group(ref)
        if group is None or group.topology is None or not group.topology.required:
            continue
        pin = pin_for(cluster, group, cluster.group_members(ref))
        if pin is not None:
            pins.append(pin)
    return pins


def pin_for(cluster: ClusterState, group: PodGroup, members: Sequence[Pod]) -> DomainPin | None:
    assert group.topology is not None and group.topology.required
    key = group.topology.required
    live = [p for p in members if not p.is_finished and not p.terminating]
    bound = [p for p in live if p.node_name is not None]
    unbound = [p for p in live if p.node_name is None]
    gated = [p for p in unbound if cluster.is_gated(p) and held_by_domain_gate(p)]
    if not gated or len(gated) != len(unbound) or len(bound) + len(gated) < group.min_member:
        return None
    choice = choose_domain(
        key=key,
        gated=gated,
        bound_domains={
            cluster.nodes[p.node_name].labels.get(key, "")
            for p in bound
            if p.node_name in cluster.nodes
        },
        needs=smallest_needs(gated, max(0, group.min_member - len(bound))),
        nodes=cluster.snapshot.nodes,
        free=free_rows(cluster),
        pools=list(cluster.node_pools.values()),
        all_nodes=cluster.nodes.values(),
    )
    if choice is None:
        return None
    domain, why = choice
    members_ = tuple(sorted((p.key, p.uid) for p in gated))
    return DomainPin(group=group.ref, key=key, domain=domain, members=members_, why=why)


def free_rows(cluster: ClusterState) -> list[ResourceList]:
    """Free allocatable per snapshot node (negative counts 0)."""
    snapshot = cluster.snapshot
    if not snapshot.nodes or not snapshot.columns:
        return [{} for _ in snapshot.nodes]
    free = np.clip(snapshot.free(), 0, None)
    return [
        {name: int(free[i][column]) for name, column in snapshot.columns.items()}
        for i in range(len(snapshot.nodes))
    ]


def smallest_needs(pods: Sequence[Pod], count: int) -> ResourceList:
    """Per resource, the sum of the `count` smallest requests: a lower bound of the gang."""
    needs: ResourceList = {}
    for resource in {name for pod in pods for name in pod.requests if name != PODS}:
        needs[resource] = sum(sorted(pod.requests.get(resource, 0) for pod in pods)[:count])
    return {resource: value for resource, value in needs.items() if value > 0}


def allowed(pod: Pod, key: str, domain: str) -> bool:
    """Whether the pod's own nodeSelector and required terms leave `key=domain` possible."""
    for label, value in pod.constraints.node_selector:
        if label == key and value != domain:
            return False
    terms = pod.constraints.required_terms
    if not terms:
        return True
    return any(
        all(r.matches({key: domain}) for r in term.match_expressions if r.key == key)
        for term in terms
    )


def narrowed_to(pod: Pod) -> tuple[str, str] | None:
    """(key, domain) when every required term of the pod holds `key In [domain]`."""
    terms = pod.constraints.required_terms
    if not terms:
        return None
    found: set[tuple[str, str]] | None = None
    for term in terms:
        here = {
            (r.key, r.values[0])
            for r in term.match_expressions
            if r.operator == "In" and len(r.values) == 1
        }
        found = here if found is None else found & here
    return min(found) if found else None


def choose_domain(
    *,
    key: str,
    gated: Sequence[Pod],
    bound_domains: set[str],
    needs: ResourceList,
    nodes: Sequence[Node],
    free: Sequence[ResourceList],
    pools: Sequence[NodePool],
    all_nodes: Iterable[Node],
) -> tuple[str, str] | None:
    """The domain and why; None when no domain is known (the members stay gated)."""
    if bound_domains:
        if len(bound_domains) == 1 and "" not in bound_domains:
            return next(iter(bound_domains)), "where its bound members run"
        return None
    earlier = sorted(d[1] for d in map(narrowed_to, gated) if d is not None and d[0] == key)
    if earlier:
        return earlier[0], "chosen before, and written to some members already"
    by_domain: dict[str, ResourceList] = {}
    for node, row in zip(nodes, free, strict=True):
        domain = node.labels.get(key)
        if domain is None or not any(usable(node, pod) for pod in gated):
            continue
        total = by_domain.setdefault(domain, {})
        for resource, value in row.items():
            total[resource] = total.get(resource, 0) + value

    def possible(domain: str) -> bool:
        return all(allowed(pod, key, domain) for pod in gated)

    def order(domain: str) -> tuple[int, str]:
        return -by_domain.get(domain, {}).get(CPU, 0), domain

    fitting = [
        d
        for d, have in by_domain.items()
        if possible(d) and all(have.get(r, 0) >= v for r, v in needs.items())
    ]
    if fitting:
        return min(fitting, key=order), "the gang fits its existing free capacity"
    launchable = pool_domains(key, gated, needs, pools, all_nodes, known=set(by_domain))
    candidates = [d for d in launchable if possible(d)]
    if candidates:
        domain = min(candidates, key=order)
        return domain, f"NodePool {', '.join(sorted(launchable[domain]))} may launch there"
    return None


def usable(node: Node, pod: Pod) -> bool:
    return all(node.labels.get(k) == v for k, v in pod.constraints.node_selector)


def pool_domains(
    key: str,
    gated: Sequence[Pod],
    needs: ResourceList,
    pools: Sequence[NodePool],
    all_nodes: Iterable[Node],
    *,
    known: set[str],
) -> dict[str, set[str]]:
    """Domain -> the matching pools with room that may launch nodes there."""
    seen = pool_capacity(all_nodes)
    out: dict[str, set[str]] = {}
    for pool in pools:
        if not any(pool.may_launch_for(pod) for pod in gated):
            continue
        if any(pool.room(r, seen.get(pool.name, {})) == 0 for r in needs):
            continue
        for domain in launch_domains(pool, key, known):
            out.setdefault(domain, set()).add(pool.name)
    return out


def launch_domains(pool: NodePool, key: str, known: set[str]) -> set[str]:
    """The values of `key` the pool's template allows: its label, its `In` requirements, or
    (when it does not restrict the key) every domain the nodes show."""
    if key in pool.labels:
        domains = {pool.labels[key]}
    else:
        restricting = [r for r in pool.requirements if r.key == key and r.operator == "In"]
        domains = set(restricting[0].values) if restricting else set(known)
        for r in restricting[1:]:
            domains &= set(r.values)
    return {
        d for d in domains if not any(r.key == key and r.excludes(d) for r in pool.requirements)
    }


# ----------------------------------------------------------------------- the pod's affinity
def domain_expression(key: str, domain: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": [domain]}


def narrowed_terms(affinity: Mapping[str, Any] | None, key: str, domain: str) -> list[Any]:
    """The pod's required nodeSelectorTerms with `key In [domain]` appended to each term's
    matchExpressions (the API server accepts only additions to existing terms while the
    pod is gated), or one term with it alone when the pod has none."""
    expression = domain_expression(key, domain)
    terms = required_selector_terms(affinity)
    if not terms:
        return [{"matchExpressions": [expression]}]
    out: list[Any] = []
    for raw in terms:
        term = dict(raw) if isinstance(raw, Mapping) else {}
        expressions = list(term.get("matchExpressions") or [])
        if expression not in expressions:
            expressions.append(expression)
        term["matchExpressions"] = expressions
        out.append(term)
    return out


def required_selector_terms(affinity: Mapping[str, Any] | None) -> list[Any]:
    node_affinity = (affinity or {}).get("nodeAffinity")
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, Mapping)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    return list(terms) if isinstance(terms, list) else []


def is_narrowed(affinity: Mapping[str, Any] | None, key: str, domain: str) -> bool:
    terms = required_selector_terms(affinity)
    expression = domain_expression(key, domain)
    return bool(terms) and all(
        isinstance(t, Mapping) and expression in (t.get("matchExpressions") or []) for t in terms
    )
