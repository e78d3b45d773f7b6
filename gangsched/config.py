"""The scheduler configuration file, shared by `gangsched run` and `gangsched simulate`.

Validated with pydantic so a typo is an error naming the field, not a silently ignored key.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gangsched.core.api.capacity_wait import MAX_WAIT_SECONDS
from gangsched.core.cycle import CycleConfig
from gangsched.core.gang_health import GangHealthConfig
from gangsched.core.plugins import ScoringConfig
from gangsched.core.plugins.registry import DEFAULT_WEIGHTS
from gangsched.core.preemption import TopologyPreemptionConfig, build_preemptor
from gangsched.core.preemption.capacity_wait import CapacityWaitPreemptor
from gangsched.core.scheduler import Preemptor, SchedulerConfig
from gangsched.core.topology.placement import TopologyConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"  # a DNS subdomain (Lease name, namespace)


def _address(value: str) -> str:
    """host:port to listen on: port 0-65535, host an IP (IPv6 in brackets), a name, or empty
    for every interface."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not host:port with a port from 0 to 65535")
    if host.startswith("[") != host.endswith("]") or any(c.isspace() for c in host):
        raise ValueError(f"{value!r}: bad host {host!r}")
    return value


class Scoring(_Strict):
    strategy: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"
    resources: dict[str, float] = Field(default_factory=lambda: {"cpu": 1.0, "memory": 1.0})
    weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    @field_validator("resources")
    @classmethod
    def _resource_weights(cls, value: dict[str, float]) -> dict[str, float]:
        # kube-scheduler's NodeResourcesFit takes resource weights from 1 to 100; a weight of 0,
        # a negative one or a tiny one made every allocation score NaN (100 / sum of weights).
        if not value:
            raise ValueError("name at least one resource")
        if "" in value:
            raise ValueError("a resource name is empty")
        bad = sorted(name for name, weight in value.items() if not 1 <= weight <= 100)
        if bad:
            raise ValueError(f"weights of {bad} must be from 1 to 100, as kube-scheduler's")
        return value

    @field_validator("weights")
    @classmethod
    def _known_plugins(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(DEFAULT_WEIGHTS))
        if unknown:
            raise ValueError(f"unknown score plugin(s) {unknown}; known: {sorted(DEFAULT_WEIGHTS)}")
        if any(weight < 0 for weight in value.values()):
            raise ValueError("weights must be >= 0")
        return value


class Preemption(_Strict):
    enabled: bool = True
    strategy: Literal["mincost", "kep"] = "mincost"
    #: Seconds a gang that only preemption would place waits for new nodes (an autoscaler)
    #: before preempting; 0 preempts at once (docs/concepts/capacity-wait.md).
    waitForCapacitySeconds: int = Field(0, ge=0, le=MAX_WAIT_SECONDS)


class Backoff(_Strict):
    initialSeconds: float = Field(1.0, gt=0)
    maxSeconds: float = Field(10.0, gt=0)
    #: With no gang ready, retry one that a cluster change moved to backoff before its
    #: backoff ends (kube-scheduler's SchedulerPopFromBackoffQ, on since 1.33).
    popFromBackoffQ: bool = True


class Search(_Strict):
    budget: int = Field(2000, ge=0)
    width: int = Field(8, ge=1)


class Topology(_Strict):
    """Topology-aware placement (issue 14): how much work one constrained gang may cost."""

    #: Cycle runs on candidate domains per gang attempt at most.
    maxEvaluations: int = Field(32, ge=1)
    #: Stop once this percentage of the candidates proved feasible; 0: upstream's adaptive
    #: default (100% on small clusters, 10% at 5,000 nodes, never below 5%).
    percentageOfDomains: int = Field(0, ge=0, le=100)
    #: Domains preemption searches per attempt at most (the nominated one and the one
    #: kube-scheduler would pick always are).
    preemptionDomains: int = Field(16, ge=1)
    #: A domain with at most this many potential victim units is solved exactly.
    exactVictimUnits: int = Field(16, ge=0)
    #: The exact search's budget per domain: victim sets expanded, and real-cycle checks of
    #: the sets that pass the capacity bound. Past either, the heuristics' answer stands.
    exactExpansions: int = Field(2000, ge=1)
    exactVerifications: int = Field(64, ge=1)


class GangHealth(_Strict):
    """Running gangs and disruption (docs/concepts/gang-protection.md); a PodGroup's
    annotations override both keys."""

    #: A PodDisruptionBudget (minAvailable = minMember) for every running gang.
    protectRunningGangs: bool = True
    #: How long a running gang may stay below minMember before it is released whole.
    staleGangGraceSeconds: Annotated[int, Field(ge=0)] | Literal["never"] = 120

    def settings(self) -> GangHealthConfig:
        grace = self.staleGangGraceSeconds
        return GangHealthConfig(
            protect=self.protectRunningGangs,
            grace_seconds=math.inf if grace == "never" else float(grace),
        )


class LeaderElection(_Strict):
    enabled: bool = True
    leaseName: str = Field("gangsched", pattern=_NAME, max_length=253)
    leaseNamespace: str = Field("gangsched-system", pattern=_NAME, max_length=63)
    leaseDurationSeconds: float = Field(15.0, ge=1)
    renewDeadlineSeconds: float = Field(10.0, gt=0)
    retryPeriodSeconds: float = Field(2.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        # client-go's rules: a leader must give up (renew deadline) before its lease can
        # expire for the others, and retry more than once within the deadline.
        if self.renewDeadlineSeconds >= self.leaseDurationSeconds:
            raise ValueError("renewDeadlineSeconds must be less than leaseDurationSeconds")
        if self.retryPeriodSeconds >= self.renewDeadlineSeconds:
            raise ValueError("retryPeriodSeconds must be less than renewDeadlineSeconds")
        return self


class Config(_Strict):
    schedulerName: str = Field("gangsched", min_length=1)
    scoring: Scoring = Field(default_factory=Scoring)
    preemption: Preemption = Field(default_factory=Preemption)
    backoff: Backoff = Field(default_factory=Backoff)
    search: Search = Field(default_factory=Search)
    topology: Topology = Field(default_factory=Topology)
    bindConcurrency: int = Field(16, ge=1)
    #: How long a PodGroup's status waits while its bound members start (and a never-tried
    #: group's for its queued first attempt), so that it is written once, settled; 0 writes
    #: every change at once (gangsched.edge.podgroup_status).
    podGroupStatusHoldSeconds: float = Field(30.0, ge=0)
    #: How long a gang's volume decisions may take to be confirmed (claims bound) before its
    #: pods bind; kube-scheduler's VolumeBinding bindTimeoutSeconds.
    volumeBindTimeoutSeconds: int = Field(600, ge=1)
    metricsAddress: str = "0.0.0.0:10259"
    healthAddress: str = "0.0.0.0:10258"

    _addresses = field_validator("metricsAddress", "healthAddress")(_address)
    gangHealth: GangHealth = Field(default_factory=GangHealth)
    leaderElection: LeaderElection = Field(default_factory=LeaderElection)
    logFormat: Literal["json", "console"] = "json"

    def preemptor(
        self,
        *,
        strategy: str | None = None,
        scheduler_name: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> Preemptor | None:
        """The configured preemption strategy (`strategy` overrides it; "off" disables).
        With a `clock` (seconds since the epoch, or simulate's virtual time), gangs may wait
        for new capacity before it preempts (waitForCapacitySeconds and the PodGroups'
        annotation); every driver passes one."""
        chosen = strategy or (self.preemption.strategy if self.preemption.enabled else "off")
        if chosen == "off":
            return None
        workload = self._workload_preemptor(chosen, scheduler_name)
        if clock is None:
            return workload
        return CapacityWaitPreemptor(
            workload, clock=clock, default_seconds=float(self.preemption.waitForCapacitySeconds)
        )

    def _workload_preemptor(self, chosen: str, scheduler_name: str | None) -> Preemptor:
        # The scheduler's own cycle and placement settings: preemption's dry runs, its
        # upstream choice and its tie-break between domains must place as the cycle does.
        return build_preemptor(
            strategy=chosen,
            scheduler_name=scheduler_name or self.schedulerName,
            cycle=self.cycle_config(),
            placement=self.placement_config(),
            topology=TopologyPreemptionConfig(
                max_domains=self.topology.preemptionDomains,
                exact_units=self.topology.exactVictimUnits,
                exact_expansions=self.topology.exactExpansions,
                exact_verifications=self.topology.exactVerifications,
            ),
        )

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(
            scheduler_name=self.schedulerName,
            scoring=ScoringConfig(
                strategy=self.scoring.strategy,
                resources=dict(self.scoring.resources),
                weights=dict(self.scoring.weights),
            ),
            cycle=self.cycle_config(),
            topology=self.placement_config(),
            initial_backoff=self.backoff.initialSeconds,
            max_backoff=self.backoff.maxSeconds,
            pop_from_backoff=self.backoff.popFromBackoffQ,
        )

    def cycle_config(self) -> CycleConfig:
        """The gang cycle's settings, the scheduler's and its preemptor's alike."""
        return CycleConfig(search_budget=self.search.budget, search_width=self.search.width)

    def placement_config(self) -> TopologyConfig:
        """Topology placement's settings, the scheduler's and its preemptor's alike."""
        return TopologyConfig(
            max_evaluations=self.topology.maxEvaluations,
            percentage_of_domains=self.topology.percentageOfDomains,
            resources=dict(self.scoring.resources),
        )


class ConfigError(Exception):
    """The configuration file is unreadable or invalid; the message names each field."""


def load_config(path: str | Path | None) -> Config:
    if path is None:
        return Config()
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{path}: not valid YAML: {detail}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = ".".join(_field(part) for part in error["loc"]) or "(top level)"
            lines.append(f"{path}: {where}: {' '.join(error['msg'].split())}")
        raise ConfigError("\n".join(lines)) from None


def _field(part: object) -> str:
    """A field name as typed, quoted when it would not read as one (spaces, dots, control
    characters): each problem stays on one line."""
    text = str(part)
    if text and text.isprintable() and not any(c in text for c in ". :"):
        return text
    return repr(text)
