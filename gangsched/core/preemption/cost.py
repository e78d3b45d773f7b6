"""The cost of a preemption decision, compared lexicographically (smaller is better).

The order, documented for users (docs and `mincost` use the same definition):

1. most pending members placed (as upstream: a gang with spare members still preempts to
   place them all when lower-priority victims allow);
2. fewest PodDisruptionBudget violations;
3. lowest highest-victim priority (an untouched priority level is never disturbed when a
   lower one suffices: this is what keeps cascades of preemption short);
4. fewest pods disrupted: the pods evicted (an All-mode group counts all its pods) plus the
   members a Single-mode gang keeps running once it is pushed below its minMember. Those
   make no progress any more, so breaking a 20-pod gang by one pod costs 20, evicting a whole
   5-pod gang 5, and one more pod of a gang already below its quorum costs 1 (a gang is a
   workload, as upstream's DisruptionMode All and Koordinator's job preemption have it);
5. fewest pods evicted;
6. fewest workloads disrupted: a PodGroup losing any pod (an All-mode group whole) counts
   once, and a lone pod is a workload of its own (issue 14: disrupting one 2-pod job beats
   disrupting two lone pods);
7. fewest nodes disrupted: with the same victims' count, disruption packed on fewer nodes
   (the members share the capacity one node frees, as Koordinator's job preemption packs them
   and kube-scheduler's victim-aware scoring reuses a victim's leftover capacity);
8. youngest victims: the set whose oldest victim started latest (upstream's "latest start
   time" rule: work that ran longest is lost last), then the larger sum of start times.

When choosing between candidates, `ranking` puts one preference between 7 and 8: the set
whose placement keeps more members on their `status.nominatedNodeName`. A nomination is a
decision an earlier cycle already acted on, and kube-scheduler evaluates a pod's nominated
node before any other; moving members elsewhere for a set that differs only in the victims'
age would contradict that and make successive cycles flip between equally cheap sets.

Between topology domains (`domains.py`), one more preference follows it, still before 8:
the higher placement score of the domain with every lower-priority pod removed, the domain
kube-scheduler's TAS preemption takes (for the default scoring, the highest allocation). Where
domains cost the same victims, the choice is upstream's, not that of the victims' age.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gangsched.core.model import GroupRef, Pod
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import Quorum, VictimUnit

#: Highest-victim priority of an empty victim set: below every real priority.
NO_VICTIMS = -(2**62)


@dataclass(frozen=True, slots=True, order=True)
class Cost:
    unplaced: int
    pdb_violations: int
    max_priority: int
    #: Pods evicted plus the members left running below their gang's quorum.
    disrupted: int
    #: Pods evicted.
    pods: int
    #: Workloads disrupted (see `workloads`).
    groups: int
    #: Nodes holding at least one victim pod.
    nodes: int
    #: Minus the start time of the oldest victim (smaller = the oldest victim is younger).
    oldest_start: float
    #: Minus the sum of start times (smaller = younger victims overall).
    total_start: float

    def describe(self) -> str:
        return (
            f"unplaced={self.unplaced} pdb={self.pdb_violations} "
            f"max_priority={'-' if self.max_priority == NO_VICTIMS else self.max_priority} "
            f"disrupted={self.disrupted} pods={self.pods} groups={self.groups} "
            f"nodes={self.nodes}"
        )


def victim_cost(units: Iterable[VictimUnit], unplaced: int, budgets: BudgetIndex) -> Cost:
    chosen = list(units)
    pods = [pod for unit in chosen for pod in unit.pods]
    return Cost(
        unplaced=unplaced,
        pdb_violations=budgets.violations(pods),
        max_priority=max((unit.priority for unit in chosen), default=NO_VICTIMS),
        disrupted=len(pods) + stranded_members(chosen),
        pods=len(pods),
        groups=workloads(chosen),
        nodes=len({node for unit in chosen for node in unit.nodes}),
        oldest_start=-min((pod.created for pod in pods), default=0.0),
        total_start=-sum(pod.created for pod in pods),
    )


def workloads(units: Iterable[VictimUnit]) -> int:
    """Workloads the units disrupt: each PodGroup they touch once, each lone pod once."""
    refs: set[GroupRef] = set()
    lone = 0
    for unit in units:
        if unit.groups:
            refs.update(unit.groups)
        else:
            lone += 1
    return len(refs) + lone


def stranded_members(units: Iterable[VictimUnit]) -> int:
    """Members of Single-mode gangs left running below their quorum once `units` go."""
    evicted: dict[GroupRef, tuple[Quorum, int]] = {}
    for unit in units:
        quorum = unit.quorum
        if quorum is not None:
            seen = evicted.get(quorum.ref)
            evicted[quorum.ref] = (quorum, unit.size + (seen[1] if seen else 0))
    return sum(quorum.stranded(count) for quorum, count in evicted.values())


def kept_nominations(placements: Iterable[tuple[Pod, str]]) -> int:
    """Members the placement puts on the node they are nominated to."""
    return sum(1 for pod, node in placements if pod.nominated_node_name == node)


def ranking(cost: Cost, kept: int, placement: float = 0.0) -> tuple[object, ...]:
    """Candidate order: criteria 1-7, then more nominations kept, then the higher placement
    score (between domains; 0 elsewhere), then the victims' age."""
    return (
        cost.unplaced,
        cost.pdb_violations,
        cost.max_priority,
        cost.disrupted,
        cost.pods,
        cost.groups,
        cost.nodes,
        -kept,
        -placement,
        cost.oldest_start,
        cost.total_start,
    )
