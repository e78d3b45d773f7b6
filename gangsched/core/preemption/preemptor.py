"""The Preemptor the scheduler calls when a gang's cycle comes back unschedulable.

The rules every strategy shares live here, so that `kep` and `mincost` differ only in how
they search:

* preemptionPolicy Never (pod, PodGroup, or the group's PriorityClass) disables preemption;
* while victims chosen earlier for this gang are still terminating on the nodes its members
  are nominated to, nothing new is started and the nominations stay (no repeated preemption);
* only strictly lower-priority units are victims, never the gang's own pods;
* preemption happens only if it makes the whole gang schedulable (at least minMember of every
  PodGroup of the GangGroup), verified by the real cycle; otherwise nothing is evicted and the
  outcome says why ("preemption cannot help: ...").

The search runs on the live snapshot under a checkpoint and leaves it exactly as it found it.
"""

from __future__ import annotations

import gc
from dataclasses import replace

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleConfig, CycleResult, Gang
from gangsched.core.framework import Framework
from gangsched.core.placers import UnitPlacer
from gangsched.core.preemption.actuation import (
    build_decisions,
    preemption_message,
    trigger_pod,
)
from gangsched.core.preemption.domains import (
    TopologyPreemptionConfig,
    preempt_across_domains,
    required_class,
)
from gangsched.core.preemption.engine import Candidate, CannotHelp, PreemptionConfig, Problem
from gangsched.core.preemption.futile import FutileSearches
from gangsched.core.preemption.kep import kep_search
from gangsched.core.preemption.mincost import mincost_search
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import (
    collect_victim_table,
    gang_priority,
    preemption_disabled,
    victim_priority,
)
from gangsched.core.scheduler import PreemptionOutcome
from gangsched.core.status import Code
from gangsched.core.topology.placement import TopologyConfig

KEP = "kep"
MINCOST = "mincost"
STRATEGIES = (KEP, MINCOST)

DISABLED_MESSAGE = "preemption is disabled for this group (preemptionPolicy: Never)"
NO_VICTIMS_REASON = "no lower-priority victims"


#: kube-scheduler's PodGroup message while earlier victims still terminate.
ONGOING_MESSAGE = "pod group preemption: ongoing preemption on nominated nodes"


def cannot_help(reason: str) -> str:
    return f"preemption cannot help: {reason}"


class WorkloadPreemptor:
    """Workload-aware preemption (KEP-5710) with a selectable victim search."""

    def __init__(
        self,
        strategy: str = MINCOST,
        *,
        scheduler_name: str = "gangsched",
        config: PreemptionConfig | None = None,
        cycle: CycleConfig | None = None,
        topology: TopologyPreemptionConfig | None = None,
        placement: TopologyConfig | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown preemption strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}"
            )
        self.strategy = strategy
        self.scheduler_name = scheduler_name
        self.config = config or PreemptionConfig()
        #: The scheduler's cycle and topology placement settings (SchedulerConfig.cycle and
        #: .topology): every dry run places as the live cycle does, so the two agree.
        self.cycle = cycle
        self.placement = placement or TopologyConfig()
        self.topology = topology or TopologyPreemptionConfig()
        self._placers: tuple[UnitPlacer, UnitPlacer] | None = None
        #: Searches that found nothing, given again until something that can help changes.
        self.futile = FutileSearches()

    def preempt(
        self, gang: Gang, failed: CycleResult, cluster: ClusterState, framework: Framework
    ) -> PreemptionOutcome:
        # The search allocates an object or two per potential victim (tens of thousands on a
        # big cluster) and frees them all at the end; generational collections triggered
        # meanwhile would rescan the whole cluster cache each time, tripling the cost.
        paused = gc.isenabled()
        gc.disable()
        try:
            return self._preempt(gang, failed, cluster, framework)
        finally:
            if paused:
                gc.enable()

    def _preempt(
        self, gang: Gang, failed: CycleResult, cluster: ClusterState, framework: Framework
    ) -> PreemptionOutcome:
        if failed.code is not Code.UNSCHEDULABLE:
            # Never preempt for a group the cycle can place (or that waits or is invalid).
            return self._outcome(
                False, f"preemption not attempted: cycle result {failed.code.value}"
            )
        if not gang.pending:
            return self._outcome(False, cannot_help("the group has no pending pods"))
        if preemption_disabled(gang, cluster):
            return self._outcome(False, DISABLED_MESSAGE)
        priority = gang_priority(gang)
        terminating = terminating_victims(gang, cluster, priority)
        if terminating:
            return self._outcome(
                True,
                f"{ONGOING_MESSAGE} (waiting for {terminating} preemption victim(s) to terminate)",
            )
        known = self.futile.recall(gang, cluster)
        if known is not None:
            return known
        snap = cluster.snapshot
        mark = snap.checkpoint()
        problem: Problem | None = None
        try:
            for pod in gang.pending:
                # Earlier nominations of this gang must not reserve capacity against itself.
                snap.clear_nomination(pod.key)
            table = collect_victim_table(gang, cluster, priority)
            if not table.units:
                return self._outcome(False, cannot_help(NO_VICTIMS_REASON))
            placer, probe = self._placers_for(framework)
            problem = Problem(
                gang=gang,
                failed=failed,
                cluster=cluster,
                framework=framework,
                placer=placer,
                probe_placer=probe,
                priority=priority,
                table=table,
                budgets=BudgetIndex(cluster.budgets.values()),
                config=self.config,
            )
            search = kep_search if self.strategy == KEP else mincost_search
            constrained = required_class(gang)
            if constrained is None:
                found = search(problem)
            else:
                found, _ = preempt_across_domains(
                    gang=gang,
                    cls=constrained,
                    cluster=cluster,
                    framework=framework,
                    base=problem,
                    search=search,
                    placer=placer.group,
                    probe=probe.config,
                    config=self.topology,
                )
        finally:
            if problem is not None:
                problem.rollback((mark, 0))
            snap.rollback(mark)
        if isinstance(found, CannotHelp):
            outcome = self._outcome(False, cannot_help(found.reason))
            self.futile.remember(gang, cluster, outcome)
            return outcome
        self.futile.forget(gang)
        if not found.units:
            # The dry run fits without evicting anything while the cycle did not: nothing a
            # victim could change. Never report a preemption that evicts nobody.
            return self._outcome(False, cannot_help("the group fits without victims in a dry run"))
        return self._started(gang, failed, cluster, priority, found)

    # ---------------------------------------------------------------------------- helpers
    def _placers_for(self, framework: Framework) -> tuple[UnitPlacer, UnitPlacer]:
        """The scheduler's own cycle (for every verification) and a cheaper one for
        exploratory runs, kept while the framework stays the same."""
        cached = self._placers
        if cached is None or cached[0].framework is not framework:
            base = self.cycle or CycleConfig()
            probe = replace(
                base, search_budget=min(base.search_budget, self.config.probe_search_budget)
            )
            # Dry runs honour the gang's topology constraint as the cycle itself does, with
            # the same settings (domain score resources, evaluation budget).
            cached = (
                UnitPlacer(framework, base, self.placement),
                UnitPlacer(framework, probe, self.placement),
            )
            self._placers = cached
        return cached

    def _outcome(self, started: bool, message: str) -> PreemptionOutcome:
        return PreemptionOutcome(started=started, message=message, strategy=self.strategy)

    def _started(
        self,
        gang: Gang,
        failed: CycleResult,
        cluster: ClusterState,
        priority: int,
        found: Candidate,
    ) -> PreemptionOutcome:
        message = preemption_message(self.scheduler_name, gang, trigger_pod(gang, failed))
        decisions = build_decisions(gang, found, cluster, priority, message)
        victims = sorted(found.pods, key=lambda pod: pod.key)
        nodes = {pod.node_name for pod in victims}
        # kube-scheduler's words first (the PodGroup condition carries them), then ours.
        summary = (
            f"pod group preemption: found a placement for podgroup, preempting "
            f"{len(victims)} victims on {len(nodes)} node(s) "
            f"({found.name}; {found.cost.pdb_violations} PodDisruptionBudget violation(s)); "
            f"{len(found.placements)} pod(s) nominated"
        )
        return PreemptionOutcome(
            started=True,
            message=summary,
            decisions=decisions,
            victims=victims,
            pdb_violations=found.cost.pdb_violations,
            reprieved=max(0, found.potential - len(victims)),
            strategy=self.strategy,
        )


def terminating_victims(gang: Gang, cluster: ClusterState, priority: int) -> int:
    """Lower-priority pods still terminating on the nodes the gang is nominated to: the
    victims of an earlier preemption for it (upstream's check before preempting again).
    As upstream, however long they take: a pod stuck on a lost node is the node lifecycle
    controller's and pod GC's to clear (Koordinator's conformance case of an old
    terminating pod expects no preemption either)."""
    snap = cluster.snapshot
    nodes = snap.nominated_nodes(gang.pending)
    return sum(
        1
        for node in nodes
        for pod in snap.node_pods[node].values()
        if pod.terminating and victim_priority(pod, cluster) < priority
    )
