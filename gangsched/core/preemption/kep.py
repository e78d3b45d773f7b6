"""Strategy `kep`: KEP-5710's algorithm, as upstream implements it (REFERENCE.md section 3).

For a gang the whole cluster is one domain: remove every potential victim, run the group
cycle once, and if it is still infeasible preemption cannot help. Otherwise place the members
victim-aware (`victim_aware.py`: each where the victims it adds cost least, as upstream's
scoring of that dry run does; capacity-only regime) unless that places fewer members, and
reprieve victims in importance order (PDB violators first, then higher priority, groups before
single pods, older first) while the placement still holds. A lone pod gets the default
per-node search and upstream's node choice instead.

One placement, chosen member by member, is still the KEP's weakness: a greedy choice for an
early member can force an expensive victim set later. `mincost` searches further and always
considers this strategy's answer too.
"""

from __future__ import annotations

from gangsched.core.model import Pod
from gangsched.core.preemption.engine import Candidate, CannotHelp, Problem, failure_reason
from gangsched.core.preemption.lone_pod import kep_key_factory, node_options, upstream_rank
from gangsched.core.preemption.victim_aware import victim_aware_place
from gangsched.core.preemption.victims import importance_key
from gangsched.core.status import Code


def is_lone_pod(problem: Problem) -> bool:
    """A gang of exactly one pending pod, minMember 1 and no GangGroup: one node suffices."""
    gang = problem.gang
    return len(gang.parts) == 1 and len(gang.pending) == 1 and gang.parts[0].group.min_member <= 1


def kep_search(problem: Problem) -> Candidate | CannotHelp:
    if is_lone_pod(problem):
        found = kep_lone_pod(problem)
        if found is not None:
            return found
        # No single node works; the cluster-wide dry run below explains why (or, with
        # inter-pod constraints, may still find a set the node-local view missed).
    return kep_gang(problem)


def kep_lone_pod(problem: Problem) -> Candidate | None:
    problem.target = 1
    options = node_options(problem, kep_key_factory)
    for option in sorted(options, key=lambda o: upstream_rank(problem, o)):
        candidate = problem.verify(option.units, "kep/per-node", option.potential)
        if candidate is not None and candidate.cost.unplaced == 0:
            return candidate
    return None


def _placement(problem: Problem) -> list[tuple[Pod, int]] | CannotHelp:
    """The dry run's placement, assumed in the snapshot: victim-aware when that places every
    pending member (nothing can place more), else the plain cycle's when it places more."""
    snap = problem.snap
    start = snap.checkpoint()
    aware = victim_aware_place(problem)
    if aware is not None and len(aware.placements) == len(problem.gang.pending):
        return list(aware.placements)
    snap.rollback(start)
    result = problem.place()
    if result.code is not Code.SUCCESS:
        return CannotHelp(failure_reason(result))
    if aware is None or len(aware.placements) < len(result.placements):
        return list(result.placements)
    snap.rollback(start)
    for pod, node in aware.placements:
        snap.assume(pod, node)
    return list(aware.placements)


def kep_gang(problem: Problem) -> Candidate | CannotHelp:
    units = problem.units
    violating = problem.violating
    mark = problem.mark()
    try:
        problem.remove(units)
        placement = _placement(problem)
        if isinstance(placement, CannotHelp):
            return placement
        problem.target = len(placement)
        problem.all_removed = placement
        problem.remember(units, placement)
        kept = problem.reprieve(units, placement, lambda u: importance_key(u, violating))
    finally:
        problem.rollback(mark)
    candidate = problem.verify(kept, "kep", problem.potential_pods)
    if candidate is None:
        candidate = problem.reprieve_verified(
            units, lambda u: importance_key(u, violating), "kep/verified"
        )
    if candidate is None:
        return CannotHelp("the group does not fit even without every lower-priority pod")
    return candidate
