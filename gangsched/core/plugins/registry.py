"""Assembles the default plugin set in kube-scheduler's order, with configurable scoring."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gangsched.core.framework import FilterPlugin, Framework, ScorePlugin
from gangsched.core.plugins.balanced_allocation import BalancedAllocation
from gangsched.core.plugins.dynamic_resources import DraExtendedResources, DynamicResources
from gangsched.core.plugins.inter_pod_affinity import InterPodAffinity
from gangsched.core.plugins.inter_pod_affinity_score import InterPodAffinityScore
from gangsched.core.plugins.least_allocated import LeastAllocated
from gangsched.core.plugins.most_allocated import MostAllocated
from gangsched.core.plugins.node_affinity import NodeAffinity, PreferredNodeAffinity
from gangsched.core.plugins.node_name import NodeName
from gangsched.core.plugins.node_os import NodeOS
from gangsched.core.plugins.node_ports import NodePorts
from gangsched.core.plugins.node_unschedulable import NodeUnschedulable
from gangsched.core.plugins.pod_topology_spread import PodTopologySpread, PodTopologySpreadScore
from gangsched.core.plugins.resources_fit import ResourcesFit
from gangsched.core.plugins.taint_toleration import PreferNoScheduleTaints, TaintToleration
from gangsched.core.plugins.unsupported import Unsupported
from gangsched.core.volumes.binding import VolumeBinding
from gangsched.core.volumes.limits import NodeVolumeLimits
from gangsched.core.volumes.restrictions import VolumeRestrictions
from gangsched.core.volumes.zone import VolumeZone

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"

#: kube-scheduler's default score weights.
DEFAULT_WEIGHTS: Mapping[str, float] = {
    "NodeResourcesFit": 1.0,
    "BalancedAllocation": 1.0,
    "NodeAffinity": 2.0,
    "TaintToleration": 3.0,
    "PodTopologySpread": 2.0,
    "InterPodAffinity": 2.0,
}


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    """How nodes are ranked. `strategy` picks spreading (LeastAllocated, the default) or bin
    packing (MostAllocated); `resources` weighs resources inside that score."""

    strategy: str = LEAST_ALLOCATED
    resources: Mapping[str, float] = field(default_factory=lambda: {"cpu": 1.0, "memory": 1.0})
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))


def build_framework(config: ScoringConfig | None = None) -> Framework:
    config = config or ScoringConfig()
    if config.strategy not in (LEAST_ALLOCATED, MOST_ALLOCATED):
        raise ValueError(f"unknown scoring strategy {config.strategy!r}")
    binding = VolumeBinding()
    filters: list[FilterPlugin] = [
        NodeUnschedulable(),
        NodeName(),
        TaintToleration(),
        NodeAffinity(),
        NodeOS(),
        NodePorts(),
        ResourcesFit(),
        VolumeRestrictions(),
        NodeVolumeLimits(),
        binding,
        VolumeZone(),
        PodTopologySpread(),
        InterPodAffinity(),
        DynamicResources(),
    ]
    fit: ScorePlugin = (
        MostAllocated(config.resources)
        if config.strategy == MOST_ALLOCATED
        else LeastAllocated(config.resources)
    )
    weight = {**DEFAULT_WEIGHTS, **config.weights}
    scores: list[tuple[ScorePlugin, float]] = [
        (fit, weight["NodeResourcesFit"]),
        (BalancedAllocation(config.resources), weight["BalancedAllocation"]),
        (PreferredNodeAffinity(), weight["NodeAffinity"]),
        (PreferNoScheduleTaints(), weight["TaintToleration"]),
        (PodTopologySpreadScore(), weight["PodTopologySpread"]),
        (InterPodAffinityScore(), weight["InterPodAffinity"]),
    ]
    return Framework(
        filters=filters,
        scores=scores,
        pre_filters=[Unsupported(), DraExtendedResources(), binding],
    )
