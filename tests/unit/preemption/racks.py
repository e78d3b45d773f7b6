"""Racks of running victims beside one pending gang, for the properties of the preemption
bounds (test_domain_bounds, test_slot_bounds), and the Problem that a gang's failed cycle
hands the searches (those and test_surely_placed).

Under `make test` hypothesis derives each property's seed from the property's own source,
so the properties keep their bodies and reach these helpers through their modules' own
`build`, `base_problem`, `bounds_of` and `problem_of`: moving the builder here changed no
example.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import Gang
from gangsched.core.gang_placer import GangPlacer
from gangsched.core.model import DisruptionMode, Pod, PodGroup
from gangsched.core.plugins import build_framework
from gangsched.core.preemption.domain_bounds import Bound, disruption_bounds
from gangsched.core.preemption.engine import PreemptionConfig, Problem
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import VictimTable, collect_victim_table
from gangsched.core.snapshot import Snapshot
from gangsched.core.topology.domains import partition
from tests.builders import cluster, group, node, pod

RACK = "example.com/rack"
#: The pending gang's priority and name.
PREEMPTOR = 100
GANG = "g"
#: CPUs of every node.
NODE_CPU = 4

#: Per group of victims: (minMember, All mode?).
VictimGroups = tuple[tuple[int, bool], ...]


@dataclass(frozen=True)
class Victim:
    rack: int
    node: int
    cpu: int
    priority: int
    #: None: a lone pod; else the index of its group in `Racks.groups`.
    group: int | None


@dataclass(frozen=True)
class Racks:
    """What a test's spec says of the cluster apart from its gang."""

    #: Nodes per rack.
    racks: tuple[int, ...]
    groups: VictimGroups
    victims: tuple[Victim, ...]


def draw_racks(
    draw: st.DrawFn, *, victim_cpu: int
) -> tuple[tuple[int, ...], VictimGroups, tuple[Victim, ...]]:
    """Two racks of 1-3 nodes each, 0-3 victim groups (Single or All mode), and 1-8 victims
    of 1 to `victim_cpu` CPUs at priority 10 or 20, lone or in a group (one that would
    overcommit its node is left out when the cluster is built)."""
    racks = tuple(draw(st.lists(st.integers(1, 3), min_size=2, max_size=2)))
    groups = tuple(
        (draw(st.integers(1, 4)), draw(st.booleans())) for _ in range(draw(st.integers(0, 3)))
    )
    victims = []
    for _ in range(draw(st.integers(1, 8))):
        rack = draw(st.integers(0, len(racks) - 1))
        victims.append(
            Victim(
                rack=rack,
                node=draw(st.integers(0, racks[rack] - 1)),
                cpu=draw(st.integers(1, victim_cpu)),
                priority=draw(st.sampled_from([10, 20])),
                group=draw(st.one_of(st.none(), st.integers(0, len(groups) - 1)))
                if groups
                else None,
            )
        )
    return racks, groups, tuple(victims)


def rack_cluster(spec: Racks, *, members: Sequence[int]) -> tuple[ClusterState, PodGroup]:
    """Nodes `r<rack>-<node>` (NODE_CPU each, labelled RACK=r<rack>), the victims running on
    them (a group's victims at its first victim's priority, as upstream validates), and the
    gang GANG at PREEMPTOR pending whole: a member of `members[i]` CPUs each, minMember all."""
    nodes = [
        node(f"r{r}-{n}", NODE_CPU, labels={RACK: f"r{r}"})
        for r, count in enumerate(spec.racks)
        for n in range(count)
    ]
    victim_groups = [
        group(
            f"v{i}",
            min_member,
            priority=None,
            mode=DisruptionMode.ALL if all_mode else DisruptionMode.SINGLE,
        )
        for i, (min_member, all_mode) in enumerate(spec.groups)
    ]
    used: dict[str, int] = {}
    running = []
    group_priority: dict[int, int] = {}
    for i, victim in enumerate(spec.victims):
        name = f"r{victim.rack}-{victim.node}"
        if used.get(name, 0) + victim.cpu > NODE_CPU:
            continue  # never overcommit a node
        used[name] = used.get(name, 0) + victim.cpu
        priority = (
            group_priority.setdefault(victim.group, victim.priority)
            if victim.group is not None
            else victim.priority
        )
        running.append(
            pod(
                f"run{i}",
                victim.cpu,
                memory=None,
                node_name=name,
                priority=priority,
                group=f"v{victim.group}" if victim.group is not None else None,
                created=float(i),
            )
        )
    gang = group(GANG, len(members), priority=PREEMPTOR)
    pending = [
        pod(f"{GANG}-{i}", cpu, memory=None, group=GANG, priority=PREEMPTOR)
        for i, cpu in enumerate(members)
    ]
    return cluster(nodes, [*running, *pending], [*victim_groups, gang]), gang


def rack_bounds(snap: Snapshot, *, pending: Sequence[Pod], table: VictimTable) -> dict[str, Bound]:
    """Per rack, `disruption_bounds` for placing every pod of `pending` there."""
    split = partition(snap, RACK)
    return disruption_bounds(
        domains=split.domains,
        of_node=split.of_node,
        need=np.sum([snap.vector(p) for p in pending], axis=0),
        table=table,
        snap=snap,
    )


def failed_cycle_problem(state: ClusterState, gang: Gang) -> Problem:
    """What the preemptor is handed after `gang`'s cycle on `state` (the cycle's result in
    `failed`, the snapshot rolled back): every pod below PREEMPTOR a potential victim, no
    budgets, the default configuration. A cycle that succeeded still gives a Problem; the
    caller that cares checks `failed.code`."""
    framework = build_framework()
    placer = GangPlacer(framework)
    mark = state.snapshot.checkpoint()
    failed = placer.place(gang, state.snapshot)
    state.snapshot.rollback(mark)
    return Problem(
        gang=gang,
        failed=failed,
        cluster=state,
        framework=framework,
        placer=placer,
        probe_placer=placer,
        priority=PREEMPTOR,
        table=collect_victim_table(gang, state, PREEMPTOR),
        budgets=BudgetIndex([]),
        config=PreemptionConfig(),
    )
