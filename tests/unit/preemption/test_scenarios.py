"""Upstream's workload-aware preemption scenarios and the seed walkthrough, as core tests.

Each runs under both strategies unless the point of the test is where they differ.
"""

from __future__ import annotations

import pytest

from gangsched.core.decisions import Event, Evict, Nominate, SetCondition
from gangsched.core.model import DisruptionMode, Pod
from gangsched.core.preemption import KEP, MINCOST, build_preemptor
from tests.builders import Quantity, budget, cluster, group, lone, node, pod, ref

from .drive import (
    disruption_conditions,
    events,
    nominations,
    overcommitted,
    preempt,
    settle,
    victims,
)

BOTH = pytest.mark.parametrize("strategy", [KEP, MINCOST])
LOW, MID, HIGH = 10, 50, 100


def _gang(
    name: str, n: int, cpu: Quantity, *, priority: int = HIGH, start: float = 100.0
) -> list[Pod]:
    return [
        pod(f"{name}-{i + 1}", cpu, priority=priority, group=name, created=start + i)
        for i in range(n)
    ]


# ------------------------------------------------------------------- public scenarios
@BOTH
def test_full_preemption(strategy: str) -> None:
    """wap-full-preemption: 3 low pods fill the node; a 3-pod gang evicts all of them."""
    state = cluster(
        [node("n1", 3)],
        [pod(f"low-{i}", priority=LOW, node_name="n1", created=i) for i in (1, 2, 3)]
        + _gang("gang", 3, 1),
        [group("gang", 3)],
    )
    outcome, _ = preempt(state, ref("gang"), strategy)
    assert outcome.started
    assert victims(outcome) == ["low-1", "low-2", "low-3"]
    assert nominations(outcome) == {"gang-1": "n1", "gang-2": "n1", "gang-3": "n1"}
    done = settle(state, strategy)
    assert sorted(done.bound) == ["gang-1", "gang-2", "gang-3"]
    assert not overcommitted(state)


@BOTH
def test_pdb_reprieve(strategy: str) -> None:
    """wap-pdb-reprieve: the two PDB-protected pods are spared, only low-3 goes."""
    protected = {"app": "protected"}
    state = cluster(
        [node("n1", 3)],
        [
            pod("low-1", priority=LOW, node_name="n1", created=1, labels=protected),
            pod("low-2", priority=LOW, node_name="n1", created=2, labels=protected),
            pod("low-3", priority=LOW, node_name="n1", created=3),
            *_gang("high", 2, "500m"),
        ],
        [group("high", 2)],
        [budget("protected", 0, app="protected")],
    )
    outcome, _ = preempt(state, ref("high"), strategy)
    assert victims(outcome) == ["low-3"]
    assert outcome.pdb_violations == 0
    assert outcome.reprieved == 2
    done = settle(state, strategy)
    assert done.evicted == ["low-3"]
    assert sorted(done.bound) == ["high-1", "high-2"]


@BOTH
def test_pdb_violated_only_when_nothing_else_works(strategy: str) -> None:
    protected = {"app": "protected"}
    state = cluster(
        [node("n1", 3)],
        [
            pod("low-1", priority=LOW, node_name="n1", created=1, labels=protected),
            pod("low-2", priority=LOW, node_name="n1", created=2, labels=protected),
            pod("low-3", priority=LOW, node_name="n1", created=3),
            *_gang("high", 2, 1),
        ],
        [group("high", 2)],
        [budget("protected", 0, app="protected")],
    )
    outcome, _ = preempt(state, ref("high"), strategy)
    assert len(outcome.victims) == 2
    assert "low-3" in victims(outcome)
    assert outcome.pdb_violations == 1


@BOTH
def test_victim_all_mode(strategy: str) -> None:
    """wap-victim-all-mode: an All group goes whole for a 1-CPU pod (nothing cheaper)."""
    state = cluster(
        [node("n1", 3)],
        [pod(f"v-{i}", priority=LOW, node_name="n1", group="victims", created=i) for i in (1, 2, 3)]
        + [pod("preemptor", priority=HIGH, created=4)],
        [group("victims", 3, priority=LOW, mode=DisruptionMode.ALL)],
    )
    outcome, _ = preempt(state, lone("preemptor"), strategy)
    assert victims(outcome) == ["v-1", "v-2", "v-3"]
    evict = [d for d in outcome.decisions if isinstance(d, Evict)]
    assert {d.preemptor for d in evict} == {lone("preemptor")}
    related = {(e.related_kind, e.related) for e in events(outcome.decisions)}
    assert related == {("Pod", "default/preemptor")}
    done = settle(state, strategy)
    assert done.bound == {"preemptor": "n1"}


@BOTH
def test_victim_single_mode_evicts_one(strategy: str) -> None:
    state = cluster(
        [node("n1", 3)],
        [pod(f"v-{i}", priority=LOW, node_name="n1", group="victims", created=i) for i in (1, 2, 3)]
        + [pod("preemptor", priority=HIGH, created=4)],
        [group("victims", 3, priority=LOW)],
    )
    outcome, _ = preempt(state, lone("preemptor"), strategy)
    assert victims(outcome) == ["v-3"]  # youngest of equal priority


@BOTH
def test_seed_walkthrough(strategy: str) -> None:
    """The Koordinator seed: 2 x 4 CPU full of low pods; a 2 x 3 CPU gang evicts both and
    each member is nominated to its own node; DisruptionTarget names the group."""
    state = cluster(
        [node("cn-beijing.1"), node("cn-beijing.2")],
        [
            pod("lp-pod-1", 4, priority=1000, node_name="cn-beijing.1", created=1),
            pod("lp-pod-2", 4, priority=1000, node_name="cn-beijing.2", created=2),
            pod("hp-worker-1", 3, priority=1_000_000, group="hp-training-job", created=3),
            pod("hp-worker-2", 3, priority=1_000_000, group="hp-training-job", created=4),
        ],
        [group("hp-training-job", 2)],
    )
    outcome, _ = preempt(state, ref("hp-training-job"), strategy)
    assert victims(outcome) == ["lp-pod-1", "lp-pod-2"]
    noms = nominations(outcome)
    assert sorted(noms) == ["hp-worker-1", "hp-worker-2"]
    assert sorted(noms.values()) == ["cn-beijing.1", "cn-beijing.2"]  # type: ignore[type-var]
    conditions = disruption_conditions(outcome.decisions)
    assert [c.pod for c in conditions] == ["default/lp-pod-1", "default/lp-pod-2"]
    assert conditions[0].status == "True"
    assert conditions[0].reason == "PreemptionByScheduler"
    assert conditions[0].message == (
        "gangsched: preempting to accommodate a higher priority pod group, "
        "preemptor: default/hp-training-job, triggerpod: default/hp-worker-1"
    )
    done = settle(state, strategy)
    assert sorted(done.evicted) == ["lp-pod-1", "lp-pod-2"]
    assert sorted(done.bound.values()) == ["cn-beijing.1", "cn-beijing.2"]


@BOTH
def test_decisions_per_victim_in_order(strategy: str) -> None:
    state = cluster(
        [node("n1", 2)],
        [
            pod("low", 2, priority=LOW, node_name="n1", created=1),
            *_gang("g", 2, 1),
            pod("pending-low", 1, priority=1, nominated="n1", created=2),
        ],
        [group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    decisions = outcome.decisions
    noms = [d for d in decisions if isinstance(d, Nominate)]
    assert Nominate("default/pending-low", "uid-default-pending-low", None) in noms
    assert {(d.pod, d.node) for d in noms if d.node} == {
        ("default/g-1", "n1"),
        ("default/g-2", "n1"),
    }
    tail = decisions[len(noms) :]
    assert [type(d) for d in tail] == [SetCondition, Evict, Event]
    cond, evict, event = tail
    assert isinstance(cond, SetCondition) and isinstance(evict, Evict)
    assert isinstance(event, Event)
    assert cond.message == evict.message == event.note
    assert (event.regarding_kind, event.regarding, event.type) == ("Pod", "default/low", "Normal")
    assert (event.reason, event.action) == ("Preempted", "Preempting")
    assert (event.related_kind, event.related) == ("PodGroup", "default/g")
    assert evict.uid == "uid-default-low" and evict.preemptor == ref("g")
    assert outcome.strategy == strategy


# --------------------------------------------------------------------- the four cases
@BOTH
def test_lone_pod_preempts_pods(strategy: str) -> None:
    state = cluster(
        [node("a", 2), node("b", 2)],
        [
            pod("a-1", priority=20, node_name="a", created=1),
            pod("a-2", priority=20, node_name="a", created=2),
            pod("b-1", priority=LOW, node_name="b", created=1),
            pod("b-2", priority=30, node_name="b", created=2),
            pod("p", priority=HIGH, created=5),
        ],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert victims(outcome) == ["b-1"]  # lowest highest-victim priority
    assert nominations(outcome) == {"p": "b"}


@BOTH
def test_lone_pod_preempts_groups(strategy: str) -> None:
    state = cluster(
        [node("a", 2), node("b", 2)],
        [
            pod("ga-1", priority=LOW, node_name="a", group="ga", created=1),
            pod("ga-2", priority=LOW, node_name="b", group="ga", created=2),
            pod("keep", priority=HIGH, node_name="b", created=1),
            pod("other", priority=HIGH, node_name="a", created=1),
            pod("p", priority=HIGH, created=5),
        ],
        [group("ga", 2, priority=LOW, mode=DisruptionMode.ALL)],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert victims(outcome) == ["ga-1", "ga-2"]  # whole group, across nodes
    done = settle(state, strategy)
    assert "p" in done.bound


@BOTH
def test_group_preempts_pods(strategy: str) -> None:
    state = cluster(
        [node("a", 2), node("b", 2), node("c", 2)],
        [pod(f"{n}-{i}", priority=LOW, node_name=n, created=i) for n in "abc" for i in (1, 2)]
        + _gang("g", 3, 2),
        [group("g", 3)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert len(outcome.victims) == 6
    assert sorted(nominations(outcome).values()) == ["a", "b", "c"]  # type: ignore[type-var]
    done = settle(state, strategy)
    assert sorted(done.bound.values()) == ["a", "b", "c"]
    assert not overcommitted(state)


@BOTH
def test_group_preempts_groups(strategy: str) -> None:
    state = cluster(
        [node("a", 2), node("b", 2)],
        [
            pod("v1-1", priority=LOW, node_name="a", group="v1", created=1),
            pod("v1-2", priority=LOW, node_name="b", group="v1", created=2),
            pod("v2-1", priority=LOW, node_name="a", group="v2", created=3),
            pod("v2-2", priority=LOW, node_name="b", group="v2", created=4),
            *_gang("g", 2, 1),
        ],
        [
            group("v1", 2, priority=LOW, mode=DisruptionMode.ALL),
            group("v2", 2, priority=LOW, mode=DisruptionMode.ALL),
            group("g", 2),
        ],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    names = victims(outcome)
    assert names in (["v1-1", "v1-2"], ["v2-1", "v2-2"])  # one group, whole
    done = settle(state, strategy)
    assert sorted(done.bound) == ["g-1", "g-2"]


@BOTH
def test_multi_node(strategy: str) -> None:
    """Four nodes, a gang of four 3-CPU pods: one victim per node, nothing more."""
    state = cluster(
        [node(f"n{i}", 4) for i in range(4)],
        [
            pod(f"low-{i}-{j}", 1, priority=LOW, node_name=f"n{i}", created=j)
            for i in range(4)
            for j in range(4)
        ]
        + _gang("g", 4, 3),
        [group("g", 4)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert len(outcome.victims) == 12  # 3 per node: 4 - 3 + ... each node keeps one
    per_node: dict[str, int] = {}
    for victim in outcome.victims:
        assert victim.node_name is not None
        per_node[victim.node_name] = per_node.get(victim.node_name, 0) + 1
    assert per_node == {f"n{i}": 3 for i in range(4)}
    done = settle(state, strategy)
    assert len(done.bound) == 4
    assert not overcommitted(state)


# ------------------------------------------------------------------------ priorities
@BOTH
def test_lowest_priority_first(strategy: str) -> None:
    state = cluster(
        [node("n1", 3)],
        [
            pod("p20", priority=20, node_name="n1", created=1),
            pod("p10", priority=10, node_name="n1", created=2),
            pod("p30", priority=30, node_name="n1", created=3),
            *_gang("g", 2, "500m"),
        ],
        [group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert victims(outcome) == ["p10"]


@BOTH
def test_never_higher_or_equal_priority(strategy: str) -> None:
    state = cluster(
        [node("n1", 3)],
        [
            pod("eq", priority=HIGH, node_name="n1", created=1),
            pod("hi", priority=HIGH + 1, node_name="n1", created=2),
            pod("grp", priority=LOW, node_name="n1", group="eqgroup", created=3),
            *_gang("g", 2, 1),
        ],
        # The running pod says LOW but its group's priority is what counts.
        [group("eqgroup", 1, priority=HIGH), group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert not outcome.started
    assert outcome.message == "preemption cannot help: no lower-priority victims"
    assert outcome.decisions == []


@BOTH
def test_group_priority_makes_pod_a_victim(strategy: str) -> None:
    state = cluster(
        [node("n1", 1)],
        [
            pod("x", priority=HIGH + 5, node_name="n1", group="lowgroup", created=1),
            pod("p", priority=HIGH),
        ],
        [group("lowgroup", 1, priority=LOW)],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert victims(outcome) == ["x"]


@BOTH
def test_gang_priority_from_podgroup(strategy: str) -> None:
    """A PodGroup's priority is the gang's priority (pods agree: validated by the cycle)."""
    state = cluster(
        [node("n1", 1)],
        [pod("v", priority=LOW, node_name="n1"), pod("g-1", priority=HIGH, group="g", created=5)],
        [group("g", 1, priority=HIGH)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert victims(outcome) == ["v"]
    conditions = disruption_conditions(outcome.decisions)
    assert "preemptor: default/g, triggerpod: default/g-1" in conditions[0].message


@BOTH
def test_all_groups_preempted_whole(strategy: str) -> None:
    """Only one of the group's pods is in the way, but the group is All: all of it goes,
    including the pod on the other node; a Single group would lose one pod."""
    state = cluster(
        [node("a", 2), node("b", 2)],
        [
            pod("all-1", priority=LOW, node_name="a", group="all", created=1),
            pod("all-2", priority=LOW, node_name="b", group="all", created=2),
            pod("all-3", priority=LOW, node_name="b", group="all", created=3),
            pod("hi-a", priority=HIGH, node_name="a", created=1),
            *_gang("g", 2, "500m"),
        ],
        [group("all", 3, priority=LOW, mode=DisruptionMode.ALL), group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert victims(outcome) == ["all-1", "all-2", "all-3"]


# ------------------------------------------------------------------- cannot help / never
@BOTH
def test_cannot_help_selector_matches_nothing(strategy: str) -> None:
    state = cluster(
        [node(f"n{i}", 1) for i in range(3)],
        [pod(f"low-{i}", priority=LOW, node_name=f"n{i}") for i in range(3)]
        + [pod("p", priority=HIGH, node_selector={"gpu": "yes"})],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert not outcome.started
    assert outcome.message == (
        "preemption cannot help: 0/3 nodes are available: "
        "3 node(s) didn't match Pod's node affinity/selector."
    )
    assert outcome.decisions == [] and outcome.victims == []


@BOTH
def test_cannot_help_request_larger_than_any_node(strategy: str) -> None:
    state = cluster(
        [node(f"n{i}", 2) for i in range(2)],
        [pod(f"low-{i}", priority=LOW, node_name=f"n{i}") for i in range(2)] + _gang("g", 2, 3),
        [group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert not outcome.started
    assert outcome.message.startswith("preemption cannot help: 0/2 nodes are available")
    assert "Insufficient cpu" in outcome.message
    assert outcome.victims == []


@BOTH
def test_cannot_help_when_only_part_of_the_gang_fits(strategy: str) -> None:
    """Evicting everything frees room for two of three members: preempt nothing."""
    state = cluster(
        [node("a", 2), node("b", 2)],
        [
            pod("low-a", 2, priority=LOW, node_name="a"),
            pod("low-b", 2, priority=LOW, node_name="b"),
            *_gang("g", 3, 2),
        ],
        [group("g", 3)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert not outcome.started
    assert outcome.message.startswith("preemption cannot help: ")
    assert outcome.victims == []


@BOTH
def test_no_preemption_when_the_gang_fits(strategy: str) -> None:
    state = cluster(
        [node("n1", 4)],
        [pod("low", priority=LOW, node_name="n1"), *_gang("g", 2, 1)],
        [group("g", 2)],
    )
    _outcome, result = preempt(state, ref("g"), strategy)
    assert result.code.value == "Success"
    done = settle(state, strategy)
    assert done.evicted == []


@BOTH
@pytest.mark.parametrize("where", ["pod", "group"])
def test_preemption_policy_never(strategy: str, where: str) -> None:
    pods = [
        pod("low", 2, priority=LOW, node_name="n1"),
        pod(
            "g-1",
            priority=HIGH,
            group="g",
            preemption_policy="Never" if where == "pod" else "PreemptLowerPriority",
        ),
    ]
    state = cluster(
        [node("n1", 2)],
        pods,
        [group("g", 1, preemption_policy="Never" if where == "group" else None)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert not outcome.started
    assert outcome.message == "preemption is disabled for this group (preemptionPolicy: Never)"
    assert outcome.decisions == []


@BOTH
def test_waits_for_terminating_victims(strategy: str) -> None:
    state = cluster(
        [node("n1", 2)],
        [
            pod("low", 2, priority=LOW, node_name="n1", terminating=True),
            pod("g-1", priority=HIGH, group="g", nominated="n1"),
            pod("g-2", priority=HIGH, group="g", nominated="n1"),
        ],
        [group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert outcome.started
    assert outcome.message == (
        "pod group preemption: ongoing preemption on nominated nodes "
        "(waiting for 1 preemption victim(s) to terminate)"
    )
    assert outcome.decisions == []
    assert state.snapshot.nominated.keys() == {"default/g-1", "default/g-2"}


@BOTH
def test_terminating_pods_are_not_victims(strategy: str) -> None:
    state = cluster(
        [node("n1", 3)],
        [
            pod("going", 1, priority=LOW, node_name="n1", terminating=True),
            pod("low", 2, priority=LOW, node_name="n1"),
            pod("p", 2, priority=HIGH),
        ],
    )
    outcome, _ = preempt(state, lone("p"), strategy)
    assert victims(outcome) == ["low"]


# ------------------------------------------------------------------- spreading / packing
@BOTH
def test_three_member_gang_spreads_over_two_half_full_nodes(strategy: str) -> None:
    """Koordinator's case. Two 4-CPU nodes, each running a high 1-CPU pod and two low
    1-CPU pods; a gang of three 1.5-CPU members. A per-pod dry run that does not assume
    earlier members would put all three on one node. The least disruption is three victims:
    two members on one node (both its low pods), one on the other (one low pod); two
    victims free only 4 CPU of the 4.5 needed."""
    state = cluster(
        [node("a"), node("b")],
        [pod(f"hi-{n}", priority=HIGH + 1, node_name=n) for n in "ab"]
        + [pod(f"low-{n}-{i}", priority=LOW, node_name=n, created=i) for n in "ab" for i in (1, 2)]
        + _gang("g", 3, "1500m"),
        [group("g", 3)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert len(outcome.victims) == 3
    placed = nominations(outcome)
    assert sorted(placed) == ["g-1", "g-2", "g-3"]
    assert sorted(n or "" for n in placed.values()) in (["a", "a", "b"], ["a", "b", "b"])
    done = settle(state, strategy)
    assert len(done.evicted) == 3
    assert sorted(done.bound) == ["g-1", "g-2", "g-3"]
    assert not overcommitted(state)


def test_mincost_avoids_evicting_an_all_group_when_one_pod_does() -> None:
    """The KEP's single placement lands on the emptiest node after removing every victim,
    which is the All group's node: kep evicts the whole group (3 pods). One lone pod of the
    same priority on the other node frees enough: mincost evicts just that pod."""
    state = cluster(
        [node("n1", 3), node("n2", 3)],
        [pod(f"v-{i}", priority=LOW, node_name="n1", group="victims", created=i) for i in (1, 2, 3)]
        + [
            pod("keeper", 2, priority=1000, node_name="n2", created=1),
            pod("lone-low", 1, priority=LOW, node_name="n2", created=1),
            *_gang("g", 2, "500m"),
        ],
        [group("victims", 3, priority=LOW, mode=DisruptionMode.ALL), group("g", 2)],
    )
    kep, _ = preempt(state, ref("g"), KEP)
    assert victims(kep) == ["v-1", "v-2", "v-3"]
    cheap, _ = preempt(state, ref("g"), MINCOST)
    assert victims(cheap) == ["lone-low"]
    assert set(nominations(cheap).values()) == {"n2"}
    done = settle(state, MINCOST)
    assert done.evicted == ["lone-low"]
    assert sorted(done.bound) == ["g-1", "g-2"]


def test_mincost_places_every_member_when_victims_allow() -> None:
    """minMember 1 with three pods and a full cluster: preempt to place all three."""
    state = cluster(
        [node(f"n{i}", 1) for i in range(3)],
        [pod(f"low-{i}", priority=LOW, node_name=f"n{i}", created=i) for i in range(3)]
        + _gang("g", 3, 1),
        [group("g", 1)],
    )
    for strategy in (KEP, MINCOST):
        outcome, _ = preempt(state, ref("g"), strategy)
        assert len(outcome.victims) == 3
        assert len([n for n in nominations(outcome).values() if n]) == 3


@BOTH
def test_gang_group_preempts_for_every_part(strategy: str) -> None:
    """A Koordinator GangGroup of two PodGroups is placed whole: victims for both."""
    state = cluster(
        [node("a", 2), node("b", 2)],
        [pod(f"low-{n}", 2, priority=LOW, node_name=n) for n in "ab"]
        + [pod("x-1", 2, priority=HIGH, group="x", created=1)]
        + [pod("y-1", 2, priority=HIGH, group="y", created=2)],
        [group("x", 1, gang_group=["x", "y"]), group("y", 1, gang_group=["x", "y"])],
    )
    outcome, _ = preempt(state, ref("x"), strategy)
    assert victims(outcome) == ["low-a", "low-b"]
    assert sorted(nominations(outcome)) == ["x-1", "y-1"]
    done = settle(state, strategy)
    assert sorted(done.bound) == ["x-1", "y-1"]


def test_build_preemptor_rejects_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="kep, mincost"):
        build_preemptor(strategy="fastest")


@BOTH
def test_lone_pod_binds_after_its_victims_are_gone(strategy: str) -> None:
    """Regression: a lone pod's own nomination must not reserve capacity against itself
    (it preempted again, with no victims, instead of binding)."""
    state = cluster(
        [node("n0", 1), node("n3", 3)],
        [
            pod("r0", "250m", node_name="n3"),
            pod("r1", "250m", node_name="n0"),
            pod("p", 3, priority=HIGH),
        ],
    )
    done = settle(state, strategy)
    assert done.evicted == ["r0"]
    assert done.bound == {"p": "n3"}
    assert sum(1 for r in done.reports if getattr(r, "result", "") == "waiting_on_preemption") == 1


def test_mincost_greedy_prefers_one_big_victim_over_three_small() -> None:
    """With every victim gone all nodes look alike and the cycle takes the first by name,
    where three small pods run: kep evicts six pods. Placing each member on the node whose
    cheapest sufficient victims are cheapest evicts two."""
    state = cluster(
        [node(n, 3) for n in ("a1", "a2", "b1", "b2")],
        [
            pod(f"{n}-{i}", 1, priority=LOW, node_name=n, created=i)
            for n in ("a1", "a2")
            for i in (1, 2, 3)
        ]
        + [pod(f"{n}-big", 3, priority=LOW, node_name=n, created=1) for n in ("b1", "b2")]
        + _gang("g", 2, 3),
        [group("g", 2)],
    )
    kep, _ = preempt(state, ref("g"), KEP)
    assert len(kep.victims) == 6
    cheap, _ = preempt(state, ref("g"), MINCOST)
    assert victims(cheap) == ["b1-big", "b2-big"]
    assert "greedy" in cheap.message
    done = settle(state, MINCOST)
    assert sorted(done.evicted) == ["b1-big", "b2-big"]
    assert sorted(done.bound.values()) == ["b1", "b2"]


def test_mincost_avoids_a_pdb_violation_kep_commits() -> None:
    protected = {"app": "db"}
    state = cluster(
        [node("a", 2), node("b", 2), node("c", 2)],
        [
            pod("db", 2, priority=LOW, node_name="a", labels=protected),
            pod("batch", 2, priority=LOW, node_name="b"),
            pod("web", 1, priority=HIGH + 1, node_name="c"),
            *_gang("g", 2, 1),
        ],
        [group("g", 2)],
        [budget("db", 0, app="db")],
    )
    kep, _ = preempt(state, ref("g"), KEP)
    assert kep.pdb_violations == 1 and "db" in victims(kep)
    cheap, _ = preempt(state, ref("g"), MINCOST)
    assert victims(cheap) == ["batch"]
    assert cheap.pdb_violations == 0
