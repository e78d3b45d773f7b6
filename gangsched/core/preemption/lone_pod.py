"""Default preemption for a lone pod: kube-scheduler's per-node search.

A single pod only ever lands on one node, so each node is its own domain: take away every
lower-priority victim on the node, check that the pod then fits, and give victims back (PDB
violators first, then most important first) while it still fits. A victim that is an
All-mode group frees only its pods on this node but costs all of them, as the KEP says for
pods "running outside of the currently considered domain".

Candidate nodes are those where the pod failed for resolvable reasons only. Where capacity is
the only thing victims can change (the common case) every candidate is checked with vector
arithmetic (on a shortlist of the most promising max(100, 10%) nodes on big clusters);
otherwise the filters run node by node for at most `max_slow_nodes` nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gangsched.core.framework import IndexVector
from gangsched.core.model import Pod
from gangsched.core.preemption.engine import Problem
from gangsched.core.preemption.prefix import NodeBest, cheapest_rows, prefix_per_node
from gangsched.core.preemption.victims import VictimUnit, importance_key
from gangsched.core.snapshot import BoolVector, IntMatrix, IntVector

KeyFactory = Callable[[frozenset[int]], Callable[[VictimUnit], tuple[object, ...]]]

#: Added to priorities before summing them, as upstream does, so that more victims always
#: weigh more even when priorities are negative.
_PRIORITY_OFFSET = 2**31


@dataclass(slots=True)
class NodeOption:
    node: int
    units: list[VictimUnit]
    #: Potential victim pods on the node.
    potential: int

    @property
    def pods(self) -> list[Pod]:
        return [pod for unit in self.units for pod in unit.pods]


def kep_key_factory(violating: frozenset[int]) -> Callable[[VictimUnit], tuple[object, ...]]:
    return lambda unit: importance_key(unit, violating)


def node_options(problem: Problem, key_factory: KeyFactory) -> list[NodeOption]:
    """For every candidate node, the victims left after reprieving in `key_factory` order."""
    snap = problem.snap
    pod = problem.gang.pending[0]
    if not len(problem.row_node):
        return []
    by_node = np.argsort(problem.row_node, kind="stable")
    sorted_nodes = problem.row_node[by_node]
    has_rows = np.zeros(len(snap), dtype=np.bool_)
    has_rows[problem.row_node] = True
    failed = problem.failed
    if failed.failed_pod is pod and failed.diagnosis is not None:
        has_rows &= failed.diagnosis.resolvable

    def rows_on(node: int) -> IndexVector:
        lo, hi = np.searchsorted(sorted_nodes, [node, node + 1])
        rows: IndexVector = by_node[lo:hi]
        return rows

    ctx = problem.framework.context(pod, snap)
    options: list[NodeOption] = []
    if problem.fast:
        cols = np.flatnonzero(ctx.request)
        freed = np.zeros((len(snap), len(cols)), dtype=np.int64)
        np.add.at(freed, problem.row_node, problem.row_vec[:, cols])
        slack_all = snap.allocatable[:, cols] - snap.requested[:, cols] - ctx.request[cols]
        if problem.reserved is not None:
            slack_all = slack_all - problem.reserved[:, cols]
        slack_all = slack_all + freed
        # Nodes that fit once every victim on them is gone (and pass every other filter).
        candidates = has_rows & np.all(slack_all >= 0, axis=1)
        if candidates.any():
            # Other filters with every victim's host ports released (capacity is above).
            mark = problem.mark()
            problem.hide_ports(problem.units)
            try:
                candidates &= problem.static_framework.feasible(ctx, snap)
            finally:
                problem.rollback(mark)
        for node in _shortlist(problem, candidates, cols, freed - slack_all).tolist():
            rows = rows_on(node)
            units = [problem.units[int(u)] for u in problem.row_unit[rows]]
            need = problem.row_vec[rows][:, cols].tolist()
            slack = slack_all[node].tolist()
            key = key_factory(_node_violating(problem, units))
            kept: list[VictimUnit] = []
            for i in sorted(range(len(units)), key=lambda i: key(units[i])):
                want = need[i]
                if pod.host_ports and problem.port_conflict(units[i], node, pod.host_ports):
                    kept.append(units[i])
                elif all(w <= r for w, r in zip(want, slack, strict=True)):
                    slack = [r - w for w, r in zip(want, slack, strict=True)]
                else:
                    kept.append(units[i])
            options.append(NodeOption(node, kept, sum(unit.size for unit in units)))
        return options
    framework = problem.framework
    for node in np.flatnonzero(has_rows)[: problem.config.max_slow_nodes].tolist():
        units = [problem.units[int(u)] for u in problem.row_unit[rows_on(node)]]
        base = snap.checkpoint()
        try:
            for unit in units:
                for victim, where in unit.placed:
                    if where == node:
                        snap.remove_at(victim, node)
            if not framework.feasible(ctx, snap)[node]:
                continue
            key = key_factory(_node_violating(problem, units))
            kept = []
            for unit in sorted(units, key=key):
                step = snap.checkpoint()
                for victim, where in unit.placed:
                    if where == node:
                        snap.assume(victim, node)
                if not framework.feasible(ctx, snap)[node]:
                    snap.rollback(step)
                    kept.append(unit)
            options.append(NodeOption(node, kept, sum(unit.size for unit in units)))
        finally:
            snap.rollback(base)
    return options


def _shortlist(
    problem: Problem, candidates: BoolVector, cols: IntVector, deficit: IntMatrix
) -> IndexVector:
    """Candidate nodes to examine exactly. Like upstream, at most max(100, 10% of nodes)
    (`PreemptionConfig.lone_pod_nodes`); unlike upstream's random sample, the ones whose
    cheapest sufficient victim prefix is cheapest, found for all nodes in one array pass."""
    nodes = np.flatnonzero(candidates)
    limit = problem.config.lone_pod_nodes(len(problem.snap))
    if nodes.size <= limit:
        return nodes
    rows = cheapest_rows(problem)
    best = NodeBest.empty(len(problem.snap))
    prefix_per_node(rows, np.flatnonzero(candidates[rows.nodes]), cols, deficit, best)
    shortlist: IndexVector = np.sort(best.ranked()[:limit])
    return shortlist


def upstream_rank(problem: Problem, option: NodeOption) -> tuple[object, ...]:
    """kube-scheduler's pickOneNodeForPreemption order: fewest PDB violations, lowest
    highest-victim priority, smallest sum of victim priorities, fewest victims, latest start
    time of the (highest-priority) victims, then node name."""
    pods = option.pods
    if not pods:
        return (0, -(2**62), 0, 0, 0.0, problem.snap.nodes[option.node].name)
    prio = {pod.key: unit.priority for unit in option.units for pod in unit.pods}
    top = max(prio.values())
    earliest = min(pod.created for pod in pods if prio[pod.key] == top)
    return (
        problem.budgets.violations(pods),
        top,
        sum(p + _PRIORITY_OFFSET for p in prio.values()),
        len(pods),
        -earliest,
        problem.snap.nodes[option.node].name,
    )


def _node_violating(problem: Problem, units: list[VictimUnit]) -> frozenset[int]:
    """PDB violators among the node's potential victims (upstream splits per node)."""
    if not problem.budgets:
        return frozenset()
    ordered = sorted(units, key=lambda u: importance_key(u, frozenset()))
    return problem.budgets.violating_units(ordered)
