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

Matching pods per node come from the snapshot's incremental counts (`Snapshot.pod_counts`
for the pod's own terms, `Snapshot.anti_affinity_terms` for the placed pods' terms), kept
current as pods are placed, removed and rolled back, so a constrained gang costs O(members)
passes over nodes, not over pods; they are summed per domain through the cached topology-key
domain ids. Pods assumed earlier in the cycle count like bound ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from gangsched.core.framework import PodContext
from gangsched.core.model import Pod, PodAffinityTerm
from gangsched.core.plugins.pod_topology_spread import (
    domains,
    label_predicate,
    memo_get,
    memo_put,
)
from gangsched.core.pod_counts import count_matching
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


def matching_per_node(
    pod: Pod, snap: Snapshot, terms: tuple[PodAffinityTerm, ...], key: str
) -> IntVector:
    """Per node, the placed pods (the pod itself excepted) matching every term of `terms`.

    From the snapshot's incremental counts, unless a term selects namespaces by their labels
    (which change apart from pods): that question is answered by a full pass each time.
    """
    ns_labels = snap.namespace_labels
    predicate = _all_of([_term_predicate(t, pod.namespace, ns_labels) for t in terms])
    if any(t.namespace_selector is not None for t in terms):
        counts = count_matching(predicate, snap.node_pods)
    else:
        live = snap.pod_counts.per_node((key, pod.namespace, terms), predicate, snap.node_pods)
        counts = live.copy()
    own = snap.placed_at(pod)
    if own is not None and predicate(pod):
        counts[own] -= 1
    return counts


def _incoming(pod: Pod, snap: Snapshot) -> tuple[BoolVector, BoolVector]:
    """Per node: (affinity satisfied, anti-affinity satisfied) for the pod's own terms."""
    size = len(snap)
    affinity_ok: BoolVector = np.ones(size, dtype=np.bool_)
    if pod.affinity:
        # Upstream counts, per term's domain, the pods matching *all* the terms.
        found = matching_per_node(pod, snap, pod.affinity, "affinity")
        has_keys: BoolVector = np.ones(size, dtype=np.bool_)
        has_any_key: BoolVector = np.zeros(size, dtype=np.bool_)
        found_all: BoolVector = np.ones(size, dtype=np.bool_)
        for key in dict.fromkeys(t.topology_key for t in pod.affinity):
            d = domains(snap, key)
            has_keys &= d.present
            has_any_key |= d.present
            found_all &= d.per_node(d.totals(found, d.present)) > 0
        any_matched = bool(((found > 0) & has_any_key).any())  # upstream: len(affinityCounts)
        own = snap.namespace_labels.get(pod.namespace, {})
        first_of_group = not any_matched and all(
            term_matches(t, pod.namespace, pod, own) for t in pod.affinity
        )
        affinity_ok = has_keys & (found_all | first_of_group)

    anti_affinity_ok: BoolVector = np.ones(size, dtype=np.bool_)
    avoided: dict[str, IntVector] = {}
    for term in pod.anti_affinity:
        d = domains(snap, term.topology_key)
        per_domain = d.totals(matching_per_node(pod, snap, (term,), "anti-affinity"), d.present)
        previous = avoided.get(term.topology_key)
        avoided[term.topology_key] = per_domain if previous is None else previous + per_domain
    for key, per_domain in avoided.items():
        anti_affinity_ok &= domains(snap, key).per_node(per_domain) == 0  # 0 where key missing
    return affinity_ok, anti_affinity_ok


def _existing(pod: Pod, snap: Snapshot) -> BoolVector:
    """Per node: no placed pod's required anti-affinity term forbids the pod there.

    The snapshot keeps, per (namespace, term) that placed pods carry, how many carry it on
    each node; replicas of one workload share an entry, so each distinct term is matched
    against the pod once and its domains are found with NumPy.
    """
    labels = snap.namespace_labels.get(pod.namespace, {})
    own = snap.placed_at(pod)
    carried = snap.anti_affinity_terms.carried(pod) if own is not None else {}
    ok: BoolVector = np.ones(len(snap), dtype=np.bool_)
    for (namespace, term), carriers in snap.anti_affinity_terms.items():
        if not term_matches(term, namespace, pod, labels):
            continue
        holders = carriers
        if own is not None and (namespace, term) in carried:
            holders = carriers.copy()  # never its own neighbour
            holders[own] -= carried[(namespace, term)]
        d = domains(snap, term.topology_key)
        blocked = np.unique(d.ids[(holders > 0) & d.present])
        if len(blocked):
            ok &= ~np.isin(d.ids, blocked)
    return ok
