"""What one scheduling cycle places and what it gives back: the types every placer shares.

A cycle places one unit (`Gang`): a PodGroup, every PodGroup of a Koordinator GangGroup, or
every PodGroup of a CompositePodGroup tree, each PodGroup with its members sorted by state
(`GangMember`), and returns a `CycleResult`. The placers compose downward, each a `Placer`:

- the gang placer (core/gang_placer.py) places one gang's members over the framework;
- the topology placer (core/topology/placement.py) runs a gang placer per candidate domain;
- the tree placer (core/composite/placer.py) places each level of a tree with the topology
  placer;

and core/placers.py picks the one for the unit the scheduler popped. This module sits below
all of them and imports none, so that each can import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gangsched.core.composite.tree import BrokenTree, TreeNode
from gangsched.core.framework import Diagnosis, Framework
from gangsched.core.model import GroupRef, Pod, PodGroup
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code
from gangsched.core.topology.report import TopologyReport
from gangsched.core.validation import validate_group


@dataclass(slots=True)
class GangMember:
    group: PodGroup
    bound: list[Pod]
    pending: list[Pod]
    #: Unbound members left to another scheduler: only validation looks at them.
    foreign: list[Pod] = field(default_factory=list)
    #: Unbound members held by spec.schedulingGates: never placed, never counted toward
    #: minMember; they join later, when their last gate goes.
    gated: list[Pod] = field(default_factory=list)
    #: How many bound members count toward minMember, when not all of them do (Koordinator's
    #: match policy, see Scheduler.gang); None: every bound member counts.
    counted_bound: int | None = None

    @property
    def quorum_bound(self) -> int:
        return len(self.bound) if self.counted_bound is None else self.counted_bound


@dataclass(slots=True)
class Gang:
    """What one cycle places: a PodGroup, every PodGroup of a Koordinator GangGroup, or every
    PodGroup of a CompositePodGroup tree (`tree`, placed by gangsched.core.composite.placer)."""

    key: GroupRef
    parts: list[GangMember]
    #: The CompositePodGroup tree rooted at `key`, when the unit is one.
    tree: TreeNode | None = None
    #: Why the tree this PodGroup names a parent in has no root (nothing is placed).
    broken: BrokenTree | None = None

    @property
    def pending(self) -> list[Pod]:
        return [pod for part in self.parts for pod in part.pending]

    def ref_of(self, pod: Pod) -> GroupRef:
        for part in self.parts:
            if any(member is pod for member in part.pending):
                return part.group.ref
        raise KeyError(pod.key)

    @property
    def priority(self) -> int:
        prios = [part.group.priority for part in self.parts if part.group.priority is not None]
        prios += [pod.priority for pod in self.pending]
        return max(prios, default=0)


@dataclass(slots=True)
class CycleConfig:
    #: Node assumptions the backtracking search may try before giving up.
    search_budget: int = 2000
    #: Candidate nodes tried per pod in the backtracking search (best scores first).
    search_width: int = 8


@dataclass(slots=True)
class CycleResult:
    code: Code
    #: Pending pod -> node index, when code is SUCCESS (kept assumed in the snapshot).
    placements: list[tuple[Pod, int]] = field(default_factory=list)
    #: Gang-level message (why it waits, failed or errored).
    message: str = ""
    #: Per pending pod that was not placed: the kube-scheduler style reason.
    pod_messages: dict[str, str] = field(default_factory=dict)
    #: The first pod that fit nowhere and its per-node diagnosis (for preemption).
    failed_pod: Pod | None = None
    diagnosis: Diagnosis | None = None
    #: Which search found the placement: greedy, largest-first, bin-packing, backtracking.
    strategy: str = ""
    #: For a topology-constrained gang: the domains tried and the one chosen (issue 14).
    topology: TopologyReport | None = None
    #: Trees: every level (CompositePodGroup and PodGroup) -> (placed, why), for status.
    levels: dict[GroupRef, tuple[bool, str]] = field(default_factory=dict)


def member_order(pods: Sequence[Pod]) -> list[Pod]:
    """Upstream order: higher priority first, then first seen, then name."""
    return sorted(pods, key=lambda p: (-p.priority, p.created, p.namespace, p.name))


def validate(gang: Gang) -> str | None:
    """The consistency checks upstream runs before a group cycle; a message if they fail."""
    for part in gang.parts:
        error = validate_group(
            part.group, pending=part.pending, bound=part.bound, foreign=[*part.foreign, *part.gated]
        )
        if error is not None:
            return error
    return None


class Placer(Protocol):
    """Places one unit over a snapshot: a success stays assumed in it (the scheduler commits
    it), anything else is rolled back. `framework` and `config` are what it places with."""

    @property
    def framework(self) -> Framework: ...

    @property
    def config(self) -> CycleConfig: ...

    def place(self, gang: Gang, snap: Snapshot) -> CycleResult: ...
