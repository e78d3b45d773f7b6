"""PodDisruptionBudget accounting for preemption.

Preemption honours budgets the way kube-scheduler does: evicting a pod is allowed while the
budgets that select it still have disruptions left; past that, the eviction "violates" the
budget. Violations are not forbidden (the preemptor may have nothing else), but they are
avoided first and counted. A pod counts as violating when, taking the victims in a fixed
order, some budget selecting it has no disruptions left for it; so the count is the number of
evictions beyond the budgets' allowance, which is upstream's `NumPDBViolations`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gangsched.core.model import DisruptionBudget, Pod
from gangsched.core.preemption.victims import VictimUnit


class BudgetIndex:
    """Which budgets select which pod, computed lazily and cached per pod key."""

    def __init__(self, budgets: Iterable[DisruptionBudget]) -> None:
        self._by_namespace: dict[str, list[DisruptionBudget]] = {}
        self.allowed: dict[str, int] = {}
        for budget in budgets:
            self._by_namespace.setdefault(budget.namespace, []).append(budget)
            self.allowed[budget.key] = max(0, budget.disruptions_allowed)
        self._matching: dict[str, tuple[str, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self.allowed)

    def matching(self, pod: Pod) -> tuple[str, ...]:
        cached = self._matching.get(pod.key)
        if cached is None:
            cached = tuple(
                budget.key
                for budget in self._by_namespace.get(pod.namespace, ())
                if budget.selector.matches(pod.labels)
            )
            self._matching[pod.key] = cached
        return cached

    def violating_pods(self, pods: Iterable[Pod]) -> list[Pod]:
        """The pods, taken in the given order, whose eviction exceeds a budget's allowance."""
        if not self.allowed:
            return []
        left = dict(self.allowed)
        out: list[Pod] = []
        for pod in pods:
            violated = False
            for key in self.matching(pod):
                left[key] -= 1
                violated = violated or left[key] < 0
            if violated:
                out.append(pod)
        return out

    def violations(self, pods: Iterable[Pod]) -> int:
        """How many of these evictions go beyond the budgets (canonical order: by key, so
        the count of a set does not depend on how it was found)."""
        if not self.allowed:
            return 0
        return len(self.violating_pods(sorted(pods, key=lambda p: p.key)))

    def violating_units(self, units: Sequence[VictimUnit]) -> frozenset[int]:
        """Units (given most important first) holding a pod that would violate a budget if
        every one of them were evicted: upstream splits potential victims this way before
        reprieving, so protected pods are offered back first."""
        if not self.allowed:
            return frozenset()
        owner = {pod.key: unit.index for unit in units for pod in unit.pods}
        pods = [pod for unit in units for pod in unit.pods]
        return frozenset(owner[pod.key] for pod in self.violating_pods(pods))
