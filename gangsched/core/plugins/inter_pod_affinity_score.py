"""InterPodAffinity's score: preferred pod affinity and anti-affinity, both ways, as
kube-scheduler scores them.

Per topology domain, a sum of weights (kube-scheduler's PreScore):

* each preferred affinity term of the incoming pod adds its weight for every placed pod it
  matches, in that pod's domain; each preferred anti-affinity term subtracts it;
* symmetrically, each placed pod's terms that match the incoming pod count in the placed
  pod's domain: its required affinity terms with hardPodAffinityWeight (1), its preferred
  affinity terms with their weight, its preferred anti-affinity terms with minus theirs.

A node's raw score is the sum over topology keys of its domain's total (nothing where it
lacks the key); the candidates' scores are then scaled to 0-100 between their minimum and
maximum and truncated, as NormalizeScore does (all 0 when they are equal).

Counts come from the snapshot, kept current as pods are placed and removed: the incoming
pod's terms through `Snapshot.pod_counts`, placed pods' terms through
`Snapshot.scoring_terms`, so a gang's members are scored in O(nodes) each.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.plugins.inter_pod_affinity import matching_per_node, term_matches
from gangsched.core.plugins.pod_topology_spread import domains
from gangsched.core.snapshot import IntVector, Snapshot


class InterPodAffinityScore:
    name = "InterPodAffinity"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        pod = ctx.pod
        return bool(
            pod.preferred_affinity or pod.preferred_anti_affinity or len(snap.scoring_terms)
        )

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        raw = raw_scores(ctx, snap)
        scores = np.zeros(len(nodes), dtype=np.float64)
        if raw is None or not len(nodes):
            return scores
        candidates = raw[nodes]
        low, high = int(candidates.min()), int(candidates.max())
        if high > low:
            scores = np.floor(100.0 * (candidates - low) / (high - low))
        return scores


def raw_scores(ctx: PodContext, snap: Snapshot) -> IntVector | None:
    """Per node, the sum of the weights of its domains (None when no term applies)."""
    pod = ctx.pod
    per_key: dict[str, IntVector] = {}

    def add(topology_key: str, per_node: IntVector, weight: int) -> None:
        d = domains(snap, topology_key)
        totals = d.totals(per_node, d.present) * weight
        previous = per_key.get(topology_key)
        per_key[topology_key] = totals if previous is None else previous + totals

    for sign, weighted_terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
        for weighted in weighted_terms:
            term = weighted.term
            add(
                term.topology_key,
                matching_per_node(pod, snap, (term,), "term"),
                sign * weighted.weight,
            )

    labels = snap.namespace_labels.get(pod.namespace, {})
    own = snap.placed_at(pod)
    carried = snap.scoring_terms.carried(pod) if own is not None else {}
    for (namespace, (weight, term)), carriers in snap.scoring_terms.items():
        if not term_matches(term, namespace, pod, labels):
            continue
        holders = carriers
        if (namespace, (weight, term)) in carried and own is not None:
            holders = carriers.copy()  # a pod is not its own neighbour
            holders[own] -= carried[(namespace, (weight, term))]
        add(term.topology_key, holders, weight)

    if not per_key:
        return None
    raw = np.zeros(len(snap), dtype=np.int64)
    for topology_key, per_domain in per_key.items():
        raw += domains(snap, topology_key).per_node(per_domain)
    return raw
