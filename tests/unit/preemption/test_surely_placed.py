"""`surely_placed` (core/preemption/prefix.py) answers a binary search's probe without running
it, so it must never say yes where the probe's placement fails: on random clusters (nodes of
mixed sizes, some cordoned, some tainted; lone victims; a gang of alike members, some
for random victim sets, a yes is checked against the real probe. Where it says no the probe
runs as before, so a no is always safe. The example cases show that it does say yes (or the
property would check nothing) and that it says no for members that differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.model import Taint
from gangsched.core.preemption.engine import Problem
from gangsched.core.preemption.kep import kep_search
from gangsched.core.preemption.prefix import surely_placed
from gangsched.core.scheduler import Scheduler
from gangsched.core.status import Code
from tests.builders import cluster, group, node, pod
from tests.unit.preemption.racks import PREEMPTOR, failed_cycle_problem

TAINT = Taint(key="dedicated", value="x", effect="NoSchedule")


@dataclass(frozen=True)
class Spec:
    #: Per node: (CPUs, cordoned, tainted).
    nodes: tuple[tuple[int, bool, bool], ...]
    #: Per victim: (node, CPUs).
    victims: tuple[tuple[int, int], ...]
    members: int
    member_cpu: int
    #: Victim sets to probe, as bit masks over the victims.
    sets: tuple[int, ...]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    nodes = tuple(
        (draw(st.sampled_from([2, 4, 6])), draw(st.booleans()), draw(st.booleans()))
        for _ in range(draw(st.integers(2, 5)))
    )
    victims = tuple(
        (draw(st.integers(0, len(nodes) - 1)), draw(st.integers(1, 3)))
        for _ in range(draw(st.integers(2, 10)))
    )
    sets = tuple(draw(st.lists(st.integers(0, 2 ** len(victims) - 1), min_size=4, max_size=8)))
    return Spec(nodes, victims, draw(st.integers(1, 5)), draw(st.integers(1, 3)), sets)


def problem_of(spec: Spec) -> Problem | None:
    nodes = [
        node(f"n{i}", cpu, unschedulable=cordoned, taints=[TAINT] if tainted else [])
        for i, (cpu, cordoned, tainted) in enumerate(spec.nodes)
    ]
    used = [0] * len(nodes)
    running = []
    for i, (at, cpu) in enumerate(spec.victims):
        if used[at] + cpu > spec.nodes[at][0]:
            continue
        used[at] += cpu
        running.append(pod(f"v{i}", cpu, memory=None, node_name=f"n{at}", priority=10))
    gang = group("g", spec.members, priority=PREEMPTOR)
    members = [
        pod(f"g-{i}", spec.member_cpu, memory=None, group="g", priority=PREEMPTOR)
        for i in range(spec.members)
    ]
    state = cluster(nodes, [*running, *members], [gang])
    problem = failed_cycle_problem(state, Scheduler(state).gang(gang.ref))
    if problem.failed.code is Code.SUCCESS or not problem.units:
        return None
    kep_search(problem)  # the run with every victim gone, as mincost makes it first
    return problem


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs())
def test_a_probe_said_to_succeed_places_every_member(spec: Spec) -> None:
    problem = problem_of(spec)
    if problem is None:
        return
    for bits in spec.sets:
        chosen = [u for i, u in enumerate(problem.units) if bits >> i & 1]
        if not surely_placed(problem, chosen):
            continue
        mark = problem.mark()
        try:
            problem.remove(chosen)
            result = problem.place(probe=True)
        finally:
            problem.rollback(mark)
        assert result.code is Code.SUCCESS, result.message
        assert len(result.placements) == len(problem.gang.pending)


def test_room_on_cordoned_or_tainted_nodes_does_not_count() -> None:
    # Two members of 2 CPUs; freeing n0 alone gives two slots, freeing the others none that
    # the members may use.
    spec = Spec(((4, False, False), (4, True, False), (4, False, True)), ((0, 4),), 2, 2, ())
    problem = problem_of(spec)
    assert problem is not None
    assert surely_placed(problem, problem.units)
    assert not surely_placed(problem, [])


def test_no_shortcut_for_members_that_differ() -> None:
    spec = Spec(((4, False, False), (4, False, False)), ((0, 4), (1, 4)), 2, 2, ())
    problem = problem_of(spec)
    assert problem is not None
    assert surely_placed(problem, problem.units)
    problem.gang.pending[1].requests = {"cpu": 3000}
    problem.memo.clear()
    assert not surely_placed(problem, problem.units)
