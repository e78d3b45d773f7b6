"""Default preemption for a lone pod: kube-scheduler's per-node search.

A single pod only ever lands on one node, so each node is its own domain: take away every
lower-priority victim on the node, check that the pod then fits, and give victims back (PDB
violators first, then most important first) while it still fits. A victim that is an
All-mode group frees only its pods on this node but costs all of them, as the KEP says for
pods "running outside of the currently considered domain".

Candidate nodes are those where the pod failed for resolvable reasons only. Where capacity is
the only thing victims can change (the common case) every candidate is checked with vector
arithmetic; otherwise the filters run node by node for at most `max_slow_nodes` nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gangsched.core.model import Pod
from gangsched.core.preemption.engine import Problem
from gangsched.core.preemption.victims import VictimUnit, importance_key
from gangsched.core.snapshot import IntVector

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
    on_node: dict[int, list[VictimUnit]] = {}
    for unit in problem.units:
        for node in unit.nodes:
            on_node.setdefault(node, []).append(unit)
    candidates = sorted(on_node)
    failed = problem.failed
    if failed.failed_pod is pod and failed.diagnosis is not None:
        resolvable = failed.diagnosis.resolvable
        candidates = [node for node in candidates if resolvable[node]]
    if not candidates:
        return []
    ctx = problem.framework.context(pod, snap)
    options: list[NodeOption] = []
    if problem.fast:
        static = problem.static_framework.feasible(ctx, snap)
        cols = np.flatnonzero(ctx.request)
        request = ctx.request[cols]
        for node in candidates:
            if not static[node]:
                continue
            units = on_node[node]
            need = [(unit, _on_node(problem, unit, node, cols)) for unit in units]
            slack = snap.allocatable[node, cols] - snap.requested[node, cols] - request
            if problem.reserved is not None:
                slack = slack - problem.reserved[node, cols]
            for _, vec in need:
                slack = slack + vec
            if not np.all(slack >= 0):
                continue  # even without every victim the pod does not fit here
            key = key_factory(_node_violating(problem, units))
            kept: list[VictimUnit] = []
            for unit, vec in sorted(need, key=lambda item: key(item[0])):
                if np.all(slack >= vec):
                    slack = slack - vec
                else:
                    kept.append(unit)
            options.append(NodeOption(node, kept, sum(unit.size for unit in units)))
        return options
    framework = problem.framework
    for node in candidates[: problem.config.max_slow_nodes]:
        units = on_node[node]
        mark = snap.checkpoint()
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
            snap.rollback(mark)
    return options


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


def _on_node(problem: Problem, unit: VictimUnit, node: int, cols: IntVector) -> IntVector:
    total = np.zeros(len(cols), dtype=np.int64)
    for pod, where in unit.placed:
        if where == node:
            total += problem.snap.vector(pod)[cols]
    return total


def _node_violating(problem: Problem, units: list[VictimUnit]) -> frozenset[int]:
    """PDB violators among the node's potential victims (upstream splits per node)."""
    if not problem.budgets:
        return frozenset()
    ordered = sorted(units, key=lambda u: importance_key(u, frozenset()))
    return problem.budgets.violating_units(ordered)
