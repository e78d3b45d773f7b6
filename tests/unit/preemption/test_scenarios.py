"""Upstream's workload-aware preemption scenarios and the seed walkthrough, as core tests.

Each runs under both strategies unless the point of the test is where they differ.
"""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import Event, Evict, Nominate, SetCondition
from gangsched.core.model import DisruptionMode
from tests.builders import Quantity, budget, cluster, group, lone, node, pod, ref

from .drive import (
    BOTH,
    HIGH,
    LOW,
    disruption_conditions,
    events,
    nominations,
    overcommitted,
    preempt,
    preemptor_gang,
    settle,
    victims,
)


# ------------------------------------------------------------------- public scenarios
@BOTH
def test_full_preemption(strategy: str) -> None:
    """wap-full-preemption: 3 low pods fill the node; a 3-pod gang evicts all of them."""
    state = cluster(
        [node("n1", 3)],
        [pod(f"low-{i}", priority=LOW, node_name="n1", created=i) for i in (1, 2, 3)]
        + preemptor_gang("gang", 3, 1),
        [group("gang", 3)],
    )
    outcome, _ = preempt(state, ref("gang"), strategy)
    assert outcome.started
    assert victims(outcome) == ["low-1", "low-2", "low-3"]
    assert nominations(outcome) == {"gang-1": "n1", "gang-2": "n1", "gang-3": "n1"}
    done = settle(state, strategy)
    assert sorted(done.bound) == ["gang-1", "gang-2", "gang-3"]
    assert not overcommitted(state)


def pdb_protected_node(*, member_cpu: Quantity) -> ClusterState:
    """One 3-CPU node running three low pods, two of them protected by a PDB that allows no
    disruption; a pending gang of two members of `member_cpu` each."""
    protected = {"app": "protected"}
    return cluster(
        [node("n1", 3)],
        [
            pod("low-1", priority=LOW, node_name="n1", created=1, labels=protected),
            pod("low-2", priority=LOW, node_name="n1", created=2, labels=protected),
            pod("low-3", priority=LOW, node_name="n1", created=3),
            *preemptor_gang("high", 2, member_cpu),
        ],
        [group("high", 2)],
        [budget("protected", 0, app="protected")],
    )


@BOTH
def test_pdb_reprieve(strategy: str) -> None:
    """wap-pdb-reprieve: the two PDB-protected pods are spared, only low-3 goes."""
    state = pdb_protected_node(member_cpu="500m")
    outcome, _ = preempt(state, ref("high"), strategy)
    assert victims(outcome) == ["low-3"]
    assert outcome.pdb_violations == 0
    assert outcome.reprieved == 2
    done = settle(state, strategy)
    assert done.evicted == ["low-3"]
    assert sorted(done.bound) == ["high-1", "high-2"]


@BOTH
def test_pdb_violated_only_when_nothing_else_works(strategy: str) -> None:
    state = pdb_protected_node(member_cpu=1)
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
            *preemptor_gang("g", 2, 1),
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
        + preemptor_gang("g", 3, 2),
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
            *preemptor_gang("g", 2, 1),
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
        + preemptor_gang("g", 4, 3),
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


@BOTH
def test_members_share_the_capacity_one_large_victim_frees(strategy: str) -> None:
    """Two 2-CPU members, two 4-CPU nodes: a 4-CPU pod on n1, a 2-pod All-mode group on n2.
    Spread by LeastAllocated, the members would evict both (3 pods); victim-aware, the second
    member reuses what the large pod leaves on n1, and only it goes."""
    state = cluster(
        [node("n1", 4), node("n2", 4)],
        [
            pod("v-large", 4, priority=LOW, node_name="n1", created=1),
            pod("v-med-1", 2, priority=LOW, group="victim", node_name="n2", created=2),
            pod("v-med-2", 2, priority=LOW, group="victim", node_name="n2", created=3),
            *preemptor_gang("p", 2, 2),
        ],
        [group("p", 2, priority=HIGH), group("victim", 2, priority=LOW, mode=DisruptionMode.ALL)],
    )
    outcome, _ = preempt(state, ref("p"), strategy)
    assert victims(outcome) == ["v-large"]
    assert nominations(outcome) == {"p-1": "n1", "p-2": "n1"}


@BOTH
def test_members_go_where_the_added_victims_have_the_lowest_priority(strategy: str) -> None:
    """Three 1-CPU members of a 3-member gang, two 2-CPU nodes each holding a 1-CPU pod: the
    third member needs a victim, and takes the priority-5 pod rather than the priority-10 one
    (upstream's 'Partial Preemption with basic policy')."""
    state = cluster(
        [node("n1", 2), node("n2", 2)],
        [
            pod("low", 1, priority=LOW, node_name="n1", created=1),
            pod("very-low", 1, priority=5, node_name="n2", created=2),
            *preemptor_gang("p", 3, 1),
        ],
        [group("p", 3, priority=HIGH)],
    )
    outcome, _ = preempt(state, ref("p"), strategy)
    assert victims(outcome) == ["very-low"]
    done = settle(state, strategy)
    assert sorted(done.bound) == ["p-1", "p-2", "p-3"]
    assert not overcommitted(state)
