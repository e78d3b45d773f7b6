"""InterPodAffinity: required pod affinity and anti-affinity, both ways, as kube-scheduler.

Three checks, the first failing one names the reason:

* the incoming pod's affinity: the node has every term's topology key and its domains hold
  a pod matching *all* terms (upstream counts only such pods). The first pod of a
  self-affine group passes when no matching pod exists anywhere and it matches its own terms,
  or it could never start. Unresolvable: evicting pods cannot create a match.
* the incoming pod's anti-affinity: no pod matching a term in the node's domain for that
  term; a node without the key cannot share a domain, so it passes.
* symmetry: required anti-affinity terms of pods already placed (`snap.anti_affinity_pods`)
  that match the incoming pod reject every node in the placed pod's domain.

Counting is one pass over the pods per call, into per-domain arrays that are spread over
nodes through the cached topology-key domain ids; pods assumed earlier in the cycle are on
their nodes in the snapshot and count like bound ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from gangsched.core.framework import PodContext
from gangsched.core.model import Pod, PodAffinityTerm
from gangsched.core.plugins.pod_topology_spread import (
    Domains,
    domains,
    label_predicate,
    memo_get,
    memo_put,
)
from gangsched.core.snapshot import BoolVector, IntVector, Snapshot
from gangsched.core.status import Code

AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"

_PASS, _AFFINITY, _ANTI_AFFINITY, _EXISTING = 0, 1, 2, 3
_EXPLANATIONS: dict[int, tuple[str, Code]] = {
    _AFFINITY: (AFFINITY_REASON, Code.UNRESOLVABLE),
    _ANTI_AFFINITY: (ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
    _EXISTING: (EXISTING_ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
}


def term_matches(
    term: PodAffinityTerm, owner_namespace: str, pod: Pod, namespace_labels: dict[str, str]
) -> bool:
    """Whether `term` of a pod in `owner_namespace` selects `pod`.

    A term without a label selector selects nothing (LabelSelectorAsSelector(nil)).
    """
    if term.selector is None:
        return False
    if not term.selects_namespace(owner_namespace, pod.namespace, namespace_labels):
        return False
    return term.selector.matches(pod.labels)


class _DomainCounts:
    """Per topology key, a count per domain, filled pod by pod and read per node."""

    def __init__(self, snap: Snapshot, keys: Iterable[str]) -> None:
        self.domains: dict[str, Domains] = {key: domains(snap, key) for key in keys}
        self._ids = {key: d.ids.tolist() for key, d in self.domains.items()}
        self.counts: dict[str, list[int]] = {
            key: [0] * len(d.values) for key, d in self.domains.items()
        }

    def add(self, key: str, node: int, pods: int) -> bool:
        """Count `pods` pods on `node` in its domain; False when the node lacks the key."""
        domain: int = self._ids[key][node]
        if domain < 0:
            return False
        self.counts[key][domain] += pods
        return True

    def per_node(self, key: str) -> IntVector:
        return self.domains[key].per_node(np.array(self.counts[key], dtype=np.int64))


class InterPodAffinity:
    name = "InterPodAffinity"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        pod = ctx.pod
        return bool(pod.affinity or pod.anti_affinity or snap.anti_affinity_pods)

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        verdicts = self._verdicts(ctx.pod, snap)
        memo_put(ctx, snap, self.name, verdicts)
        passed: BoolVector = candidates & (verdicts == _PASS)
        return passed

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        verdicts = memo_get(ctx, snap, self.name)
        if verdicts is None:
            verdicts = self._verdicts(ctx.pod, snap)
        explanation = _EXPLANATIONS.get(int(verdicts[node]))
        return [] if explanation is None else [explanation]

    # -------------------------------------------------------------------------- internals
    @staticmethod
    def _verdicts(pod: Pod, snap: Snapshot) -> npt.NDArray[np.int8]:
        verdicts = np.full(len(snap), _PASS, dtype=np.int8)
        if pod.affinity or pod.anti_affinity:
            affinity_ok, anti_affinity_ok = _incoming(pod, snap)
            verdicts[~affinity_ok] = _AFFINITY
            verdicts[(verdicts == _PASS) & ~anti_affinity_ok] = _ANTI_AFFINITY
        if snap.anti_affinity_pods:
            verdicts[(verdicts == _PASS) & ~_existing(pod, snap)] = _EXISTING
        return verdicts


PodPredicate = Callable[[Pod], bool]


def _term_predicate(
    term: PodAffinityTerm, owner_namespace: str, ns_labels: dict[str, dict[str, str]]
) -> PodPredicate:
    """`term_matches` for one term as a closure: the namespace verdict is memoised per
    namespace and the selector is specialised, since it runs once per pod in the cluster."""
    selector = term.selector
    if selector is None:
        return lambda pod: False
    labels_match = label_predicate(selector)
    namespaces: dict[str, bool] = {}

    def match(pod: Pod) -> bool:
        allowed = namespaces.get(pod.namespace)
        if allowed is None:
            labels = ns_labels.get(pod.namespace, {})
            allowed = term.selects_namespace(owner_namespace, pod.namespace, labels)
            namespaces[pod.namespace] = allowed
        return allowed and labels_match(pod.labels)

    return match


def _all_of(predicates: list[PodPredicate]) -> PodPredicate:
    if len(predicates) == 1:
        return predicates[0]
    return lambda pod: all(p(pod) for p in predicates)


def _incoming(pod: Pod, snap: Snapshot) -> tuple[BoolVector, BoolVector]:
    """Per node: (affinity satisfied, anti-affinity satisfied) for the pod's own terms."""
    ns_labels = snap.namespace_labels
    affinity, anti_affinity = pod.affinity, pod.anti_affinity
    affinity_keys = list(dict.fromkeys(t.topology_key for t in affinity))
    matched = _DomainCounts(snap, affinity_keys)
    avoided = _DomainCounts(snap, dict.fromkeys(t.topology_key for t in anti_affinity))
    matches_all = (
        _all_of([_term_predicate(t, pod.namespace, ns_labels) for t in affinity])
        if affinity
        else None
    )
    repels = [(t.topology_key, _term_predicate(t, pod.namespace, ns_labels)) for t in anti_affinity]
    any_matched = False  # upstream: len(affinityCounts) > 0
    for node, pods in enumerate(snap.node_pods):
        if not pods:
            continue
        if matches_all is not None:
            # `other is not pod`: never its own neighbour (it is not placed while scheduled).
            found = sum(1 for other in pods.values() if other is not pod and matches_all(other))
            if found:
                for key in affinity_keys:
                    any_matched = matched.add(key, node, found) or any_matched
        for key, repel in repels:
            found = sum(1 for other in pods.values() if other is not pod and repel(other))
            if found:
                avoided.add(key, node, found)

    size = len(snap)
    affinity_ok: BoolVector = np.ones(size, dtype=np.bool_)
    if affinity:
        has_keys: BoolVector = np.ones(size, dtype=np.bool_)
        found_all: BoolVector = np.ones(size, dtype=np.bool_)
        for key in affinity_keys:
            has_keys &= matched.domains[key].present
            found_all &= matched.per_node(key) > 0
        own = ns_labels.get(pod.namespace, {})
        first_of_group = not any_matched and all(
            term_matches(t, pod.namespace, pod, own) for t in affinity
        )
        affinity_ok = has_keys & (found_all | first_of_group)

    anti_affinity_ok: BoolVector = np.ones(size, dtype=np.bool_)
    for key in avoided.domains:
        anti_affinity_ok &= avoided.per_node(key) == 0  # 0 also where the key is missing
    return affinity_ok, anti_affinity_ok


def _existing(pod: Pod, snap: Snapshot) -> BoolVector:
    """Per node: no placed pod's required anti-affinity term forbids the pod there.

    Replicas of one workload carry identical terms, so each distinct (namespace, term) is
    matched against the pod once; the per-pod work left is a dict lookup.
    """
    labels = snap.namespace_labels.get(pod.namespace, {})
    verdict: dict[tuple[str, PodAffinityTerm], bool] = {}
    forbidden: dict[str, set[int]] = {}
    for other, node in snap.anti_affinity_pods.values():
        if other is pod:
            continue
        for term in other.anti_affinity:
            key = (other.namespace, term)
            matches = verdict.get(key)
            if matches is None:
                matches = verdict[key] = term_matches(term, other.namespace, pod, labels)
            if matches:
                domain = int(domains(snap, term.topology_key).ids[node])
                if domain >= 0:
                    forbidden.setdefault(term.topology_key, set()).add(domain)
    ok: BoolVector = np.ones(len(snap), dtype=np.bool_)
    for topology_key, ids in forbidden.items():
        blocked = np.fromiter(ids, dtype=np.int64, count=len(ids))
        ok &= ~np.isin(domains(snap, topology_key).ids, blocked)
    return ok
