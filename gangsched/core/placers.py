"""The placer for each kind of scheduling unit: what the scheduler and preemption's dry runs
place a unit with.

As kube-scheduler's ScheduleOne hands a pod to the pod cycle and a PodGroup to the pod-group
cycle, both over one framework, a unit goes by its kind:

- a PodGroup or a Koordinator GangGroup to the topology placer (core/topology/placement.py),
  which runs the gang placer (core/gang_placer.py) per candidate domain, or once over the
  whole cluster when the unit has no topology constraint;
- a CompositePodGroup tree to the tree placer (core/composite/placer.py), which places its
  leaves with that same topology placer.

The placers compose downward (tree, topology, gang, framework) and none imports one above
it; only this module knows them all, and only the scheduler and preemption import it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gangsched.core.composite.placer import TreePlacer
from gangsched.core.cycle import CycleConfig, CycleResult, Gang, Placer
from gangsched.core.framework import Framework
from gangsched.core.snapshot import Snapshot
from gangsched.core.topology.placement import TopologyConfig, TopologyPlacer


class UnitPlacer:
    """Places any unit with the placer for its kind (module doc)."""

    def __init__(
        self,
        framework: Framework,
        config: CycleConfig | None = None,
        topology: TopologyConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        #: PodGroups and GangGroups; also the leaves of every tree.
        self.group = TopologyPlacer(framework, config, topology, clock=clock)
        #: CompositePodGroup trees.
        self.tree = TreePlacer(self.group)

    @property
    def framework(self) -> Framework:
        return self.group.framework

    @property
    def config(self) -> CycleConfig:
        return self.group.config

    def placer_for(self, gang: Gang) -> Placer:
        """The placer for the unit's kind."""
        return self.tree if gang.tree is not None else self.group

    def place(self, gang: Gang, snap: Snapshot) -> CycleResult:
        return self.placer_for(gang).place(gang, snap)
