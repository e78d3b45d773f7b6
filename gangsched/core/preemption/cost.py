"""The cost of a preemption decision, compared lexicographically (smaller is better).

The order, documented for users (docs and `mincost` use the same definition):

1. most pending members placed (as upstream: a gang with spare members still preempts to
   place them all when lower-priority victims allow);
2. fewest PodDisruptionBudget violations;
3. lowest highest-victim priority (an untouched priority level is never disturbed when a
   lower one suffices: this is what keeps cascades of preemption short);
4. fewest pods disrupted (an All-mode group counts all its pods);
5. fewest PodGroups disrupted (an All-mode group, or a group losing any Single-mode pod);
6. youngest victims: the set whose oldest victim started latest (upstream's "latest start
   time" rule: work that ran longest is lost last), then the larger sum of start times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimUnit

#: Highest-victim priority of an empty victim set: below every real priority.
NO_VICTIMS = -(2**62)


@dataclass(frozen=True, slots=True, order=True)
class Cost:
    unplaced: int
    pdb_violations: int
    max_priority: int
    pods: int
    groups: int
    #: Minus the start time of the oldest victim (smaller = the oldest victim is younger).
    oldest_start: float
    #: Minus the sum of start times (smaller = younger victims overall).
    total_start: float

    def describe(self) -> str:
        return (
            f"unplaced={self.unplaced} pdb={self.pdb_violations} "
            f"max_priority={'-' if self.max_priority == NO_VICTIMS else self.max_priority} "
            f"pods={self.pods} groups={self.groups}"
        )


def victim_cost(units: Iterable[VictimUnit], unplaced: int, budgets: BudgetIndex) -> Cost:
    chosen = list(units)
    pods = [pod for unit in chosen for pod in unit.pods]
    groups = set().union(*(unit.groups for unit in chosen)) if chosen else set()
    return Cost(
        unplaced=unplaced,
        pdb_violations=budgets.violations(pods),
        max_priority=max((unit.priority for unit in chosen), default=NO_VICTIMS),
        pods=len(pods),
        groups=len(groups),
        oldest_start=-min((pod.created for pod in pods), default=0.0),
        total_start=-sum(pod.created for pod in pods),
    )
