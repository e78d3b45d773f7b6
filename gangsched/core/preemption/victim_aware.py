"""Victim-aware placement of a gang's members for the `kep` strategy.

kube-scheduler's workload-aware preemption runs the pod group cycle once with every potential
victim removed and then reprieves around the placement it found. Placed by the ordinary scores
(LeastAllocated spreads), the members land on nodes whose victims are costly or that do not
share a victim's freed capacity: two 2-CPU members go to two 4-CPU nodes and evict a large pod
on one and a whole group on the other, where the large pod's node alone held both. Upstream's
later scoring of that dry run is victim-aware (its podgrouppreemption integration rows
"Victim-aware scoring: reuse leftover capacity from large victim on same node", "... reuse
capacity freed across nodes by DisruptionModeAll PodGroup victim", "Partial Preemption with
basic policy"): each member goes where the victims it adds cost least, a victim already
chosen for an earlier member costing nothing, and the ordinary scores only break ties.

Per member, in the cycle's order, with every earlier member assumed: a nominated node that
fits is taken first (kube-scheduler evaluates it before any other node); otherwise each
feasible node's marginal victims are found as default preemption finds them on one node:
victims not yet chosen are offered back most important first (KEP-5710's order) while the
member still fits, and those that do not fit are the node's marginal set. Nodes compare by
(PDB violations, highest priority, pods, groups) of that set; then the ordinary scores. At most
`lone_pod_nodes` nodes are examined exactly per member (upstream's candidate-node bound), best
scored first, after nodes that need no new victim at all, which are found with array sums.

Only the capacity-only regime (`Problem.fast`) of a flat gang is handled; elsewhere kep keeps
the plain run. A CompositePodGroup tree is always placed by its own cycle: member by member, the
placement here knows neither the tree's levels (minGroupCount, a failed parent failing its
children) nor the domain each constrained level keeps its subtree in, and upstream's dry run
for a tree is the hierarchy's cycle itself with every victim removed, its placement scoring
included (k/k#140683), then the reprieve. The final victims still come from the in-place
reprieve and the real cycle's verification.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gangsched.core.cycle import CycleResult, member_order
from gangsched.core.framework import PodContext
from gangsched.core.model import GroupRef, HostPort, Pod
from gangsched.core.preemption.cost import workloads
from gangsched.core.preemption.engine import Problem
from gangsched.core.preemption.victims import VictimUnit, importance_key
from gangsched.core.status import Code

#: Marginal cost of a node that needs no new victim: below every real cost.
FREE: tuple[int, int, int, int] = (0, -(2**62), 0, 0)


def victim_aware_place(problem: Problem) -> CycleResult | None:
    """Place the gang member by member on the cheapest marginal victims (see module
    docstring), assuming each member in the snapshot as the cycle does. Precondition: every
    potential victim is removed. None when the regime is not capacity-only, the gang is a
    CompositePodGroup tree, or the members placed do not satisfy the gang (the caller keeps
    the plain run then)."""
    if not problem.fast or not problem.units or problem.gang.tree is not None:
        return None
    placer = _Placer(problem)
    return placer.run()


class _Placer:
    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.snap = problem.snap
        self.chosen = np.zeros(len(problem.units), dtype=np.bool_)
        violating = problem.violating
        ranked = sorted(problem.units, key=lambda u: importance_key(u, violating))
        rank = np.empty(len(problem.units), dtype=np.int64)
        rank[[unit.index for unit in ranked]] = np.arange(len(ranked))
        # Rows grouped by node, most important victim first within each node.
        order = np.lexsort((rank[problem.row_unit], problem.row_node))
        nodes = problem.row_node[order]
        bounds = np.flatnonzero(np.r_[True, nodes[1:] != nodes[:-1]]) if order.size else order
        self.rows_at: dict[int, list[int]] = {
            int(nodes[start]): rows.tolist()
            for start, rows in zip(bounds.tolist(), np.split(order, bounds[1:]), strict=True)
        }
        #: Per node, the summed requests of the victims not yet chosen.
        self.back = np.zeros_like(self.snap.requested)
        np.add.at(self.back, problem.row_node, problem.row_vec)
        self.ports_at: dict[int, list[HostPort]] = {}
        #: Marginal victims and their cost per node for the current member shape; a node's
        #: entry is dropped when a member lands on it or a victim there is chosen.
        self.cache: dict[int, tuple[tuple[int, int, int, int], list[VictimUnit]]] = {}
        self.shape: object = None
        self.asks: list[list[int]] = []

    def run(self) -> CycleResult | None:
        problem, snap = self.problem, self.snap
        framework = problem.framework
        gang = problem.gang
        placements: list[tuple[Pod, int]] = []
        placed: dict[GroupRef, int] = {}
        for pod in member_order(gang.pending):
            ctx = framework.context(pod, snap)
            mask = framework.feasible(ctx, snap)
            if not mask.any():
                continue
            self._use_shape(pod, ctx)
            node = self._nominated(pod, mask)
            if node is None:
                node = self._cheapest(ctx, mask)
            self._choose(self._marginal(ctx, node)[1])
            self.cache.pop(node, None)
            snap.assume(pod, node)
            if pod.host_ports:
                self.ports_at.setdefault(node, []).extend(pod.host_ports)
            placements.append((pod, node))
            ref = gang.ref_of(pod)
            placed[ref] = placed.get(ref, 0) + 1
        satisfied = all(
            len(part.bound) + placed.get(part.group.ref, 0) >= part.group.min_member
            for part in gang.parts
        )
        if not placements or not satisfied:
            return None
        return CycleResult(Code.SUCCESS, placements=placements, strategy="victim-aware")

    def _nominated(self, pod: Pod, mask: np.ndarray) -> int | None:
        if pod.nominated_node_name is None:
            return None
        node = self.snap.index.get(pod.nominated_node_name)
        return node if node is not None and bool(mask[node]) else None

    def _cheapest(self, ctx: PodContext, mask: np.ndarray) -> int:
        """The feasible node whose marginal victims cost least; scores break ties."""
        problem, snap = self.problem, self.snap
        framework = problem.framework
        free = self._needs_nothing(ctx, mask)
        if free.any():
            return framework.select(ctx, snap, free)
        ranked = framework.ranked(ctx, snap, mask)
        limit = problem.config.lone_pod_nodes(len(snap))
        examined = ranked[:limit].tolist()
        costs = [self._marginal(ctx, n)[0] for n in examined]
        # `ranked` is best score first with ties in name order, as `select` breaks them.
        return int(examined[costs.index(min(costs))])

    def _needs_nothing(self, ctx: PodContext, mask: np.ndarray) -> np.ndarray:
        """The nodes of `mask` where every victim not yet chosen fits back next to the
        member (only those rows are compared: a domain's 20 of 5,000 nodes)."""
        problem, snap = self.problem, self.snap
        nodes = np.flatnonzero(mask)
        slack = self._slack(ctx, nodes)
        fits: np.ndarray = np.zeros(len(snap), dtype=np.bool_)
        fits[nodes[np.all(self.back[nodes] <= slack, axis=1)]] = True
        if problem.port_pods:
            for node in nodes.tolist():
                if fits[node] and self._port_blocked(ctx, node):
                    fits[node] = False
        return fits

    def _slack(self, ctx: PodContext, nodes: np.ndarray) -> np.ndarray:
        snap = self.snap
        used = snap.requested[nodes] + ctx.request
        if ctx.reserved is not None:
            used = used + ctx.reserved[nodes]
        slack: np.ndarray = snap.allocatable[nodes] - used
        # Columns the member does not ask for cannot stop a victim from coming back.
        slack[:, ctx.request == 0] = np.iinfo(np.int64).max // 4
        return slack

    def _open(self, row: int) -> bool:
        return not bool(self.chosen[int(self.problem.row_unit[row])])

    def _port_blocked(self, ctx: PodContext, node: int) -> bool:
        ports = [*ctx.pod.host_ports, *self.ports_at.get(node, ())]
        if not ports:
            return False
        problem = self.problem
        return any(
            problem.port_conflict(problem.units[int(problem.row_unit[row])], node, ports)
            for row in self.rows_at.get(node, ())
            if self._open(row)
        )

    def _use_shape(self, pod: Pod, ctx: PodContext) -> None:
        """Members of one shape (request, reservations, ports) share the per-node cache."""
        shape = (ctx.request.tobytes(), pod.priority, pod.group, pod.host_ports)
        if shape == self.shape:
            return
        self.shape = shape
        self.cache = {}
        self.asks = self.problem.row_vec[:, np.flatnonzero(ctx.request)].tolist()

    def _marginal(
        self, ctx: PodContext, node: int
    ) -> tuple[tuple[int, int, int, int], list[VictimUnit]]:
        """Victims not yet chosen that must go from `node` for the member to fit there,
        with their cost (cached per node for the member shape)."""
        cached = self.cache.get(node)
        if cached is not None:
            return cached
        problem, snap = self.problem, self.snap
        cols = np.flatnonzero(ctx.request)
        free = snap.allocatable[node, cols] - snap.requested[node, cols] - ctx.request[cols]
        if ctx.reserved is not None:
            free = free - ctx.reserved[node, cols]
        room: list[int] = free.tolist()
        ports = [*ctx.pod.host_ports, *self.ports_at.get(node, ())]
        marginal: list[VictimUnit] = []
        chosen = self.chosen
        for row in self.rows_at.get(node, ()):
            index = int(problem.row_unit[row])
            if chosen[index]:
                continue
            unit = problem.units[index]
            ask = self.asks[row]
            if all(a <= r for a, r in zip(ask, room, strict=True)) and not (
                ports and problem.port_conflict(unit, node, ports)
            ):
                room = [r - a for a, r in zip(ask, room, strict=True)]
            else:
                marginal.append(unit)
        found = (self._cost(marginal), marginal)
        self.cache[node] = found
        return found

    def _cost(self, units: Sequence[VictimUnit]) -> tuple[int, int, int, int]:
        if not units:
            return FREE
        problem = self.problem
        pods = [pod for unit in units for pod in unit.pods]
        return (
            problem.budgets.violations(pods),
            max(unit.priority for unit in units),
            len(pods),
            workloads(units),
        )

    def _choose(self, units: Sequence[VictimUnit]) -> None:
        problem = self.problem
        for unit in units:
            self.chosen[unit.index] = True
            rows = np.arange(problem.row_start[unit.index], problem.row_start[unit.index + 1])
            np.subtract.at(self.back, problem.row_node[rows], problem.row_vec[rows])
            for node in unit.nodes:
                self.cache.pop(node, None)
