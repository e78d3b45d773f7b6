"""Prometheus metrics with the names and buckets kube-scheduler's dashboards already use.

Upstream names (subsystem `scheduler`) for what upstream measures, so existing dashboards work
unchanged; `gangsched_` names for what only we measure (binding latency, informer relists,
leadership, the cycle's search strategy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.utils import INF


def exponential(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)] + [INF]


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        latency = exponential(0.001, 2, 15)
        self.podgroup_attempts = Counter(
            "scheduler_podgroup_schedule_attempts_total",
            "PodGroup scheduling cycles by result.",
            ["result"],
            registry=r,
        )
        self.podgroup_attempt_duration = Histogram(
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            "Duration of a PodGroup scheduling cycle, decision to report, by result.",
            ["result"],
            buckets=latency,
            registry=r,
        )
        self.podgroup_algorithm_duration = Histogram(
            "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            "Duration of the PodGroup placement algorithm alone.",
            buckets=latency,
            registry=r,
        )
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Pod scheduling attempts by result.",
            ["result", "profile"],
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Pending pods by queue (active, backoff, unschedulable, gated).",
            ["queue"],
            registry=r,
        )
        self.pending_groups = Gauge(
            "gangsched_pending_podgroups",
            "Gangs in the scheduling queue, by queue.",
            ["queue"],
            registry=r,
        )
        self.waiting_gangs = Gauge(
            "scheduler_waiting_gang_group_number",
            "Gangs waiting for members (fewer pods than minMember).",
            registry=r,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "From a pod's first attempt to its binding, by attempts.",
            ["attempts"],
            buckets=exponential(0.01, 2, 20),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_workload_preemption_attempts_total",
            "Workload-aware preemption attempts by result.",
            ["result"],
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_workload_preemption_victims",
            "Victims chosen per preemption.",
            buckets=exponential(1, 2, 11),
            registry=r,
        )
        self.preemption_duration = Histogram(
            "scheduler_preemption_evaluation_duration_seconds",
            "Time to evaluate preemption for a gang.",
            buckets=latency,
            registry=r,
        )
        self.pdb_violations = Counter(
            "scheduler_preemption_pdb_violations_total",
            "Victims whose eviction violated a PodDisruptionBudget.",
            registry=r,
        )
        self.reprieved = Counter(
            "scheduler_podgroup_preemption_reprieved_total",
            "Potential victims spared by the reprieve step.",
            registry=r,
        )
        self.binding_duration = Histogram(
            "gangsched_binding_duration_seconds",
            "Latency of one pods/binding call.",
            buckets=latency,
            registry=r,
        )
        self.binding_errors = Counter(
            "gangsched_binding_errors_total",
            "Failed binds by cause (conflict, not_found, other).",
            ["cause"],
            registry=r,
        )
        self.api_errors = Counter(
            "gangsched_api_errors_total",
            "Failed writes to the API server by operation and HTTP status.",
            ["operation", "code"],
            registry=r,
        )
        self.informer_relists = Counter(
            "gangsched_informer_relists_total",
            "Relists after a watch expired or failed, by resource.",
            ["resource"],
            registry=r,
        )
        self.leader = Gauge(
            "gangsched_leader",
            "1 while this replica holds the leader lease.",
            registry=r,
        )
        # Topology-aware placement (KEP-5732's beta metric names).
        self.generated_placements = Counter(
            "scheduler_generated_placements_total",
            "Candidate topology domains (placements) generated for constrained PodGroups.",
            registry=r,
        )
        self.placement_evaluations = Counter(
            "scheduler_placement_evaluations_total",
            "Candidate topology domains the PodGroup cycle ran on, by result.",
            ["result"],
            registry=r,
        )
        self.placement_evaluation_duration = Histogram(
            "scheduler_placement_evaluation_duration_seconds",
            "Duration of the PodGroup cycle on one candidate topology domain, by result.",
            ["result"],
            buckets=latency,
            registry=r,
        )
        self.cycle_strategy = Counter(
            "gangsched_cycle_placements_total",
            "Successful gang placements by the search that found them.",
            ["strategy"],
            registry=r,
        )
        self.api_requests = Counter(
            "gangsched_api_requests_total",
            "Requests gangsched sent to the API server, by HTTP verb.",
            ["verb"],
            registry=r,
        )
        self.pods_bound = Counter(
            "gangsched_pods_bound_total",
            "Pods bound.",
            registry=r,
        )
        # Per PodGroup, but only while the group has pending members (the series goes away
        # once it has none), so cardinality follows the backlog, not the cluster's history.
        # Lone pods are not included.
        self.group_pending_seconds = Gauge(
            "gangsched_podgroup_pending_seconds",
            "Age of the oldest pending member of a PodGroup that has pending members.",
            ["namespace", "podgroup"],
            registry=r,
        )
        self.group_schedule_timeout = Gauge(
            "gangsched_podgroup_schedule_timeout_seconds",
            "scheduleTimeoutSeconds of a PodGroup that has pending members (when it sets one).",
            ["namespace", "podgroup"],
            registry=r,
        )
        # Running gangs and disruption (core/gang_health.py, edge/gang_protection.py).
        self.gangs_broken = Counter(
            "gangsched_gangs_broken_total",
            "Running gangs that dropped below minMember (a member failed or was deleted, its "
            "node gone).",
            registry=r,
        )
        self.stale_gangs_released = Counter(
            "gangsched_stale_gangs_released_total",
            "Running gangs released whole after their grace period below minMember.",
            registry=r,
        )
        self.protected_gangs = Gauge(
            "gangsched_protected_gangs",
            "Running gangs with gangsched's PodDisruptionBudget.",
            registry=r,
        )
        # Gangs bound on nodes created after they became Unschedulable (core/new_capacity.py).
        self.new_capacity_seconds = Histogram(
            "gangsched_gang_new_capacity_bound_seconds",
            "From a gang's Unschedulable to its bind on nodes created since (an autoscaler's).",
            buckets=exponential(1, 2, 14),
            registry=r,
        )
        self.new_capacity_nodes = Histogram(
            "gangsched_gang_new_capacity_nodes",
            "Nodes created after a gang became Unschedulable that its members were bound to.",
            buckets=exponential(1, 2, 11),
            registry=r,
        )
        #: Each listed group's series (`labels` looks the child up again at every call:
        #: for 1,000 pending groups, most of a once-a-second refresh).
        self._pending_groups: dict[tuple[str, str], Gauge] = {}
        self._timeouts: set[tuple[str, str]] = set()
        # Known label values start at 0, so rates and alerts have a series before the first
        # event (an error counter that appears only with its first error cannot be rated).
        for result in ("scheduled", "unschedulable", "waiting", "waiting_on_preemption", "error"):
            self.podgroup_attempts.labels(result)
        for result in ("started", "cannot_help", "waiting_for_capacity"):
            self.preemption_attempts.labels(result)
        for result in ("feasible", "infeasible"):
            self.placement_evaluations.labels(result)
            self.placement_evaluation_duration.labels(result)
        for cause in ("conflict", "not_found", "other"):
            self.binding_errors.labels(cause)

    def set_pending_groups(
        self, groups: Mapping[tuple[str, str], tuple[float, int | None]]
    ) -> None:
        """(namespace, name) -> (seconds pending, scheduleTimeoutSeconds or None) for every
        PodGroup with pending members now; series of groups no longer listed are removed."""
        series = self._pending_groups
        for key in series.keys() - groups.keys():
            self.group_pending_seconds.remove(*key)
            del series[key]
        for key in self._timeouts - {k for k, (_, t) in groups.items() if t is not None}:
            self.group_schedule_timeout.remove(*key)
        self._timeouts = set()
        for key, (seconds, timeout) in groups.items():
            child = series.get(key)
            if child is None:
                child = series[key] = self.group_pending_seconds.labels(*key)
            child.set(seconds)
            if timeout is not None:
                self.group_schedule_timeout.labels(*key).set(timeout)
                self._timeouts.add(key)
