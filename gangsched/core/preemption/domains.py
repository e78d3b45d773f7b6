"""Preemption for a constrained gang: the cheapest victim set per domain, the cheapest domain.

Upstream (1.37, k/k#140683) removes every lower-priority pod in the cluster, takes the single
best-scored placement and reprieves inside it; nobody compares domains by what preemption
there costs (KEP-5710 leaves it as future work). Here each candidate domain of the required
level gets its own search (the configured strategy, `kep` or `mincost`, with the members
confined to the domain and only the victims that hold capacity in it, an All-mode group
whole), and the domain with the cheapest verified set wins by the cost order of `cost.py`;
where domains cost the same victims, the one upstream's placement score ranks first with every
lower-priority pod removed (`_placement_scores`: by default the highest allocation) wins, so
a tie goes to upstream's choice, not to the victims' age.
Domains go cheapest bound first (`domain_bounds.py`), and one whose bound already loses to a
verified set is not searched. The domain upstream would pick is therefore searched or proved
no cheaper (past the `max_domains` budget it is searched regardless), and `kep` on it is
upstream's answer, so the result is never costlier than upstream's.

Where a domain has few potential victims (`exact_units`), `exact_search` always runs after
the heuristics and finds the true minimum by the whole cost order: a best-first search over
victim sets ordered by their cost (the order is monotone: adding a victim adds a pod, so it
never makes a set cheaper), each checked by a capacity bound and then by the real cycle; the
first set that places as many members as removing every victim does is optimal, and the
heuristics' answer is the incumbent that ends the search as soon as nothing queued is cheaper.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleConfig, Gang
from gangsched.core.framework import Framework
from gangsched.core.gang_placer import GangPlacer
from gangsched.core.model import Pod
from gangsched.core.preemption.cost import (
    NO_VICTIMS,
    Cost,
    kept_nominations,
    ranking,
    victim_cost,
)
from gangsched.core.preemption.domain_bounds import Bound, VictimRows, disruption_bounds
from gangsched.core.preemption.domain_table import DomainTables
from gangsched.core.preemption.engine import Candidate, CannotHelp, Problem
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.slot_bounds import SlotBounds
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code
from gangsched.core.topology.bounds import domains_with_room
from gangsched.core.topology.domain_filter import confined
from gangsched.core.topology.domains import Domain, partition
from gangsched.core.topology.placement import (
    ConstraintClass,
    TopologyPlacer,
    constraint_classes,
)

Search = Callable[[Problem], Candidate | CannotHelp]


@dataclass(frozen=True, slots=True)
class TopologyPreemptionConfig:
    #: Domains searched per attempt at most (the nominated and upstream's domain always are).
    max_domains: int = 16
    #: A domain with at most this many potential victim units is solved exactly.
    exact_units: int = 16
    #: Real-cycle verifications the exact search may spend per domain.
    exact_verifications: int = 64
    #: Victim sets the exact search may expand per domain.
    exact_expansions: int = 2000


@dataclass(slots=True)
class DomainCandidate:
    domain: Domain
    found: Candidate | CannotHelp


def required_class(gang: Gang) -> ConstraintClass | None:
    """The one class with a required key; None when the gang has none (or several, which
    then go through the cluster-wide search with topology-aware dry runs)."""
    classes = [c for c in constraint_classes(gang) if c.request.required is not None]
    return classes[0] if len(classes) == 1 else None


def preempt_across_domains(
    *,
    gang: Gang,
    cls: ConstraintClass,
    cluster: ClusterState,
    framework: Framework,
    base: Problem,
    search: Search,
    placer: TopologyPlacer,
    probe: CycleConfig,
    config: TopologyPreemptionConfig,
) -> tuple[Candidate | CannotHelp, list[DomainCandidate]]:
    """The cheapest verified victim set over the candidate domains, and what each gave.
    `placer` is the scheduler's topology placer, as configured: upstream's choice and the
    tie-break score are its, and each domain's dry runs use its cycle settings."""
    snap = cluster.snapshot
    key = cls.request.required
    assert key is not None
    domains = domains_with_room(
        pending=cls.pending,
        need=cls.need,
        domains=_candidate_domains(cls, key, snap),
        snap=snap,
        framework=framework,
    )
    if not domains:
        return CannotHelp(f"topology: no domain of {key} can hold the group"), []
    bounds = _bounds(domains, base, cls, snap, key)
    slots = SlotBounds(base=base, members=cls.pending, coarse=bounds)
    ordered = _order(
        gang=gang, domains=domains, base=base, snap=snap, cls=cls, key=key, bounds=bounds
    )
    tables = DomainTables.of(base.table)
    tried: list[DomainCandidate] = []
    cheapest: tuple[int, int] | None = None  # (highest victim priority, disrupted) so far

    def turns() -> Iterator[Domain]:
        # The budget's domains by their slot bound, the likely winners first (which are
        # searched does not change, only how many lose to a set found before them).
        yield from slots.order(ordered[: config.max_domains])
        beyond = ordered[config.max_domains :]
        if any(cheapest is None or (bounds[d.name] or _LOST) <= cheapest for d in beyond):
            # Past the budget, upstream's choice (every victim removed, the best-scored
            # domain) still gets its turn unless its bound lost: never costlier than it.
            upstream = _upstream_choice(gang, cls, base, snap, domains, placer=placer)
            if upstream is not None and upstream in beyond:
                yield upstream

    for domain in turns():
        bound = bounds[domain.name]
        if bound is None:
            tried.append(DomainCandidate(domain, CannotHelp(_HOPELESS)))
            continue
        if cheapest is not None and (bound > cheapest or slots.loses(domain, cheapest)):
            # Its bound is already dearer than a verified set: it cannot win. (Not a break:
            # the nominated domain comes first and upstream's past the budget last, both
            # out of the bound's order.)
            continue
        table = tables.of_domain(domain.mask)
        if not table.units:
            tried.append(DomainCandidate(domain, CannotHelp("no lower-priority victims")))
            continue
        confined_fw = confined(
            framework,
            {ref: domain.mask for ref in cls.refs},
            {ref: domain.name for ref in cls.refs},
        )
        problem = Problem(
            gang=gang,
            failed=base.failed,
            cluster=cluster,
            framework=confined_fw,
            placer=GangPlacer(confined_fw, placer.config),
            probe_placer=GangPlacer(confined_fw, probe),
            priority=base.priority,
            table=table,
            budgets=base.budgets,
            config=base.config,
            scope=domain.mask,
        )
        mark = problem.mark()
        try:
            found = search(problem)
            if len(table.units) <= config.exact_units:
                incumbent = found if isinstance(found, Candidate) else None
                # Where the heuristics' answer already meets the domain's bound on priority
                # and pods disrupted, only the later keys of the order can improve: a tenth
                # of the budget looks for that, so a rack of equal pods (where proving the
                # tie-breaks optimal takes thousands of sets) costs little.
                thorough = (
                    incumbent is None
                    or (incumbent.cost.max_priority, incumbent.cost.disrupted) > bound
                    or incumbent.cost.pdb_violations > 0
                )
                exact = exact_search(
                    problem,
                    domain,
                    config if thorough else _light(config),
                    incumbent=incumbent,
                    confined=cls.pending,
                )
                if exact is not None and (
                    incumbent is None or _rank(exact, snap) < _rank(incumbent, snap)
                ):
                    found = exact
        finally:
            problem.rollback(mark)
        tried.append(DomainCandidate(domain, found))
        if (
            isinstance(found, Candidate)
            and not found.cost.unplaced
            and not (found.cost.pdb_violations)
        ):
            # Against the bound on evicted pods: a domain whose bound beats this set's
            # disrupted count (evicted plus stranded, never below evicted) may still win.
            mine = (found.cost.max_priority, found.cost.disrupted)
            cheapest = mine if cheapest is None else min(cheapest, mine)
    feasible = [t for t in tried if isinstance(t.found, Candidate)]
    if not feasible:
        reasons = sorted({t.found.reason for t in tried if isinstance(t.found, CannotHelp)})
        searched = {t.domain.name for t in tried}
        hopeless = sum(1 for d in domains if bounds[d.name] is None and d.name not in searched)
        parts = [f"{len(tried)} domain(s) tried: {'; '.join(reasons)}"] if tried else []
        if hopeless:
            parts.append(
                f"{hopeless} domain(s) cannot hold the group even without every lower-priority pod"
            )
        return CannotHelp(
            f"topology: preemption frees no domain of {key} for the group "
            f"({'; '.join(parts) or 'no domain searched'})"
        ), tried
    scores = _placement_scores(feasible, cls, base, snap, placer)
    best = min(
        feasible,
        key=lambda t: (
            _rank(t.found, snap, scores[t.domain.name]),  # type: ignore[arg-type]
            t.domain.name,
        ),
    )
    assert isinstance(best.found, Candidate)
    best.found.name = f"{best.found.name} in {best.domain.name}"
    return best.found, tried


def _rank(found: Candidate, snap: Snapshot, placement: float = 0.0) -> tuple[object, ...]:
    named = ((pod, snap.nodes[node].name) for pod, node in found.placements)
    return ranking(found.cost, kept_nominations(named), placement)


def _placement_scores(
    feasible: Sequence[DomainCandidate],
    cls: ConstraintClass,
    base: Problem,
    snap: Snapshot,
    scorer: TopologyPlacer,
) -> dict[str, float]:
    """Per domain with a victim set, the score upstream ranks it by: every lower-priority pod
    removed (as `_upstream_choice`), the constrained members the set places there assumed,
    the topology placer's own placement score (MostAllocated over the domain). Where domains
    cost the same victims, the highest wins, as upstream's choice would."""
    if len(feasible) < 2:
        return {t.domain.name: 0.0 for t in feasible}
    mine = {id(pod) for pod in cls.pending}
    # A domain's score reads its own nodes only: the victims elsewhere may stay.
    inside = np.logical_or.reduce([t.domain.mask for t in feasible])
    scores: dict[str, float] = {}
    mark = snap.checkpoint()
    try:
        for unit in base.table.units:
            for pod, node in unit.placed:
                if inside[node]:
                    snap.remove_at(pod, node)
        for tried in feasible:
            assert isinstance(tried.found, Candidate)
            placed = snap.checkpoint()
            for pod, node in tried.found.placements:
                if id(pod) in mine:
                    snap.assume(pod, node)
            scores[tried.domain.name] = scorer.placement_score([cls], [tried.domain], snap)
            snap.rollback(placed)
    finally:
        snap.rollback(mark)
    return scores


def _candidate_domains(cls: ConstraintClass, key: str, snap: Snapshot) -> list[Domain]:
    split = partition(snap, key)
    pinned = {
        split.domain_of(snap.index[pod.node_name])
        for pod in cls.bound
        if pod.node_name is not None and pod.node_name in snap.index
    }
    if pinned:
        return [d for d in pinned if d is not None][:1] if len(pinned) == 1 else []
    return list(split.domains)


def _order(
    *,
    gang: Gang,
    domains: Sequence[Domain],
    base: Problem,
    snap: Snapshot,
    cls: ConstraintClass,
    key: str,
    bounds: dict[str, Bound],
) -> list[Domain]:
    """The nominated domain first (a reservation an earlier cycle acted on), then the others
    by their cost bound, cheapest first: the search stops paying for a domain as soon as its
    bound loses to a verified set."""
    first: list[Domain] = []
    nominated = snap.nominated_nodes(cls.pending)
    for domain in domains:
        if any(domain.mask[n] for n in nominated):
            first.append(domain)
            break
    hopeless = (NO_VICTIMS, 0)
    rest = sorted(
        (d for d in domains if d not in first and bounds[d.name] is not None),
        key=lambda d: (bounds[d.name] or hopeless, d.name),
    )
    return [*first, *rest]


#: Above every bound: a domain no victim set can free.
_LOST = (2**62, 0)
_HOPELESS = "even without every lower-priority pod the domain lacks the capacity"


def _bounds(
    domains: Sequence[Domain], base: Problem, cls: ConstraintClass, snap: Snapshot, key: str
) -> dict[str, Bound]:
    """Per candidate domain, the cost no victim set there can go below (`domain_bounds`)."""
    split = partition(snap, key)
    position = {d.name: i for i, d in enumerate(domains)}
    remap = np.array([position.get(d.name, -1) for d in split.domains] + [-1], dtype=np.intp)
    vectors = np.stack([snap.vector(pod) for pod in cls.pending])
    need = np.sort(vectors, axis=0)[: min(cls.need, len(cls.pending))].sum(axis=0)
    rows = VictimRows(base.row_node, base.row_unit, base.row_vec)
    of_node = remap[split.of_node]
    return disruption_bounds(
        domains=domains, of_node=of_node, need=need, table=base.table, snap=snap, rows=rows
    )


def _upstream_choice(
    gang: Gang,
    cls: ConstraintClass,
    base: Problem,
    snap: Snapshot,
    domains: Sequence[Domain],
    *,
    placer: TopologyPlacer,
) -> Domain | None:
    """The domain upstream's TAS preemption picks: every lower-priority pod removed, the
    best-scored feasible placement by the scheduler's own topology placer."""
    mark = base.mark()
    try:
        if base.fast and not _victims_score(base):
            # Capacity and host ports are all the gang's cycle can observe of a victim here
            # (engine.py, "fast"): one array operation instead of ~30,000 journaled removals
            # and their rollback at 5,000 nodes, most of this function's time.
            base.remove(base.units)
        else:
            for unit in base.table.units:
                for pod, node in unit.placed:
                    snap.remove_at(pod, node)
        result = placer.place(gang, snap)
    finally:
        base.rollback(mark)
    if result.code is not Code.SUCCESS:
        return None
    # The required-level domain holding the constrained members' placement: with a
    # preferred level as well, the report names the finer domain the placement was found
    # in, which lies inside this one; a GangGroup's unconstrained parts may be anywhere.
    mine = {id(pod) for pod in cls.pending}
    placed = {node for pod, node in result.placements if id(pod) in mine}
    return next((d for d in domains if placed and all(d.mask[n] for n in placed)), None)


def _victims_score(base: Problem) -> bool:
    """Whether a victim carries affinity terms, which score the gang's pods on its node
    (inter-pod affinity symmetry) while it stays in the node's pod map."""
    return any(
        pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity
        for unit in base.units
        for pod, _ in unit.placed
    )


# ------------------------------------------------------------------------ exact search
def _light(config: TopologyPreemptionConfig) -> TopologyPreemptionConfig:
    return replace(
        config,
        exact_expansions=max(1, config.exact_expansions // 10),
        exact_verifications=max(1, config.exact_verifications // 8),
    )


def exact_search(
    problem: Problem,
    domain: Domain,
    config: TopologyPreemptionConfig,
    *,
    incumbent: Candidate | None = None,
    confined: Sequence[Pod] | None = None,
) -> Candidate | None:
    """The cheapest verified victim set in the domain, by best-first search over sets in
    cost order (branch and bound: a set no cheaper than `incumbent`, the heuristics'
    answer, ends the search, since every set still queued costs at least as much). None
    when the incumbent is already the minimum, or the budget ran out first (the heuristics'
    answer stands)."""
    units = problem.units
    full = problem.verify(units, "exact", problem.potential_pods)
    if full is None:
        return None
    floor = full.cost.unplaced  # nothing places more members than removing every victim
    snap = problem.snap
    pending = problem.gang.pending
    target = len(pending) - floor
    # The capacity check only counts members confined to the domain (`confined`, all of them
    # by default): of a GangGroup's unconstrained parts, any may be placed elsewhere, so at
    # least `target` minus their number must fit here. Counting them too would skip sets
    # that work, and the search would then call a dearer set the minimum.
    inside = list(pending if confined is None else confined)
    least = max(0, target - (len(pending) - len(inside)))
    wants = (
        np.sort(np.stack([snap.vector(p) for p in inside]), axis=0)[:least].sum(axis=0)
        if inside and least
        else np.zeros(snap.allocatable.shape[1], dtype=np.int64)
    )
    free = np.clip(snap.allocatable[domain.nodes] - snap.requested[domain.nodes], 0, None)
    free_total = free.sum(axis=0)
    in_domain = {int(n) for n in domain.nodes}
    freed = [
        sum(
            (snap.vector(pod) for pod, node in unit.placed if node in in_domain),
            np.zeros_like(free_total),
        )
        for unit in units
    ]
    budgets: BudgetIndex = problem.budgets
    count = len(units)
    # Per suffix of the units (a set's subtree adds only later ones): each resource freed,
    # largest first and summed, and how many units may add nothing to pods disrupted (a
    # member of a gang the set already broke) or to workloads (a pod of a group the set
    # already touched).
    matrix = np.array(freed, dtype=np.int64).reshape(count, len(free_total))
    most = [np.cumsum(-np.sort(-matrix[j:], axis=0), axis=0) for j in range(count + 1)]
    quorum_after = [sum(1 for u in units[j:] if u.quorum is not None) for j in range(count + 1)]
    grouped_after = [sum(1 for u in units[j:] if u.groups) for j in range(count + 1)]

    def lower_bound(chosen: tuple[int, ...]) -> Cost | None:
        """A bound on every set of the subtree that frees enough capacity (None: none
        does): the set's cost, plus the fewest units still needed for the capacity, each
        adding a pod, and a pod disrupted or a workload unless it may add none."""
        cost = victim_cost((units[i] for i in chosen), floor, budgets)
        release = sum((freed[i] for i in chosen), np.zeros_like(free_total))
        short = wants - free_total - release
        missing = np.flatnonzero(short > 0)
        if not missing.size:
            return cost
        start = chosen[-1] + 1 if chosen else 0
        sums = most[start]
        if not len(sums) or bool(np.any(sums[-1, missing] < short[missing])):
            return None
        needed = 1 + max(
            int(np.searchsorted(sums[:, d], short[d], side="left")) for d in missing.tolist()
        )
        return replace(
            cost,
            pods=cost.pods + needed,
            disrupted=cost.disrupted + max(0, needed - quorum_after[start]),
            groups=cost.groups + max(0, needed - grouped_after[start]),
        )

    root = lower_bound(())
    if root is None:
        return None
    heap: list[tuple[Cost, tuple[int, ...]]] = [(root, ())]
    verifications = expansions = 0
    seen: set[tuple[int, ...]] = set()
    while heap:
        cost, chosen = heapq.heappop(heap)
        if incumbent is not None and cost >= incumbent.cost:
            return None
        if chosen in seen:
            continue
        seen.add(chosen)
        expansions += 1
        if expansions > config.exact_expansions:
            return None
        release = sum((freed[i] for i in chosen), np.zeros_like(free_total))
        if chosen and bool(np.all(free_total + release >= wants)):
            verifications += 1
            if verifications > config.exact_verifications:
                return None
            found = problem.verify([units[i] for i in chosen], "exact", problem.potential_pods)
            if found is not None and found.cost.unplaced == floor:
                return found
        start = chosen[-1] + 1 if chosen else 0
        for i in range(start, len(units)):
            grown = (*chosen, i)
            bound = lower_bound(grown)
            if bound is not None and (incumbent is None or bound < incumbent.cost):
                heapq.heappush(heap, (bound, grown))
    return None
