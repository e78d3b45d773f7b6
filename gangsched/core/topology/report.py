"""What topology placement tried, as plain values: for messages, explain, metrics, simulate."""

from __future__ import annotations

from dataclasses import dataclass, field

FEASIBLE = "feasible"
INFEASIBLE = "infeasible"


@dataclass(slots=True)
class DomainTrial:
    """One candidate domain and what became of it."""

    domain: str
    #: feasible | infeasible (the real cycle ran) | too-small | lacks (only the capacity
    #: bound looked) | not-evaluated (the budget or a tighter feasible domain ended the search)
    outcome: str
    reason: str = ""
    #: MostAllocated over the domain after placing (0-100), for feasible domains.
    score: float | None = None
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

    @property
    def evaluations(self) -> list[DomainTrial]:
        """Trials the real cycle ran on (upstream's placement evaluations)."""
        return [t for t in self.trials if t.outcome in (FEASIBLE, INFEASIBLE)]
