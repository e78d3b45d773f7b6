"""Place a constrained gang inside the tightest domain that holds it (issue 14).

Upstream's three phases (KEP-5732), made exact where it is cheap:

1. generate one candidate per value of the label among the nodes (only the bound members'
   domain once some are bound; members bound in two domains are an error on the PodGroup);
2. run the real gang cycle (bounded search, volumes, DRA, nominated nodes included) with the
   members confined to the candidate's nodes;
3. take the tightest feasible candidate: MostAllocated over the domain after placing, then
   pods placed, then the domain name (deterministic, where upstream breaks ties at random),
   so that big domains stay whole for big gangs, like Kueue's BestFit.

A cheap capacity bound per domain (free slots for the members, and the resources the domain
has at all) orders the candidates and gives an upper bound on each one's score: once a
feasible domain beats every remaining bound the search stops, so the answer is the true
tightest domain without running the cycle on all of them. A budget (upstream's adaptive
percentage of placements, and a cap on cycle runs) bounds the work on huge clusters, and the
domain holding the members' nominated nodes goes first and wins at once when it fits (a
later cycle of a gang that preempted stays where its victims are leaving).

Preferred levels are tried first, finest first; when no domain of a level fits, the next
level is tried, up to the required one (or the whole cluster when nothing is required).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gangsched.core.cycle import CycleConfig, CycleResult, Gang, GangMember, validate
from gangsched.core.framework import Framework
from gangsched.core.gang_placer import GangPlacer
from gangsched.core.gang_waiting import waiting_message
from gangsched.core.model import GroupRef, Pod
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code
from gangsched.core.topology.bounds import capacity_bounds, domain_score, resource_weights
from gangsched.core.topology.domain_filter import confined
from gangsched.core.topology.domains import Domain, partition
from gangsched.core.topology.messages import (
    failure_reason,
    level_message,
    no_domain_message,
    skip,
    unschedulable,
)
from gangsched.core.topology.report import FEASIBLE, INFEASIBLE, DomainTrial, TopologyReport
from gangsched.core.topology.request import TopologyRequest


@dataclass(frozen=True, slots=True)
class TopologyConfig:
    #: Real cycle runs spent on candidate domains per gang attempt at most.
    max_evaluations: int = 32
    #: Stop after this percentage of the candidates proved feasible (0: upstream's adaptive
    #: default, max(5, 100 - nodes*9/500) percent; at least one).
    percentage_of_domains: int = 0
    #: Resources and weights of the domain score (MostAllocated over the domain); resources
    #: the gang requests beyond these count with weight 1.
    resources: Mapping[str, float] = field(default_factory=lambda: {"cpu": 1.0, "memory": 1.0})

    def feasible_limit(self, candidates: int, nodes: int) -> int:
        percentage = self.percentage_of_domains or max(5, 100 - nodes * 9 // 500)
        return max(1, candidates * min(percentage, 100) // 100)


@dataclass(slots=True)
class ConstraintClass:
    """The parts of a gang that share one constraint: they share one domain."""

    request: TopologyRequest
    parts: list[GangMember]

    @property
    def refs(self) -> list[GroupRef]:
        return [part.group.ref for part in self.parts]

    @property
    def pending(self) -> list[Pod]:
        return [pod for part in self.parts for pod in part.pending]

    @property
    def bound(self) -> list[Pod]:
        return [pod for part in self.parts for pod in part.bound]

    @property
    def need(self) -> int:
        """Pending members that must be placed: up to minMember, and at least one."""
        short = sum(max(0, p.group.min_member - p.quorum_bound) for p in self.parts)
        return max(short, 1)


def _request_problem(gang: Gang) -> str | None:
    """A constraint that cannot be honoured (see TopologyRequest.problem), named."""
    for part in gang.parts:
        request = part.group.topology
        if request is not None and request.problem:
            return f"topology of {part.group.key}: {request.problem}"
    return None


def constraint_classes(gang: Gang) -> list[ConstraintClass]:
    """Parts grouped by their constraint (unconstrained parts are in none). A CompositePodGroup
    tree has none here: its cycle confines each level itself (core/composite/domains.py), so
    each PodGroup gets a domain of its own inside its parents' domains."""
    if gang.tree is not None:
        return []
    classes: dict[TopologyRequest, ConstraintClass] = {}
    for part in gang.parts:
        request = part.group.topology
        if request is None:
            continue
        key = TopologyRequest(request.required, request.preferred)  # origin aside
        classes.setdefault(key, ConstraintClass(request, [])).parts.append(part)
    return list(classes.values())


@dataclass(slots=True)
class _Candidate:
    """A domain per constraint class (None: unconfined for that class)."""

    domains: tuple[Domain | None, ...]
    bound_score: float
    bound_pods: int

    @property
    def name(self) -> str:
        return _name(self.domains)

    def order(self) -> tuple[float, int, str]:
        return (-self.bound_score, -self.bound_pods, self.name)


class TopologyPlacer:
    """The gang cycle, honouring the gang's topology constraint when it has one: a gang
    placer per candidate domain (module doc), the gang placer alone for a gang without one."""

    def __init__(
        self,
        framework: Framework,
        config: CycleConfig | None = None,
        topology: TopologyConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.framework = framework
        self.config = config or CycleConfig()
        self.topology = topology or TopologyConfig()
        #: Wall-clock seconds, to tell a victim that is slow to go from one that never will.
        self.clock = clock
        #: Places the gangs without a constraint, over the whole framework.
        self.gang = GangPlacer(framework, self.config)

    def place(self, gang: Gang, snap: Snapshot) -> CycleResult:
        classes = constraint_classes(gang)
        if not classes:
            return self.gang.place(gang, snap)
        # What concerns the gang, not a domain, is decided before any domain is looked at:
        # a group still waiting for members must wait, not be called too big for every rack.
        error = validate(gang) or _request_problem(gang)
        if error is not None:
            return CycleResult(Code.ERROR, message=error)
        waiting = waiting_message(gang)
        if waiting is not None:
            return CycleResult(Code.WAIT, message=waiting)
        report = TopologyReport(request="; ".join(c.request.describe() for c in classes))
        result = self._place(gang, snap, classes, report)
        result.topology = report
        return result

    # ------------------------------------------------------------------------ the search
    def _place(
        self, gang: Gang, snap: Snapshot, classes: list[ConstraintClass], report: TopologyReport
    ) -> CycleResult:
        levels = max(len(c.request.levels) for c in classes)
        last_failure: CycleResult | None = None
        summaries: list[str] = []
        for stage in range(levels):
            level_keys = [c.request.levels[min(stage, len(c.request.levels) - 1)] for c in classes]
            options: list[list[Domain | None]] = []
            pinned_error: str | None = None
            for cls, key in zip(classes, level_keys, strict=True):
                domains, error = self._domains(cls, key, snap)
                if error is not None and key == cls.request.required:
                    pinned_error = error
                options.append(domains)
            if pinned_error is not None:
                return CycleResult(Code.ERROR, message=pinned_error)
            if any(not domains for domains in options):
                missing = [k for k, d in zip(level_keys, options, strict=True) if not d]
                summaries.append(no_domain_message(missing))
                continue
            result = self._search(gang, snap, classes, options, report)
            if result.code is not Code.UNSCHEDULABLE or report.waiting:
                # Waiting for its reserved domain ends the search: climbing to the next level
                # would place the gang around the victims, split across the finer domains.
                return result
            last_failure = result
            summaries.append(result.message)
        return unschedulable(summaries, last_failure)

    def _domains(
        self, cls: ConstraintClass, key: str | None, snap: Snapshot
    ) -> tuple[list[Domain | None], str | None]:
        """The candidate domains of one class at one level, pinned by bound members."""
        if key is None:
            return [None], None
        within = cls.request.required if cls.request.required not in (None, key) else None
        split = partition(snap, key, within)
        bound_nodes = [snap.index.get(pod.node_name or "") for pod in cls.bound]
        if not bound_nodes:
            return list(split.domains), None
        found: set[str] = set()
        pinned: Domain | None = None
        for pod, node in zip(cls.bound, bound_nodes, strict=True):
            domain = None if node is None else split.domain_of(node)
            if domain is None:
                return [], (
                    f"topology: member {pod.key} of pod group "
                    f"{', '.join(str(r) for r in cls.refs)} is bound to node {pod.node_name}, "
                    f"which has no {key} label"
                )
            found.add(domain.name)
            pinned = domain
        if len(found) > 1:
            return [], (
                f"topology: members of pod group {', '.join(str(r) for r in cls.refs)} are bound "
                f"in {len(found)} domains of {key} ({', '.join(sorted(found))}); "
                "more than 1 domain found for the pod group"
            )
        return [pinned], None

    def _search(
        self,
        gang: Gang,
        snap: Snapshot,
        classes: list[ConstraintClass],
        options: list[list[Domain | None]],
        report: TopologyReport,
    ) -> CycleResult:
        bounds = [
            capacity_bounds(
                pending=cls.pending,
                need=cls.need,
                domains=domains,
                snap=snap,
                framework=self.framework,
                resources=self.topology.resources,
            )
            for cls, domains in zip(classes, options, strict=True)
        ]
        candidates: list[_Candidate] = []
        combos = list(itertools.product(*[range(len(d)) for d in options]))
        report.generated += len(combos)
        for combo in combos:
            domains = tuple(options[c][i] for c, i in enumerate(combo))
            parts = [bounds[c][i] for c, i in enumerate(combo)]
            short = [
                b for b, cls in zip(parts, classes, strict=True) if b.cause or b.pods < cls.need
            ]
            if short:
                worst = short[0]
                report.trials.append(
                    DomainTrial(
                        _name(domains),
                        worst.outcome,
                        worst.describe(),
                        cause=worst.cause,
                        placed=worst.pods,
                    )
                )
                continue
            candidates.append(
                _Candidate(
                    domains=domains,
                    bound_score=sum(b.score for b in parts),
                    bound_pods=sum(b.pods for b in parts),
                )
            )
        candidates.sort(key=_Candidate.order)
        held = _held(classes, options, snap)
        if held is not None:
            waiting = self._waiting_for_victims(gang, classes, held, snap)
            if waiting is not None:
                report.trials.append(DomainTrial(_name(held), INFEASIBLE, waiting, waiting))
                report.waiting = True
                return CycleResult(Code.UNSCHEDULABLE, message=waiting)
        nominated = _nominated(classes, candidates, snap)
        if nominated is not None:
            candidates.remove(nominated)
            candidates.insert(0, nominated)
        nodes = sum(
            len(d.nodes) if d is not None else len(snap) for c in candidates for d in c.domains
        )
        feasible_limit = self.topology.feasible_limit(len(candidates), nodes)
        mark = snap.checkpoint()
        best: tuple[tuple[float, int, str], _Candidate, CycleResult] | None = None
        assumed: _Candidate | None = None  # whose placement is assumed in the snapshot now
        first_failure: CycleResult | None = None
        evaluations = feasible = 0
        for position, candidate in enumerate(candidates):
            if best is not None and candidate.order() >= best[0]:
                rest = [c.name for c in candidates[position:]]
                skip(report, rest, "its capacity bound cannot beat a feasible domain")
                break
            if evaluations >= self.topology.max_evaluations or feasible >= feasible_limit:
                skip(
                    report,
                    [c.name for c in candidates[position:]],
                    "the evaluation budget was spent",
                )
                break
            if assumed is not None:
                snap.rollback(mark)
                assumed = None
            evaluations += 1
            started = time.perf_counter()
            result = self._placer(classes, candidate).place(gang, snap)
            seconds = time.perf_counter() - started
            if result.code is Code.SUCCESS:
                feasible += 1
                score = self._score(classes, candidate, snap)
                placed = len(result.placements)
                report.trials.append(
                    DomainTrial(candidate.name, FEASIBLE, "", "", score, placed, seconds)
                )
                key = (-score, -placed, candidate.name)
                assumed = candidate
                if best is None or key < best[0]:
                    best = (key, candidate, result)
                if candidate is nominated:
                    break  # upstream: the nominated placement wins at once when it fits
                continue
            snap.rollback(mark)
            if result.code is not Code.UNSCHEDULABLE:
                return result  # an error or a wait concerns the gang, not the domain
            reason = failure_reason(result)
            report.trials.append(
                DomainTrial(candidate.name, INFEASIBLE, reason, reason, None, 0, seconds)
            )
            if first_failure is None:
                first_failure = result
        if best is None:
            failure = first_failure or CycleResult(Code.UNSCHEDULABLE)
            failure.message = level_message(
                keys=sorted({d.key for domains in options for d in domains if d is not None}),
                options=options,
                report=report,
                pending=sum(len(c.pending) for c in classes),
                need=classes[0].need if len(classes) == 1 else None,
            )
            return failure
        _, chosen, result = best
        if assumed is not chosen:
            snap.rollback(mark)
            result = self._placer(classes, chosen).place(gang, snap)
        known = [d for d in chosen.domains if d is not None]
        if known:
            report.key, report.value = known[0].key, known[0].value
        return result

    def _waiting_for_victims(
        self,
        gang: Gang,
        classes: Sequence[ConstraintClass],
        held: tuple[Domain, ...],
        snap: Snapshot,
    ) -> str | None:
        """Why the gang waits for its reserved domain: it does not fit there now, but will
        once the lower-priority pods terminating there are gone (the victims an earlier
        cycle chose). A later cycle then stays in the domain its preemption paid for, rather
        than taking room elsewhere that another gang may need; it moves on only when the
        domain can no longer hold it. None when there is nothing to wait for."""
        priority = min(pod.priority for cls in classes for pod in cls.pending)
        # The victims an earlier cycle chose: lower-priority pods terminating on the nodes the
        # members are nominated to (the preemptor's own test before it preempts again).
        nominated = snap.nominated_nodes(pod for cls in classes for pod in cls.pending)
        leaving = [
            (pod, node)
            for node in sorted(nominated)
            for pod in snap.node_pods[node].values()
            if pod.terminating and pod.priority < priority
        ]
        if not leaving:
            return None
        now = self.clock()
        if any(pod.stuck_terminating(now) for pod, _ in leaving):
            return None  # a victim past its grace period may never go (its node is gone)
        candidate = _Candidate(domains=held, bound_score=0.0, bound_pods=0)
        mark = snap.checkpoint()
        try:
            if self._placer(classes, candidate).place(gang, snap).code is Code.SUCCESS:
                return None  # it fits already: the search takes the nominated domain first
            snap.rollback(mark)
            for pod, node in leaving:
                snap.remove_at(pod, node)
            later = self._placer(classes, candidate).place(gang, snap)
        finally:
            snap.rollback(mark)
        if later.code is not Code.SUCCESS:
            return None
        return (
            f"topology: waiting for {len(leaving)} preemption victim(s) to leave "
            f"{candidate.name}, the domain reserved for the group"
        )

    def _score(
        self, classes: Sequence[ConstraintClass], candidate: _Candidate, snap: Snapshot
    ) -> float:
        return self.placement_score(classes, candidate.domains, snap)

    def placement_score(
        self,
        classes: Sequence[ConstraintClass],
        domains: Sequence[Domain | None],
        snap: Snapshot,
    ) -> float:
        """A placement's score, higher first: MostAllocated over each class's domain (None:
        the whole cluster) as the snapshot holds it, the placement assumed, summed. Preemption
        breaks ties between domains with it (core/preemption/domains.py)."""
        total = 0.0
        for cls, domain in zip(classes, domains, strict=True):
            weights = resource_weights(cls.pending, snap, self.topology.resources)
            total += domain_score(domain, snap, weights)
        return round(total, 6)

    def _placer(self, classes: Sequence[ConstraintClass], candidate: _Candidate) -> GangPlacer:
        masks: dict[GroupRef, BoolVector] = {}
        names: dict[GroupRef, str] = {}
        for cls, domain in zip(classes, candidate.domains, strict=True):
            if domain is None:
                continue
            for ref in cls.refs:
                masks[ref] = domain.mask
                names[ref] = domain.name
        if not masks:
            return GangPlacer(self.framework, self.config)
        return GangPlacer(confined(self.framework, masks, names), self.config)


def _name(domains: Sequence[Domain | None]) -> str:
    return " + ".join(d.name if d is not None else "(whole cluster)" for d in domains)


def _held(
    classes: Sequence[ConstraintClass],
    options: Sequence[Sequence[Domain | None]],
    snap: Snapshot,
) -> tuple[Domain, ...] | None:
    """The domains (one per class) holding the members' nominated nodes, whatever their
    bounds say now; None unless every class has one."""
    held: list[Domain] = []
    for cls, domains in zip(classes, options, strict=True):
        nodes = snap.nominated_nodes(cls.pending)
        found = next((d for d in domains if d is not None and any(d.mask[n] for n in nodes)), None)
        if found is None:
            return None
        held.append(found)
    return tuple(held)


def _nominated(
    classes: Sequence[ConstraintClass], candidates: Sequence[_Candidate], snap: Snapshot
) -> _Candidate | None:
    """The candidate holding the members' nominated nodes (a previous preemption's choice)."""
    nodes = snap.nominated_nodes(pod for cls in classes for pod in cls.pending)
    if not nodes:
        return None
    for candidate in candidates:
        if all(
            domain is None or any(domain.mask[n] for n in nodes) for domain in candidate.domains
        ):
            return candidate
    return None
