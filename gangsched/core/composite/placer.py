"""The tree placer: the placer (core/cycle.py's `Placer`) of CompositePodGroup trees.

core/placers.py hands it every unit that is a tree. It runs the tree's cycle (placement.py)
with the topology placer for the leaves, which runs the gang placer: the placers compose
downward, tree over topology over gang, and none of them imports one above it.
"""

from __future__ import annotations

from gangsched.core.composite.placement import TreePlacement
from gangsched.core.cycle import CycleConfig, CycleResult, Gang
from gangsched.core.framework import Framework
from gangsched.core.snapshot import Snapshot
from gangsched.core.topology.placement import TopologyPlacer


class TreePlacer:
    """Places a CompositePodGroup tree, every level or nothing of it (placement.py). Each
    leaf PodGroup is placed whole by `leaves`, the topology placer (so that a leaf's own
    constraint holds); a constrained level's subtree runs the tree's cycle again per domain,
    with that placer kept to the domain."""

    def __init__(self, leaves: TopologyPlacer) -> None:
        self.leaves = leaves

    @property
    def framework(self) -> Framework:
        return self.leaves.framework

    @property
    def config(self) -> CycleConfig:
        return self.leaves.config

    def place(self, gang: Gang, snap: Snapshot) -> CycleResult:
        return TreePlacement(self.leaves, gang, snap).run()
