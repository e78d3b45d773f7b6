"""PodTopologySpread: DoNotSchedule constraints filter, ScheduleAnyway constraints score.

Follows kube-scheduler: matching pods are counted per topology domain among the nodes that
carry every constraint's topology key and pass the constraint's node inclusion policies;
a node is rejected when placing the pod there would make its domain exceed the global
minimum by more than maxSkew. Pods assumed earlier in the cycle are on their nodes in the
snapshot, so members of one gang spread across domains as they are placed one by one.

Matching pods per node come from the snapshot's incremental counts (`Snapshot.pod_counts`:
one full pass when a selector is first asked about, then kept current as pods are placed,
removed and rolled back), so each gang member costs O(nodes) NumPy work, not a walk over
every pod; the per-node counts are summed per domain through a cached per-topology-key array
of domain ids (`domains`), shared with InterPodAffinity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gangsched.core.framework import FloatVector, IndexVector, PodContext
from gangsched.core.labels import LabelSelector
from gangsched.core.model import NodeConstraints, Pod, TopologySpreadConstraint
from gangsched.core.plugins.node_affinity import admits
from gangsched.core.plugins.taint_toleration import first_untolerated
from gangsched.core.snapshot import BoolVector, IntVector, Snapshot
from gangsched.core.status import Code

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_REASON = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)

_PASS, _MISSING_LABEL, _SKEW = 0, 1, 2


# ---------------------------------------------------------------------- shared topology helpers
@dataclass(frozen=True, slots=True, eq=False)
class Domains:
    """The nodes grouped by the value of one label key.

    `ids[i]` is the index into `values` of node i's label value, or -1 when node i lacks the
    key, so per-domain counts become NumPy arrays indexed by `ids`.
    """

    values: tuple[str, ...]
    ids: IntVector

    @property
    def present(self) -> BoolVector:
        """Nodes that carry the key."""
        has: BoolVector = self.ids >= 0
        return has

    def per_node(self, per_domain: IntVector) -> IntVector:
        """Spread a per-domain array back over nodes (0 where a node lacks the key)."""
        if not self.values:
            return np.zeros(len(self.ids), dtype=np.int64)
        spread: IntVector = np.where(self.ids >= 0, per_domain[np.maximum(self.ids, 0)], 0)
        return spread

    def totals(self, per_node: IntVector, nodes: BoolVector) -> IntVector:
        """Sum a per-node array over each domain, counting only `nodes` (which have the key)."""
        ids = self.ids[nodes]
        totals: IntVector = np.bincount(
            ids, weights=per_node[nodes], minlength=len(self.values)
        ).astype(np.int64)
        return totals


def domains(snap: Snapshot, key: str) -> Domains:
    """The domains of topology key `key`. They depend on node labels only, so one cache
    entry per key serves every pod until the nodes change."""

    def compute() -> Domains:
        labels = [node.labels.get(key) for node in snap.nodes]
        values = tuple(sorted({value for value in labels if value is not None}))
        index = {value: i for i, value in enumerate(values)}
        ids = np.fromiter(
            (-1 if value is None else index[value] for value in labels),
            dtype=np.int64,
            count=len(labels),
        )
        ids.flags.writeable = False
        return Domains(values, ids)

    result: Domains = snap.cached_mask("topology", key, compute)
    return result


def label_predicate(selector: LabelSelector) -> Callable[[Mapping[str, str]], bool]:
    """`selector.matches` as a closure specialised for the common shapes.

    The counting passes call this once per pod in the cluster; a single matchLabels pair
    (app=x, the usual case) then costs one dict lookup instead of generic selector code.
    """
    pairs, expressions = selector.match_labels, selector.match_expressions
    if expressions:
        return selector.matches
    if len(pairs) == 1:
        ((key, value),) = pairs
        return lambda labels: labels.get(key) == value

    return lambda labels: all(labels.get(key) == value for key, value in pairs)


def memo_get(ctx: PodContext, snap: Snapshot, name: str) -> npt.NDArray[np.int8] | None:
    """Per-node verdicts the last `filter` call stored, if the snapshot has not moved since.

    `Framework.diagnose` calls `explain` once per rejected node right after `filter`; without
    this every call would repeat the full pass over the cluster's pods. The token (snapshot,
    its version) detects the changes a scheduling cycle makes between calls, a rollback and a
    different assume included; untracked cache updates do not happen between a filter and its
    explanations.
    """
    entry = ctx.extra.get((name, "verdicts"))
    if not isinstance(entry, tuple):
        return None
    token, verdicts = entry
    if token != _token(snap):
        return None
    result: npt.NDArray[np.int8] = verdicts
    return result


def memo_put(ctx: PodContext, snap: Snapshot, name: str, verdicts: npt.NDArray[np.int8]) -> None:
    ctx.extra[(name, "verdicts")] = (_token(snap), verdicts)


def _token(snap: Snapshot) -> tuple[int, tuple[int, int, int]]:
    return (id(snap), snap.version())


# ------------------------------------------------------------------------------- counting
def _eligible(c: TopologySpreadConstraint, pod: Pod, snap: Snapshot) -> BoolVector:
    """Nodes whose domains count for `c` under its nodeAffinityPolicy / nodeTaintsPolicy."""
    mask: BoolVector = np.ones(len(snap), dtype=np.bool_)
    pc = pod.constraints
    if c.honor_node_affinity and (pc.node_selector or pc.required_terms is not None):
        # Keyed on the affinity part alone so pods differing in tolerations share the entry.
        key = NodeConstraints(node_selector=pc.node_selector, required_terms=pc.required_terms)
        mask = mask & snap.cached_mask(
            "PodTopologySpread/affinity",
            key,
            lambda: np.fromiter(
                (admits(key, node) for node in snap.nodes), dtype=np.bool_, count=len(snap)
            ),
        )
    if c.honor_node_taints:
        tolerations = pc.tolerations
        mask = mask & snap.cached_mask(
            "PodTopologySpread/taints",
            tolerations,
            lambda: np.fromiter(
                (first_untolerated(node, tolerations) is None for node in snap.nodes),
                dtype=np.bool_,
                count=len(snap),
            ),
        )
    return mask


def _counts(
    pod: Pod, snap: Snapshot, selectors: Iterable[LabelSelector | None], nodes: BoolVector
) -> dict[LabelSelector, IntVector]:
    """Per node, the pods in the pod's namespace each selector matches (one pass over pods).

    As kube-scheduler's countPodsMatchSelector: terminating pods do not count, and neither
    a missing nor an empty selector counts anything (both come out as zeros).
    """
    wanted = [s for s in dict.fromkeys(selectors) if s is not None and not s.is_empty]
    counts: dict[LabelSelector, IntVector] = {}
    own = snap.placed_at(pod)  # never its own neighbour
    for selector in wanted:
        matches = _spread_predicate(pod.namespace, selector)
        live = snap.pod_counts.per_node(
            ("spread", pod.namespace, selector), matches, snap.node_pods
        )
        column: IntVector = np.where(nodes, live, 0)
        if own is not None and nodes[own] and matches(pod):
            column[own] -= 1
        counts[selector] = column
    return counts


def _spread_predicate(namespace: str, selector: LabelSelector) -> Callable[[Pod], bool]:
    """The pods a constraint counts: same namespace, not terminating, selector matches."""
    labels_match = label_predicate(selector)
    return lambda other: (
        other.namespace == namespace and not other.terminating and labels_match(other.labels)
    )


def _matching(
    counts: dict[LabelSelector, IntVector], c: TopologySpreadConstraint, size: int
) -> IntVector:
    found = None if c.selector is None else counts.get(c.selector)
    return np.zeros(size, dtype=np.int64) if found is None else found


def _with_all_keys(doms: Sequence[Domains], size: int) -> BoolVector:
    """Nodes carrying every constraint's key: only they form domains (as upstream)."""
    mask: BoolVector = np.ones(size, dtype=np.bool_)
    for d in doms:
        mask &= d.present
    return mask


def _self_match(c: TopologySpreadConstraint, pod: Pod) -> int:
    return 1 if c.selector is not None and c.selector.matches(pod.labels) else 0


# -------------------------------------------------------------------------------- filter
class PodTopologySpread:
    """Filter for whenUnsatisfiable: DoNotSchedule."""

    name = "PodTopologySpread"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return any(c.when_unsatisfiable == DO_NOT_SCHEDULE for c in ctx.pod.spread)

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        verdicts = self._verdicts(ctx.pod, snap)
        memo_put(ctx, snap, self.name, verdicts)
        passed: BoolVector = candidates & (verdicts == _PASS)
        return passed

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        verdicts = memo_get(ctx, snap, self.name)
        if verdicts is None:
            verdicts = self._verdicts(ctx.pod, snap)
        verdict = int(verdicts[node])
        if verdict == _MISSING_LABEL:
            return [(MISSING_LABEL_REASON, Code.UNRESOLVABLE)]
        if verdict == _SKEW:
            return [(REASON, Code.UNSCHEDULABLE)]
        return []

    @staticmethod
    def _verdicts(pod: Pod, snap: Snapshot) -> npt.NDArray[np.int8]:
        """Per node: pass, missing topology label, or skew exceeded (first constraint wins)."""
        constraints = [c for c in pod.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE]
        verdicts = np.full(len(snap), _PASS, dtype=np.int8)
        doms = [domains(snap, c.topology_key) for c in constraints]
        with_keys = _with_all_keys(doms, len(snap))
        eligible = [with_keys & _eligible(c, pod, snap) for c in constraints]
        counted = np.logical_or.reduce(eligible) if eligible else with_keys
        counts = _counts(pod, snap, (c.selector for c in constraints), counted)
        for c, d, nodes in zip(constraints, doms, eligible, strict=True):
            per_domain = d.totals(_matching(counts, c, len(snap)), nodes)
            in_use = np.zeros(len(d.values), dtype=np.bool_)
            in_use[d.ids[nodes]] = True
            num_domains = int(in_use.sum())
            # With fewer domains than minDomains the global minimum is taken to be 0, which
            # also covers "no domain at all".
            few = num_domains < max(c.min_domains, 1)
            minimum = 0 if few else int(per_domain[in_use].min())
            skew = d.per_node(per_domain) + _self_match(c, pod) - minimum
            undecided = verdicts == _PASS
            verdicts[undecided & ~d.present] = _MISSING_LABEL
            verdicts[undecided & d.present & (skew > c.max_skew)] = _SKEW
        return verdicts


# --------------------------------------------------------------------------------- score
class PodTopologySpreadScore:
    """Score for whenUnsatisfiable: ScheduleAnyway, after kube-scheduler's scoring.

    A node's raw score is, per constraint, the matching pods in its domain times
    log(number of candidate domains + 2), plus maxSkew - 1; fewer is better, normalised so
    the best node gets 100. Candidates missing a constraint's key score 0.
    """

    name = "PodTopologySpreadScore"

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return any(c.when_unsatisfiable == SCHEDULE_ANYWAY for c in ctx.pod.spread)

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        pod = ctx.pod
        constraints = [c for c in pod.spread if c.when_unsatisfiable == SCHEDULE_ANYWAY]
        doms = [domains(snap, c.topology_key) for c in constraints]
        with_keys = _with_all_keys(doms, len(snap))
        kept = nodes[with_keys[nodes]]
        scores = np.zeros(len(nodes), dtype=np.float64)
        if not len(kept):
            return scores
        eligible = [with_keys & _eligible(c, pod, snap) for c in constraints]
        counts = _counts(
            pod, snap, (c.selector for c in constraints), np.logical_or.reduce(eligible)
        )
        raw = np.zeros(len(kept), dtype=np.float64)
        for c, d, included in zip(constraints, doms, eligible, strict=True):
            per_domain = d.totals(_matching(counts, c, len(snap)), included)
            candidate_domains = d.ids[kept]
            weight = math.log(len(np.unique(candidate_domains)) + 2)
            raw += per_domain[candidate_domains] * weight + (c.max_skew - 1)
        raw = np.round(raw)
        top, bottom = float(raw.max()), float(raw.min())
        normalised = np.full(len(kept), 100.0) if top == 0 else 100.0 * (top + bottom - raw) / top
        scores[with_keys[nodes]] = normalised
        return scores
