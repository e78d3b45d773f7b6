"""Preemption for constrained gangs: one domain, the cheapest one, exact where small."""

from __future__ import annotations

import pytest

import gangsched.core.preemption.domains as topology_domains
from gangsched.core.decisions import SCHEDULED, Evict
from gangsched.core.model import DisruptionMode, Node, Pod, PodGroup
from gangsched.core.preemption import build_preemptor
from gangsched.core.preemption.engine import CannotHelp
from gangsched.core.scheduler import Scheduler
from gangsched.core.topology.request import TopologyRequest
from tests.builders import SCHEDULER, cluster, group, node, pod
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


def reserved_state(
    *, evicted: bool, squatter: bool = False, deleting_at: float | None = None
) -> tuple[Scheduler, list[Pod]]:
    """Members nominated to rack a, where their two victims are terminating (or gone, with
    `evicted`; `deleting_at`: their deletionTimestamp); rack b empty. With `squatter`, a
    higher-priority pod holds a-0."""
    nodes = racks({"a": 2, "b": 2})
    running = (
        []
        if evicted
        else [
            low(f"v{i}", f"a-{i}", 2, terminating=True, deleting_at=deleting_at) for i in range(2)
        ]
    )
    if squatter:
        running.append(low("squatter", "a-0", 2, priority=500))
    members = [
        pod(f"g-{i}", 2, memory=None, group="g", priority=100, created=100.0, nominated=f"a-{i}")
        for i in range(2)
    ]
    state = cluster(nodes, [*running, *members], [constrained("g", 2)])
    sched = Scheduler(state)
    sched.placer.group.clock = lambda: NOW
    return sched, members


#: The wall clock the placer sees in these tests.
NOW = 1_000_000.0


def test_a_later_cycle_waits_for_the_victims_in_its_reserved_domain() -> None:
    """Rack b fits now, but the preemption paid for rack a: the gang waits there (and says
    so) instead of taking room another gang may need, as issue 14 asks."""
    sched, members = reserved_state(evicted=False)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result != SCHEDULED
    assert report.message.startswith(
        "topology: waiting for 2 preemption victim(s) to leave example.com/rack=a, "
        "the domain reserved for the group"
    )
    assert all(sched.cluster.pods[p.key].node_name is None for p in members)
    assert not any(isinstance(d, Evict) for d in report.decisions)


def test_once_the_victims_are_gone_the_gang_binds_in_its_reserved_domain() -> None:
    sched, members = reserved_state(evicted=True)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result == SCHEDULED
    assert {sched.cluster.pods[p.key].node_name for p in members} == {"a-0", "a-1"}


def test_a_victim_long_past_its_grace_period_is_not_waited_for() -> None:
    """Victims whose deletionTimestamp passed a minute ago may never go (their node is
    gone): the gang stops holding out for rack a and binds where it fits."""
    sched, members = reserved_state(evicted=False, deleting_at=NOW - 60)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result == SCHEDULED, report.message
    assert {sched.cluster.pods[p.key].node_name for p in members} == {"b-0", "b-1"}


def test_victims_within_their_grace_period_are_waited_for() -> None:
    sched, members = reserved_state(evicted=False, deleting_at=NOW + 20)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result != SCHEDULED
    assert "waiting for 2 preemption victim(s)" in report.message


def test_a_reserved_domain_that_can_no_longer_hold_the_gang_is_left() -> None:
    """A higher-priority pod took a-0: even with the victims gone rack a is too small, so
    the gang goes where it fits."""
    sched, members = reserved_state(evicted=False, squatter=True)
    report = sched.schedule(sched.gang(members[0].group), 0.0)  # type: ignore[arg-type]
    assert report.result == SCHEDULED, report.message
    assert {sched.cluster.pods[p.key].node_name for p in members} == {"b-0", "b-1"}


def test_preemption_searches_only_domains_the_members_may_use() -> None:
    """Twenty CPU racks full of low pods, one GPU-pool rack where only high pods run: the
    members select the GPU pool, so no CPU rack is searched or loses a pod."""
    nodes = [
        *[node(f"c{i:02}-0", 2, labels={RACK: f"c{i:02}", "pool": "cpu"}) for i in range(20)],
        node("gpu-0", 2, labels={RACK: "gpu", "pool": "gpu"}),
    ]
    running = [low(f"lo{i:02}", f"c{i:02}-0", 2) for i in range(20)]
    running.append(low("hi", "gpu-0", 2, priority=500))
    members = [
        pod(
            "g-1",
            2,
            memory=None,
            group="g",
            priority=100,
            created=100.0,
            node_selector={"pool": "gpu"},
        )
    ]
    state = cluster(nodes, [*running, *members], [constrained("g", 1)])
    outcome, _ = preempt(state, members[0].group)  # type: ignore[arg-type]
    assert not outcome.victims
    # Only the GPU rack is a candidate, and no victim set can free it: without the node
    # filters, the twenty CPU racks would have been searched (and emptied for nothing).
    assert outcome.message.endswith(
        "(1 domain(s) cannot hold the group even without every lower-priority pod)"
    ), outcome.message


def spy_on_upstream_choice(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Record the name of every domain `_upstream_choice` returns (None when it finds none)."""
    seen: list[str | None] = []
    original = topology_domains._upstream_choice

    def spy(*args: object, **kwargs: object) -> object:
        found = original(*args, **kwargs)  # type: ignore[arg-type]
        seen.append(None if found is None else found.name)
        return found

    monkeypatch.setattr(topology_domains, "_upstream_choice", spy)
    return seen


def test_upstream_choice_is_found_for_a_gang_with_a_preferred_level(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the domain budget, upstream's domain still gets its turn; with a preferred
    (finer) level the placement is reported in a rack, and the zone holding it must be found."""
    zone = "example.com/zone"
    seen = spy_on_upstream_choice(monkeypatch)
    nodes = [node(f"n{z:02}", 2, labels={zone: f"z{z:02}", RACK: f"r{z:02}"}) for z in range(20)]
    running = [low(f"v{z:02}", f"n{z:02}", 2) for z in range(20)]
    g = group("g", 1, priority=100)
    g.topology = TopologyRequest(required=zone, preferred=(RACK,))
    members = [pod("g-1", 2, memory=None, group="g", priority=100, created=100.0)]
    state = cluster(nodes, [*running, *members], [g])
    outcome, _ = preempt(state, g.ref)
    assert len(outcome.victims) == 1
    assert seen and seen[0] is not None and seen[0].startswith(f"{zone}=z"), seen


def test_exact_search_counts_only_the_members_confined_to_the_domain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GangGroup: part a (one 1-CPU member) must sit in one rack, part b (one 4-CPU member)
    may go anywhere and fits on an unlabelled node. With the heuristics switched off, the
    exact search alone must find that one victim in rack r0 frees room for a; counting b's
    4 CPUs against the rack's capacity would reject every set."""
    monkeypatch.setattr(
        "gangsched.core.preemption.preemptor.mincost_search",
        lambda problem: CannotHelp("heuristics off for this test"),
    )
    nodes = [node("r0-0", 2, labels={RACK: "r0"}), node("big", 4)]
    running = [low("old", "r0-0", 1, created=1.0), low("young", "r0-0", 1, created=2.0)]
    part_a = group("a", 1, priority=100, gang_group=["a", "b"])
    part_a.topology = TopologyRequest(required=RACK)
    part_b = group("b", 1, priority=100, gang_group=["a", "b"])
    members = [
        pod("a-1", 1, memory=None, group="a", priority=100, created=100.0),
        pod("b-1", 4, memory=None, group="b", priority=100, created=100.0),
    ]
    state = cluster(nodes, [*running, *members], [part_a, part_b])
    outcome, _ = preempt(state, part_a.ref)
    assert victims(outcome) == ["young"], outcome.message


def test_waiting_at_a_preferred_level_does_not_climb_around_the_victims() -> None:
    """Preferred rack (within a required block, or alone): the members are nominated to rack
    a, where a victim is still terminating. Climbing to the block (or the whole cluster)
    would place them on a-1 and b-0, split across racks; the gang waits for rack a."""
    block = "example.com/block"
    for required in (block, None):
        nodes = [node(f"{r}-{i}", 2, labels={RACK: r, block: "x"}) for r in "ab" for i in range(2)]
        running = [low("v0", "a-0", 2, terminating=True)]
        members = [
            pod(
                f"g-{i}", 2, memory=None, group="g", priority=100, created=100.0, nominated=f"a-{i}"
            )
            for i in range(2)
        ]
        g = group("g", 2, priority=100)
        g.topology = TopologyRequest(required=required, preferred=(RACK,))
        state = cluster(nodes, [*running, *members], [g])
        sched = Scheduler(state)
        report = sched.schedule(sched.gang(g.ref), 0.0)
        assert report.result != SCHEDULED, (required, report.message)
        assert "waiting for 1 preemption victim(s) to leave" in report.message
        assert all(state.pods[p.key].node_name is None for p in members)


def test_upstream_choice_places_only_the_constrained_part_of_a_gang_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Part a must sit in one rack, part b (4 CPU) lands on an unlabelled node: upstream's
    domain is the rack holding a's members, wherever b goes."""
    seen = spy_on_upstream_choice(monkeypatch)
    nodes = [node(f"r{i}-0", 2, labels={RACK: f"r{i}"}) for i in range(3)] + [node("big", 4)]
    running = [low(f"x{i}", f"r{i}-0", 2) for i in range(3)]
    part_a = group("a", 1, priority=100, gang_group=["a", "b"])
    part_a.topology = TopologyRequest(required=RACK)
    part_b = group("b", 1, priority=100, gang_group=["a", "b"])
    members = [
        pod("a-1", 1, memory=None, group="a", priority=100, created=100.0),
        pod("b-1", 4, memory=None, group="b", priority=100, created=100.0),
    ]
    state = cluster(nodes, [*running, *members], [part_a, part_b])
    sched = Scheduler(
        state,
        preemptor=build_preemptor(
            scheduler_name=SCHEDULER,
            topology=topology_domains.TopologyPreemptionConfig(max_domains=1),
        ),
    )
    report = sched.schedule(sched.gang(part_a.ref), 0.0)
    assert report.preemption is not None and len(report.preemption.victims) == 1
    assert seen and seen[0] is not None and seen[0].startswith(f"{RACK}=r"), seen
