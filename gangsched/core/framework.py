"""The plugin framework: filter and score plugins, run for one pod over a snapshot.

Two paths, as in kube-scheduler but vectorised: `feasible` answers "which nodes can take this
pod" with NumPy masks and stops at the first plugin that rejects every node; `diagnose`
runs only when a pod fits nowhere and explains each node, producing kube-scheduler's reason
histogram and telling preemption which nodes no eviction could fix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gangsched.core.model import Pod
from gangsched.core.snapshot import BoolVector, IntMatrix, Snapshot
from gangsched.core.status import Code, FitDiagnosis

FloatVector = npt.NDArray[np.float64]
IndexVector = npt.NDArray[np.intp]


@dataclass(slots=True, eq=False)
class PodContext:
    """Per-pod values several plugins need, computed once per attempt."""

    pod: Pod
    request: npt.NDArray[np.int64]
    #: Capacity reserved for nominated pods that outrank this pod, or None.
    reserved: IntMatrix | None = None
    extra: dict[object, object] = field(default_factory=dict)


class FilterPlugin(Protocol):
    """A filter. One whose verdict reads only the pod's spec and the node object (not what
    runs on the node) also sets a class attribute `node_static = True`: `node_eligible`
    runs those alone, and topology drops domains none of whose nodes pass them."""

    name: str

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        """False when the plugin cannot reject any node for this pod (skip it cheaply)."""
        ...

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        """The subset of `candidates` that pass."""
        ...

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        """Why `node` was rejected: one or more reasons, each resolvable or not. A plugin
        whose reason is the same for every node it rejects may also offer
        `uniform_reason(ctx, snap) -> (reason, code)`; `diagnose` then counts at once."""
        ...


class PreFilterPlugin(Protocol):
    """Checks that do not depend on the node (kube-scheduler's PreFilter): a message makes
    the pod unschedulable on every node, reported as upstream does ("0/N nodes are
    available: <message>.")."""

    name: str

    def pre_filter(self, ctx: PodContext, snap: Snapshot) -> str | None: ...


class ScorePlugin(Protocol):
    name: str

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool: ...

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        """Scores in [0, 100] for `nodes` (already normalised)."""
        ...


@dataclass(slots=True, eq=False)
class Diagnosis:
    fit: FitDiagnosis
    #: Per node: True when only resolvable reasons rejected it (a preemption candidate).
    resolvable: BoolVector


@dataclass(slots=True)
class Framework:
    filters: Sequence[FilterPlugin]
    scores: Sequence[tuple[ScorePlugin, float]]
    pre_filters: Sequence[PreFilterPlugin] = ()

    def context(self, pod: Pod, snap: Snapshot) -> PodContext:
        return PodContext(
            pod=pod,
            request=snap.vector(pod),
            reserved=snap.reserved(pod.priority, pod.group, pod.key),
        )

    def pre_filter(self, ctx: PodContext, snap: Snapshot) -> str | None:
        for plugin in self.pre_filters:
            message = plugin.pre_filter(ctx, snap)
            if message:
                return message
        return None

    def feasible(self, ctx: PodContext, snap: Snapshot) -> BoolVector:
        if self.pre_filters and self.pre_filter(ctx, snap):
            return np.zeros(len(snap), dtype=np.bool_)
        mask: BoolVector = np.ones(len(snap), dtype=np.bool_)
        for plugin in self.filters:
            if not plugin.applies(ctx, snap):
                continue
            mask = plugin.filter(ctx, snap, mask)
            if not mask.any():
                break
        return mask

    def node_eligible(self, pod: Pod, snap: Snapshot) -> BoolVector:
        """The nodes the pod may ever use, whatever runs on them: the filters marked
        `node_static` (a verdict read from the pod's spec and the node object alone, cached
        per spec in the snapshot). Topology uses it to drop domains before any cycle runs."""
        ctx = PodContext(pod=pod, request=snap.vector(pod))
        mask: BoolVector = np.ones(len(snap), dtype=np.bool_)
        for plugin in self._node_static(ctx, snap):
            mask = plugin.filter(ctx, snap, mask)
        return mask

    def node_rejection(self, pod: Pod, snap: Snapshot, node: int) -> str | None:
        """Why a `node_static` filter rejects the node for the pod (the first one's reason)."""
        ctx = PodContext(pod=pod, request=snap.vector(pod))
        one: BoolVector = np.zeros(len(snap), dtype=np.bool_)
        one[node] = True
        for plugin in self._node_static(ctx, snap):
            if not plugin.filter(ctx, snap, one)[node]:
                explained = plugin.explain(ctx, snap, node)
                return explained[0][0] if explained else plugin.name
        return None

    def _node_static(self, ctx: PodContext, snap: Snapshot) -> Iterator[FilterPlugin]:
        """The `node_static` filters that apply to the pod, in order."""
        for plugin in self.filters:
            if getattr(plugin, "node_static", False) and plugin.applies(ctx, snap):
                yield plugin

    def diagnose(self, ctx: PodContext, snap: Snapshot) -> Diagnosis:
        """Explain, node by node, why the pod fits nowhere (first rejecting plugin wins)."""
        rejected = self.pre_filter(ctx, snap) if self.pre_filters else None
        if rejected:
            return Diagnosis(
                fit=FitDiagnosis(
                    num_nodes=len(snap), unresolvable_nodes=len(snap), pre_filter=rejected
                ),
                resolvable=np.zeros(len(snap), dtype=np.bool_),
            )
        reasons: Counter[str] = Counter()
        resolvable = np.zeros(len(snap), dtype=np.bool_)
        remaining: BoolVector = np.ones(len(snap), dtype=np.bool_)
        unresolvable = 0
        for plugin in self.filters:
            if not plugin.applies(ctx, snap) or not remaining.any():
                continue
            passed = plugin.filter(ctx, snap, remaining)
            refused = np.flatnonzero(remaining & ~passed)
            uniform = getattr(plugin, "uniform_reason", None)
            if uniform is not None and refused.size:
                # One reason for every node it rejects (a constant message): counted at once
                # rather than asked node by node, thousands of times on a confined cycle.
                reason, code = uniform(ctx, snap)
                reasons[reason] += int(refused.size)
                if code is Code.UNRESOLVABLE:
                    unresolvable += int(refused.size)
                else:
                    resolvable[refused] = True
                remaining = passed
                continue
            for node in refused:
                explained = plugin.explain(ctx, snap, int(node)) or [
                    (plugin.name, Code.UNSCHEDULABLE)
                ]
                hard = False
                for reason, code in explained:
                    reasons[reason] += 1
                    hard = hard or code is Code.UNRESOLVABLE
                if hard:
                    unresolvable += 1
                else:
                    resolvable[node] = True
            remaining = passed
        return Diagnosis(
            fit=FitDiagnosis(num_nodes=len(snap), reasons=reasons, unresolvable_nodes=unresolvable),
            resolvable=resolvable,
        )

    def select(self, ctx: PodContext, snap: Snapshot, mask: BoolVector) -> int:
        """The best-scoring feasible node; ties go to the lowest index (name order)."""
        nodes = np.flatnonzero(mask)
        if len(nodes) == 1:
            return int(nodes[0])
        return int(nodes[int(np.argmax(self.total_scores(ctx, snap, nodes)))])

    def ranked(self, ctx: PodContext, snap: Snapshot, mask: BoolVector) -> IndexVector:
        """Feasible nodes best first (stable: equal scores keep name order)."""
        nodes = np.flatnonzero(mask)
        if len(nodes) <= 1:
            return nodes
        order = np.argsort(-self.total_scores(ctx, snap, nodes), kind="stable")
        return nodes[order]

    def total_scores(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        total = np.zeros(len(nodes), dtype=np.float64)
        for plugin, weight in self.scores:
            if weight and plugin.applies(ctx, snap):
                total += weight * plugin.score(ctx, snap, nodes)
        return total
