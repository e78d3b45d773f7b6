"""Building blocks: victim units, PDB accounting, the cost order, and the filter-based
(non-capacity) path for ports and pod anti-affinity."""

from __future__ import annotations

import dataclasses

import pytest

from gangsched.core.labels import LabelSelector
from gangsched.core.model import DisruptionMode, HostPort, PodAffinityTerm
from gangsched.core.preemption import KEP, MINCOST, collect_victims, terminating_victims
from gangsched.core.preemption.cost import NO_VICTIMS, Cost, kept_nominations, ranking, victim_cost
from gangsched.core.preemption.pdb import BudgetIndex
from gangsched.core.preemption.victims import Quorum, gang_priority
from tests.builders import budget, cluster, group, lone, node, pod, ref

from .drive import gang_of, nominations, overcommitted, preempt, settle, victims

BOTH = pytest.mark.parametrize("strategy", [KEP, MINCOST])


# ------------------------------------------------------------------------------- victims
def test_victim_units_and_priorities() -> None:
    state = cluster(
        [node("a"), node("b")],
        [
            pod("solo", priority=5, node_name="a", created=3),
            pod("high", priority=100, node_name="a"),
            pod("s-1", priority=90, node_name="a", group="single"),  # group priority 10 wins
            pod("all-1", priority=0, node_name="a", group="all", created=2),
            pod("all-2", priority=0, node_name="b", group="all", created=1),
            pod("all-gone", priority=0, node_name="b", group="all", terminating=True),
            pod("hiall-1", priority=0, node_name="b", group="hiall"),
            pod("mine-1", node_name="b", group="g", priority=50),
            pod("g-2", group="g", priority=50),
        ],
        [
            group("single", 1, priority=10),
            group("all", 2, priority=20, mode=DisruptionMode.ALL),
            group("hiall", 1, priority=60, mode=DisruptionMode.ALL),
            group("g", 2, priority=50),
        ],
    )
    gang = gang_of(state, ref("g"))
    assert gang_priority(gang) == 50
    units = {u.key: u for u in collect_victims(gang, state, 50)}
    assert set(units) == {"default/solo", "default/s-1", "default/all"}
    all_unit = units["default/all"]
    assert all_unit.is_group and all_unit.priority == 20
    assert sorted(p.name for p in all_unit.pods) == ["all-1", "all-2"]  # not the terminating
    assert all_unit.created == 1 and all_unit.size == 2 and len(all_unit.nodes) == 2
    assert units["default/s-1"].priority == 10
    assert units["default/s-1"].groups == (ref("single"),)
    assert units["default/solo"].groups == ()
    assert [u.index for u in collect_victims(gang, state, 50)] == [0, 1, 2]
    # Workloads disrupted: the lone pod is one, the Single-mode PodGroup one, the All group one.
    everything = victim_cost(units.values(), 0, BudgetIndex([]))
    assert everything.groups == 3
    assert victim_cost([units["default/solo"]], 0, BudgetIndex([])).groups == 1


def test_all_group_members_on_unknown_nodes_are_evicted_with_it() -> None:
    state = cluster(
        [node("a", 1)],
        [
            pod("v-1", node_name="a", group="v"),
            pod("v-2", node_name="gone-node", group="v"),
            pod("p", priority=10),
        ],
        [group("v", 2, priority=0, mode=DisruptionMode.ALL)],
    )
    outcome, _ = preempt(state, lone("p"))
    assert victims(outcome) == ["v-1", "v-2"]


def test_terminating_victims_counted_on_nominated_nodes_only() -> None:
    state = cluster(
        [node("a"), node("b")],
        [
            pod("t-a", node_name="a", terminating=True),
            pod("t-b", node_name="b", terminating=True),
            pod("t-hi", node_name="a", priority=100, terminating=True),
            pod("g-1", priority=50, group="g", nominated="a"),
        ],
        [group("g", 1)],
    )
    assert terminating_victims(gang_of(state, ref("g")), state, 50) == 1


# ---------------------------------------------------------------------------------- PDBs
def test_pdb_violations_count_evictions_beyond_the_allowance() -> None:
    pods = [pod(f"p{i}", node_name="a", labels={"app": "x"}) for i in range(4)]
    index = BudgetIndex([budget("x", 1, app="x"), budget("other", 0, app="y")])
    assert index.violations(pods[:1]) == 0
    assert index.violations(pods[:3]) == 2
    assert index.violations([pod("free", node_name="a")]) == 0
    assert not BudgetIndex([]).violations(pods)


def test_budgets_only_select_their_namespace() -> None:
    index = BudgetIndex([budget("x", 0, app="x")])
    other = pod("o", node_name="a", labels={"app": "x"}, namespace="elsewhere")
    assert index.violations([other]) == 0


def test_budget_selector_expressions() -> None:
    sel = LabelSelector(match_labels=(("tier", "db"),))
    b = dataclasses.replace(budget("db", 0), selector=sel)
    index = BudgetIndex([b])
    assert index.violations([pod("d", node_name="a", labels={"tier": "db"})]) == 1


# ---------------------------------------------------------------------------------- cost
def test_cost_order_is_lexicographic() -> None:
    def cost(**kw: float) -> Cost:
        base = dict(
            unplaced=0,
            pdb_violations=0,
            max_priority=0,
            disrupted=0,
            pods=0,
            groups=0,
            nodes=0,
            oldest_start=0.0,
        )
        base.update(kw)
        return Cost(**base, total_start=0.0)  # type: ignore[arg-type]

    assert cost(unplaced=0, pdb_violations=5) < cost(unplaced=1)
    assert cost(pdb_violations=0, max_priority=100) < cost(pdb_violations=1, max_priority=0)
    assert cost(max_priority=1, pods=10) < cost(max_priority=2, pods=1)
    assert cost(max_priority=1, disrupted=10) < cost(max_priority=2, disrupted=1)
    assert cost(disrupted=5, pods=5) < cost(disrupted=6, pods=1)  # a broken gang strands
    assert cost(pods=1, groups=1) < cost(pods=2, groups=0)
    assert cost(groups=0, nodes=2) < cost(groups=1, nodes=1)
    assert cost(nodes=1, oldest_start=0) < cost(nodes=2, oldest_start=-100)
    assert cost(oldest_start=-100) < cost(oldest_start=-10)  # oldest victim started later


def test_ranking_keeps_nominations_before_the_victims_age() -> None:
    younger = Cost(0, 0, 10, 1, 1, 0, 1, oldest_start=-200.0, total_start=-200.0)
    older = Cost(0, 0, 10, 1, 1, 0, 1, oldest_start=-100.0, total_start=-100.0)
    assert younger < older
    assert ranking(older, 1) < ranking(younger, 0)
    assert ranking(younger, 0) < ranking(dataclasses.replace(older, pods=2), 1)
    member = pod("m", nominated="n1")
    assert kept_nominations([(member, "n1"), (pod("other"), "n1")]) == 1
    assert kept_nominations([(member, "n2")]) == 0


def test_victim_cost_of_nothing() -> None:
    empty = victim_cost([], 0, BudgetIndex([]))
    assert empty.max_priority == NO_VICTIMS and empty.pods == 0


# ---------------------------------------------------------------- beyond capacity: filters
PORT = (HostPort("TCP", "", 8080),)


@BOTH
def test_lone_pod_evicts_the_port_holder(strategy: str) -> None:
    state = cluster(
        [node("a"), node("b")],
        [
            pod("port-a", "100m", priority=10, node_name="a", created=1, host_ports=PORT),
            pod("port-b", "100m", priority=20, node_name="b", created=2, host_ports=PORT),
            pod("filler", 1, priority=0, node_name="a"),
            pod("p", "100m", priority=50, host_ports=PORT),
        ],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert victims(outcome) == ["port-a"]  # lower priority; filler is not in the way
    assert nominations(outcome) == {"p": "a"}


@BOTH
def test_gang_with_ports_spreads_over_port_holders(strategy: str) -> None:
    state = cluster(
        [node("a"), node("b"), node("c")],
        [
            pod("port-a", "100m", priority=10, node_name="a", host_ports=PORT),
            pod("port-b", "100m", priority=10, node_name="b", host_ports=PORT),
            pod("port-c", "100m", priority=90, node_name="c", host_ports=PORT),
            pod("other-a", "100m", priority=10, node_name="a"),
            *(
                pod(f"g-{i}", "100m", priority=50, group="g", created=i, host_ports=PORT)
                for i in (1, 2)
            ),
        ],
        [group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert victims(outcome) == ["port-a", "port-b"]
    assert sorted(nominations(outcome).values()) == ["a", "b"]  # type: ignore[type-var]
    done = settle(state, strategy)
    assert sorted(done.bound.values()) == ["a", "b"]


def _anti(app: str) -> tuple[PodAffinityTerm, ...]:
    return (
        PodAffinityTerm(
            selector=LabelSelector(match_labels=(("app", app),)),
            topology_key="kubernetes.io/hostname",
        ),
    )


@BOTH
def test_preemptor_anti_affinity_evicts_the_conflicting_pod(strategy: str) -> None:
    state = cluster(
        [node("a"), node("b")],
        [
            pod("noisy-a", "100m", priority=10, node_name="a", labels={"app": "noisy"}),
            pod("noisy-b", "100m", priority=10, node_name="b", labels={"app": "noisy"}, created=5),
            dataclasses.replace(pod("p", "100m", priority=50), anti_affinity=_anti("noisy")),
        ],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert len(outcome.victims) == 1
    done = settle(state, strategy)
    assert "p" in done.bound and len(done.evicted) == 1


@BOTH
def test_victim_with_anti_affinity_blocks_until_evicted(strategy: str) -> None:
    """A running low pod that repels the preemptor (symmetric anti-affinity) must go."""
    state = cluster(
        [node("a")],
        [
            dataclasses.replace(
                pod("grumpy", "100m", priority=10, node_name="a"), anti_affinity=_anti("friendly")
            ),
            pod("ok", "100m", priority=10, node_name="a", created=9),
            pod("p", "100m", priority=50, labels={"app": "friendly"}),
        ],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert victims(outcome) == ["grumpy"]


@BOTH
def test_gang_group_parts_nominated_to_one_node_both_bind(strategy: str) -> None:
    """Regression: GangGroup members nominated together to one node were counted twice
    (assumed + reserved) and the gang preempted forever."""
    state = cluster(
        [node("a", 4), node("b", 1)],
        [
            pod("low", 4, priority=0, node_name="a"),
            pod("keep", 1, priority=100, node_name="b"),
            pod("x-1", 2, priority=50, group="x", created=1),
            pod("y-1", 2, priority=50, group="y", created=2),
        ],
        [group("x", 1, gang_group=["x", "y"]), group("y", 1, gang_group=["x", "y"])],
    )
    done = settle(state, strategy)
    assert done.evicted == ["low"]
    assert done.bound == {"x-1": "a", "y-1": "a"}
    assert not overcommitted(state)


@BOTH
def test_stale_nomination_of_an_unplaced_member_is_cleared(strategy: str) -> None:
    state = cluster(
        [node("a", 1), node("b", 1)],
        [
            pod("low", 1, priority=0, node_name="a"),
            pod("top", 1, priority=100, node_name="b"),
            pod("g-1", 1, priority=50, group="g", created=1),
            pod("g-2", 1, priority=50, group="g", created=2, nominated="b"),
        ],
        [group("g", 1)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert victims(outcome) == ["low"]
    noms = nominations(outcome)
    assert list(noms.values()).count(None) == 1 and "a" in noms.values()


# -------------------------------------------------------------------------------- quorum
def test_quorum_strands_members_only_when_the_group_drops_below_it() -> None:
    q = Quorum(ref("v"), min_member=4, bound=6)
    assert [q.stranded(k) for k in range(7)] == [0, 0, 0, 3, 2, 1, 0]
    # Already below its quorum: evicting its remnants strands nobody new.
    assert Quorum(ref("v"), min_member=4, bound=3).stranded(1) == 0


@BOTH
def test_a_whole_small_gang_goes_before_one_that_would_be_broken(strategy: str) -> None:
    """Two free slots are needed. Two pods of `big` (minMember 6) are the youngest, but
    taking them leaves its other four running without a quorum: 6 pods disrupted against
    `small`'s 2. mincost takes `small`; kep (upstream) reprieves by importance only."""
    state = cluster(
        [node("n0", 4), node("n1", 4)],
        [
            *(
                pod(f"big-{i}", 1, node_name=f"n{i // 4}", group="big", created=50)
                for i in range(6)
            ),
            pod("small-0", 1, node_name="n1", group="small", created=1),
            pod("small-1", 1, node_name="n1", group="small", created=1),
            pod("g-1", 1, priority=100, group="g", created=100),
            pod("g-2", 1, priority=100, group="g", created=101),
        ],
        [group("big", 6, priority=10), group("small", 2, priority=10), group("g", 2, priority=100)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    if strategy == MINCOST:
        assert victims(outcome) == ["small-0", "small-1"]
    units = {u.key: u for u in collect_victims(gang_of(state, ref("g")), state, 100)}
    assert units["default/big-0"].quorum == Quorum(ref("big"), 6, 6)
    cost = victim_cost([units["default/big-4"], units["default/big-5"]], 0, BudgetIndex([]))
    assert (cost.disrupted, cost.pods) == (6, 2)


def test_one_gang_that_makes_room_beats_several_smaller_ones() -> None:
    """Ten places are needed in a cluster full of gangs of 3, 4, 5 (young) and 10 (old).
    Smallest first takes 3 + 4 + 5 and leaves the 5-pod gang broken: 12 pods disrupted and
    three workloads; the 10-pod gang alone disrupts 10 and one."""
    sizes = {"g3": 3, "g4": 4, "g5": 5, "g10": 10}
    running = []
    slot = 0
    for name, size in sizes.items():
        for i in range(size):
            created = 1 if name == "g10" else 50
            running.append(
                pod(f"{name}-{i}", 1, node_name=f"n{slot // 2}", group=name, created=created)
            )
            slot += 1
    state = cluster(
        [node(f"n{i}", 2) for i in range(11)],
        [*running, *(pod(f"p-{i}", 1, priority=100, group="p", created=100) for i in range(10))],
        [
            *(group(name, size, priority=10) for name, size in sizes.items()),
            group("p", 10, priority=100),
        ],
    )
    outcome, _ = preempt(state, ref("p"), MINCOST)
    assert victims(outcome) == sorted(f"g10-{i}" for i in range(10))
