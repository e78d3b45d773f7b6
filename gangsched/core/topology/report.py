"""What topology placement tried, as plain values: for messages, explain, metrics, simulate."""

from __future__ import annotations

from dataclasses import dataclass, field

FEASIBLE = "feasible"
INFEASIBLE = "infeasible"
#: Rejected by the capacity bound alone: too little free room, a resource no node has, or no
#: node the members' node-static filters admit (the cycle never ran there).
TOO_SMALL = "too-small"
LACKS = "lacks"
FILTERED = "filtered"
#: The budget, or a feasible domain no remaining bound can beat, ended the search first.
NOT_EVALUATED = "not-evaluated"


@dataclass(slots=True)
class DomainTrial:
    """One candidate domain and what became of it."""

    domain: str
    #: feasible | infeasible (the real cycle ran) | too-small | lacks | filtered (only the
    #: capacity bound looked) | not-evaluated (the budget or a tighter feasible domain ended
    #: the search)
    outcome: str
    #: The whole reason for this domain, as explain shows it.
    reason: str = ""
    #: The reason without this domain's figures: domains that share it share a line of the
    #: unschedulable message ("3 racks too small", "2 racks lack nvidia.com/gpu").
    cause: str = ""
    #: MostAllocated over the domain after placing (0-100), for feasible domains.
    score: float | None = None
    #: Members placed (feasible), or the most that fit by free capacity (too-small).
    placed: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class TopologyReport:
    """The topology side of one gang cycle."""

    #: The constraint, e.g. "required topology.kubernetes.io/zone; preferred rack".
    request: str
    #: The chosen domain's label key and value (None: not placed, or the whole cluster).
    key: str | None = None
    value: str | None = None
    #: Candidate domains generated (upstream's generated placements).
    generated: int = 0
    trials: list[DomainTrial] = field(default_factory=list)
    #: The gang waits for the victims in its reserved domain (not placed, not failed).
    waiting: bool = False

    @property
    def evaluations(self) -> list[DomainTrial]:
        """Trials the real cycle ran on (upstream's placement evaluations)."""
        return [t for t in self.trials if t.outcome in (FEASIBLE, INFEASIBLE)]
