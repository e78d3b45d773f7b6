"""Preemption for constrained gangs: one domain, the cheapest one, exact where small."""

from __future__ import annotations

from gangsched.core.model import DisruptionMode, Node, Pod, PodGroup
from gangsched.core.topology.request import TopologyRequest
from tests.builders import cluster, group, node, pod
from tests.unit.preemption.drive import BOTH, preempt, preemptor_gang, settle, victims

RACK = "example.com/rack"


def racks(layout: dict[str, int], cpu: int = 2) -> list[Node]:
    return [
        node(f"{rack}-{i}", cpu, labels={RACK: rack})
        for rack, count in layout.items()
        for i in range(count)
    ]


def constrained(name: str, min_member: int, priority: int = 100) -> PodGroup:
    g = group(name, min_member, priority=priority)
    g.topology = TopologyRequest(required=RACK)
    return g


def low(name: str, node_name: str, cpu: int = 1, priority: int = 10, **kw: object) -> Pod:
    return pod(name, cpu, memory=None, node_name=node_name, priority=priority, **kw)  # type: ignore[arg-type]


@BOTH
def test_victims_only_in_the_chosen_domain_and_members_placed_there(strategy: str) -> None:
    # Rack a: 2 nodes full of priority-10 pods; rack b: 2 nodes full of priority-20 pods.
    nodes = racks({"a": 2, "b": 2})
    running = [
        low("a0", "a-0", 2),
        low("a1", "a-1", 2),
        low("b0", "b-0", 2, priority=20),
        low("b1", "b-1", 2, priority=20),
    ]
    members = preemptor_gang("g", 2, 2)
    state = cluster(nodes, [*running, *members], [constrained("g", 2)])
    out = settle(state, strategy)
    assert sorted(out.evicted) == ["a0", "a1"]
    assert {out.bound["g-1"], out.bound["g-2"]} <= {"a-0", "a-1"}


@BOTH
def test_cheapest_domain_wins_over_the_upstream_choice(strategy: str) -> None:
    """Upstream removes every victim and takes the best-scored rack: a (4 of 4 CPU allocated
    after placing, against 6 of 8 in b), where both pods go. The cheapest rack by victims is
    b: one priority-10 pod frees b-1 for both members."""
    nodes = [
        node("a-0", 2, labels={RACK: "a"}),
        node("a-1", 2, labels={RACK: "a"}),
        node("b-0", 4, labels={RACK: "b"}),
        node("b-1", 4, labels={RACK: "b"}),
    ]
    running = [
        low("a0", "a-0", 2),
        low("a1", "a-1", 2),
        low("b0", "b-0", 4, priority=20),
        low("b-small", "b-1", 2),
    ]
    members = preemptor_gang("g", 2, 2)
    state = cluster(nodes, [*running, *members], [constrained("g", 2)])
    outcome, _ = preempt(state, members[0].group, strategy)  # type: ignore[arg-type]
    # Both strategies search every rack: kep gives upstream's answer per rack, not overall.
    assert victims(outcome) == ["b-small"]


def test_no_domain_can_be_freed() -> None:
    nodes = racks({"a": 1, "b": 1})
    running = [
        low("a-high", "a-0", 1, priority=200),
        low("a-low", "a-0", 1),
        low("b-high", "b-0", 1, priority=200),
        low("b-low", "b-0", 1),
    ]
    members = preemptor_gang("g", 2, 1)
    state = cluster(nodes, [*running, *members], [constrained("g", 2)])
    outcome, _ = preempt(state, members[0].group)  # type: ignore[arg-type]
    assert not outcome.started
    assert "topology" in outcome.message


def test_all_mode_group_counts_whole_even_outside_the_domain() -> None:
    """An All-mode victim group spanning racks a and b costs all its pods: the single pod
    in rack c is cheaper."""
    nodes = racks({"a": 1, "b": 1, "c": 1})
    victim_group = group("v", 2, priority=10, mode=DisruptionMode.ALL)
    running = [
        low("v-0", "a-0", 2, group="v"),
        low("v-1", "b-0", 2, group="v"),
        low("c0", "c-0", 2),
    ]
    members = preemptor_gang("g", 2, 1)
    state = cluster(nodes, [*running, *members], [victim_group, constrained("g", 2)])
    outcome, _ = preempt(state, members[0].group)  # type: ignore[arg-type]
    assert victims(outcome) == ["c0"]


def test_nominated_domain_stays_reserved_for_the_next_cycle() -> None:
    nodes = racks({"a": 2, "b": 2})
    running = [low("a0", "a-0", 2), low("a1", "a-1", 2), low("b0", "b-0", 2), low("b1", "b-1", 2)]
    members = preemptor_gang("g", 2, 2)
    state = cluster(nodes, [*running, *members], [constrained("g", 2)])
    out = settle(state)
    rack = {n[0] for n in out.bound.values()}
    assert len(rack) == 1
    assert len(out.evicted) == 2 and {e[0] for e in out.evicted} == rack


def test_rack_of_whole_small_gangs_beats_breaking_a_big_gang() -> None:
    """Rack a: two whole 2-pod gangs; rack b: half of an 8-pod gang whose other half runs in
    rack c. Either frees 4 slots with 4 evictions, and b's set disrupts one PodGroup against
    a's two; but evicting from b leaves the big gang's other 4 members running below their
    minMember: 8 pods disrupted against 4."""
    nodes = racks({"a": 2, "b": 2, "c": 2})
    groups = [
        group("s1", 2, priority=10),
        group("s2", 2, priority=10),
        group("big", 8, priority=10),
    ]
    running = [
        low("s1-0", "a-0", group="s1"),
        low("s1-1", "a-0", group="s1"),
        low("s2-0", "a-1", group="s2"),
        low("s2-1", "a-1", group="s2"),
        *(
            low(f"big-{i}", f"{'b' if i < 4 else 'c'}-{i % 2}", group="big", created=50.0)
            for i in range(8)
        ),
    ]
    members = preemptor_gang("g", 4, 1)
    state = cluster(nodes, [*running, *members], [*groups, constrained("g", 4)])
    outcome, _ = preempt(state, members[0].group)  # type: ignore[arg-type]
    assert victims(outcome) == ["s1-0", "s1-1", "s2-0", "s2-1"]


def test_remnants_of_a_broken_gang_go_before_breaking_another() -> None:
    """Rack a holds two members of a 4-pod gang that already lost two (below its quorum),
    rack b two members of an intact 2-pod gang: the remnants are the cheaper victims."""
    nodes = racks({"a": 1, "b": 1})
    groups = [group("broken", 4, priority=10), group("whole", 2, priority=10)]
    running = [
        low("broken-0", "a-0", group="broken", created=1.0),
        low("broken-1", "a-0", group="broken", created=1.0),
        low("whole-0", "b-0", group="whole", created=60.0),
        low("whole-1", "b-0", group="whole", created=60.0),
    ]
    members = preemptor_gang("g", 1, 1)
    state = cluster(nodes, [*running, *members], [*groups, constrained("g", 1)])
    outcome, _ = preempt(state, members[0].group)  # type: ignore[arg-type]
    assert len(victims(outcome)) == 1 and victims(outcome)[0].startswith("broken-")
