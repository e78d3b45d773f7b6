"""Cheap per-domain bounds for a constrained gang: which domains are worth a real cycle.

Only the real gang cycle says whether a gang fits a domain; these bounds say which domains
it is worth running on, and in what order. They never reject a domain the cycle would
accept: free capacity is counted node by node, and only on the nodes the members may use at
all (the node-static filters: nodeSelector, required node affinity, taints, cordons, OS,
nodeName). A domain whose nodes all fail those filters is therefore dropped before any
cycle runs, instead of using up the evaluation budget (a gang pinned to one GPU pool among
forty CPU racks still finds its rack). Array operations over all nodes grouped by domain
keep thousands of domains at a few passes each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gangsched.core.framework import Framework
from gangsched.core.model import Pod
from gangsched.core.resources import PODS
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.topology.domains import Domain
from gangsched.core.topology.report import FILTERED, LACKS, TOO_SMALL


@dataclass(slots=True)
class DomainBound:
    """Upper bounds for one class of members in one domain."""

    #: Members that fit by free capacity on the nodes they may use.
    pods: int
    #: MostAllocated over the domain if every pending member were placed there.
    score: float
    #: A resource the members request that no node of the domain has.
    lacks: str = ""
    #: Why too few members may use any node of the domain (a node-static filter's reason).
    barred: str = ""

    @property
    def outcome(self) -> str:
        return LACKS if self.lacks else FILTERED if self.barred else TOO_SMALL

    @property
    def cause(self) -> str:
        """What the domain lacks, without numbers: the key that groups domains in messages."""
        return self.lacks or self.barred

    def describe(self) -> str:
        if self.lacks:
            return f"lacks {self.lacks}"
        if self.barred:
            return f"no node the members may use: {self.barred}"
        return f"too small: at most {self.pods} pod(s) fit by free capacity"


def resource_weights(
    pending: Sequence[Pod], snap: Snapshot, resources: Mapping[str, float]
) -> dict[int, float]:
    """Column weights of the domain score: the configured resources, and weight 1 for any
    other resource the members request (a GPU gang is scored on its GPUs too)."""
    weights = {snap.columns[n]: w for n, w in resources.items() if n in snap.columns}
    for pod in pending:
        for name in pod.requests:
            col = snap.columns.get(name)
            if col is not None and col not in weights and name != PODS:
                weights[col] = 1.0
    return weights


def eligible_nodes(
    framework: Framework, pending: Sequence[Pod], snap: Snapshot
) -> list[tuple[Pod, BoolVector]]:
    """Each pending member with the nodes it may ever use (see `Framework.node_eligible`),
    computed once per distinct node-level spec: a gang's members mostly share one, and
    members with the same spec get the same array object (callers group by its id)."""
    seen: dict[tuple[object, str], BoolVector] = {}
    out: list[tuple[Pod, BoolVector]] = []
    for pod in pending:
        key = (pod.constraints, pod.os_name)
        mask = seen.get(key)
        if mask is None:
            mask = seen[key] = framework.node_eligible(pod, snap)
        out.append((pod, mask))
    return out


def usable_nodes(framework: Framework, pending: Sequence[Pod], snap: Snapshot) -> BoolVector:
    """The nodes at least one of the pending members may use (all nodes when none pend)."""
    usable: BoolVector = np.zeros(len(snap), dtype=np.bool_)
    if not pending:
        usable[:] = True
    for _, eligible in eligible_nodes(framework, pending, snap):
        usable |= eligible
    return usable


def capacity_bounds(
    *,
    pending: Sequence[Pod],
    need: int,
    domains: Sequence[Domain | None],
    snap: Snapshot,
    framework: Framework,
    resources: Mapping[str, float],
) -> list[DomainBound]:
    """The bounds of one class of members in every domain at once."""
    if not pending:
        return [DomainBound(pods=0, score=0.0) for _ in domains]
    vectors = [snap.vector(pod) for pod in pending]  # first: it may add a resource column
    count = len(domains)
    of_node = np.full(len(snap), count, dtype=np.intp)  # `count`: in no domain
    for index, domain in enumerate(domains):
        if domain is None:
            of_node[:] = index
        else:
            of_node[domain.nodes] = index
    width = len(snap.columns)

    def per_domain(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Sum a per-node matrix (or vector) over each domain."""
        if values.ndim == 1:
            summed: npt.NDArray[np.float64] = np.bincount(
                of_node, weights=values, minlength=count + 1
            )[:count].astype(np.float64)
            return summed
        out = np.zeros((count + 1, values.shape[1]), dtype=np.float64)
        np.add.at(out, of_node, values)
        return out[:count]

    free = np.clip(snap.allocatable - snap.requested, 0, None)
    alloc = per_domain(snap.allocatable.astype(np.float64))
    used = per_domain(snap.requested.astype(np.float64))
    asked = np.stack(vectors).sum(axis=0).astype(np.float64)
    pods = np.zeros(count, dtype=np.float64)
    usable = np.zeros(count, dtype=np.float64)  # members with a node they may use, per domain
    barred_by: list[tuple[Pod, BoolVector]] = []
    # Members alike in request and eligible nodes share one pass (a gang is mostly alike).
    alike: dict[tuple[bytes, int], tuple[npt.NDArray[np.int64], BoolVector, Pod, int]] = {}
    for (pod, eligible), vector in zip(
        eligible_nodes(framework, pending, snap), vectors, strict=True
    ):
        key = (vector.tobytes(), id(eligible))
        seen = alike.get(key)
        alike[key] = (vector, eligible, pod, (seen[3] if seen else 0) + 1)
    for request, eligible, pod, members in alike.values():
        cols = np.flatnonzero(request)
        slots = (free[:, cols] // request[cols]).min(axis=1).astype(np.float64)
        slots[~eligible] = 0.0
        pods += np.minimum(per_domain(slots), members)
        reachable = per_domain(eligible.astype(np.float64)) > 0
        usable += reachable * members
        if not eligible.all():
            barred_by.append((pod, eligible))
    weights = resource_weights(pending, snap, resources)
    lacking = (asked[None, :] > 0) & (alloc <= 0)
    names = {col: name for name, col in snap.columns.items()}
    bounds: list[DomainBound] = []
    for index, domain in enumerate(domains):
        missing = np.flatnonzero(lacking[index, :width])
        if missing.size:
            bounds.append(DomainBound(pods=0, score=0.0, lacks=names[int(missing[0])]))
            continue
        if usable[index] < min(need, len(pending)):
            reason = _barred_reason(framework, barred_by, domain, snap)
            bounds.append(DomainBound(pods=int(pods[index]), score=0.0, barred=reason))
            continue
        score = most_allocated(used[index] + asked, alloc[index], weights)
        bounds.append(DomainBound(pods=int(pods[index]), score=score))
    return bounds


def _barred_reason(
    framework: Framework,
    barred_by: Sequence[tuple[Pod, BoolVector]],
    domain: Domain | None,
    snap: Snapshot,
) -> str:
    """A node-static filter's reason for the domain's first node a member may not use."""
    nodes = range(len(snap)) if domain is None else domain.nodes
    for pod, eligible in barred_by:
        for node in nodes:
            if not eligible[int(node)]:
                reason = framework.node_rejection(pod, snap, int(node))
                if reason:
                    return reason
    return "the members' node filters"


def most_allocated(
    used: npt.NDArray[np.float64], alloc: npt.NDArray[np.float64], weights: Mapping[int, float]
) -> float:
    """kube-scheduler's MostAllocated over summed capacity: 0-100, weighted by column."""
    total = sum(weights.values())
    if not total:
        return 0.0
    score = 0.0
    for col, weight in weights.items():
        if alloc[col] > 0:
            score += weight * min(float(used[col]) / float(alloc[col]), 1.0)
    return round(100.0 * score / total, 6)


def domain_score(domain: Domain | None, snap: Snapshot, weights: Mapping[int, float]) -> float:
    """MostAllocated over the domain as the snapshot holds it now (placement assumed)."""
    rows = domain.nodes if domain is not None else slice(None)
    used = snap.requested[rows].sum(axis=0).astype(np.float64)
    alloc = snap.allocatable[rows].sum(axis=0).astype(np.float64)
    return most_allocated(used, alloc, weights)


def domains_with_room(
    *,
    pending: Sequence[Pod],
    need: int,
    domains: Sequence[Domain],
    snap: Snapshot,
    framework: Framework,
) -> list[Domain]:
    """The domains where at least `need` members may use some node: what preemption may
    search (freeing capacity never helps a member no node of the domain admits)."""
    if not pending:
        return list(domains)
    alike: dict[int, tuple[BoolVector, int]] = {}
    for _, eligible in eligible_nodes(framework, pending, snap):
        key = id(eligible)
        seen = alike.get(key)
        alike[key] = (eligible, (seen[1] if seen else 0) + 1)
    usable = np.zeros(len(domains), dtype=np.int64)
    for eligible, members in alike.values():
        if eligible.all():
            usable += members
            continue
        reach = np.fromiter(
            (bool(eligible[d.nodes].any()) for d in domains), dtype=np.int64, count=len(domains)
        )
        usable += reach * members
    wanted = min(need, len(pending))
    return [d for d, n in zip(domains, usable, strict=True) if n >= wanted]
