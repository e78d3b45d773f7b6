"""Workload-aware preemption (KEP-5710) for the pure core.

`build_preemptor()` returns the `Preemptor` the scheduler calls when a gang cannot be placed.
Two strategies share victims, PDB accounting, verification and actuation:

* `kep` reproduces upstream: one dry run with every potential victim removed, its members
  placed victim-aware (each where the victims it adds cost least), then reprieve in
  importance order around that one placement (per-node search for a lone pod);
* `mincost` (default) also steers the placement away from costly victims and keeps the
  cheapest verified candidate by the order documented in `cost.py`; it always considers the
  `kep` answer, so it is never costlier.
"""

from __future__ import annotations

from gangsched.core.cycle import CycleConfig
from gangsched.core.preemption.cost import Cost
from gangsched.core.preemption.domains import TopologyPreemptionConfig
from gangsched.core.preemption.engine import PreemptionConfig
from gangsched.core.preemption.preemptor import (
    KEP,
    MINCOST,
    STRATEGIES,
    WorkloadPreemptor,
    terminating_victims,
)
from gangsched.core.preemption.victims import VictimUnit, collect_victims
from gangsched.core.scheduler import Preemptor
from gangsched.core.topology.placement import TopologyConfig

__all__ = [
    "KEP",
    "MINCOST",
    "STRATEGIES",
    "Cost",
    "PreemptionConfig",
    "TopologyPreemptionConfig",
    "VictimUnit",
    "WorkloadPreemptor",
    "build_preemptor",
    "collect_victims",
    "terminating_victims",
]


def build_preemptor(
    *,
    strategy: str = MINCOST,
    scheduler_name: str = "gangsched",
    config: PreemptionConfig | None = None,
    cycle: CycleConfig | None = None,
    topology: TopologyPreemptionConfig | None = None,
    placement: TopologyConfig | None = None,
) -> Preemptor:
    """The preemptor for `Scheduler(preemptor=...)`; ValueError names the allowed strategies.
    `cycle` and `placement` are the scheduler's own (SchedulerConfig.cycle and .topology):
    preemption's dry runs then place exactly as the cycle they stand in for."""
    return WorkloadPreemptor(
        strategy,
        scheduler_name=scheduler_name,
        config=config,
        cycle=cycle,
        topology=topology,
        placement=placement,
    )
