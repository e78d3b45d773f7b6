"""The rules of preemption as core tests: priorities (who may be a victim), when preemption
cannot help or must not run, and how the preemptors spread or pack over the nodes.

Each runs under both strategies unless the point of the test is where they differ.
"""

from __future__ import annotations

import pytest

from gangsched.core.model import DisruptionMode
from gangsched.core.preemption import KEP, MINCOST, build_preemptor
from tests.builders import budget, cluster, group, lone, node, pod, ref

from .drive import (
    BOTH,
    HIGH,
    LOW,
    disruption_conditions,
    nominations,
    overcommitted,
    preempt,
    preemptor_gang,
    settle,
    victims,
)


# ------------------------------------------------------------------------ priorities
@BOTH
def test_lowest_priority_first(strategy: str) -> None:
    state = cluster(
        [node("n1", 3)],
        [
            pod("p20", priority=20, node_name="n1", created=1),
            pod("p10", priority=10, node_name="n1", created=2),
            pod("p30", priority=30, node_name="n1", created=3),
            *preemptor_gang("g", 2, "500m"),
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
            *preemptor_gang("g", 2, 1),
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
            *preemptor_gang("g", 2, "500m"),
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
        [pod(f"low-{i}", priority=LOW, node_name=f"n{i}") for i in range(2)]
        + preemptor_gang("g", 2, 3),
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
            *preemptor_gang("g", 3, 2),
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
        [pod("low", priority=LOW, node_name="n1"), *preemptor_gang("g", 2, 1)],
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
        + preemptor_gang("g", 3, "1500m"),
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
    """With every victim removed the emptiest node is the All group's: placed by the scores
    alone the members would evict the whole group (3 pods). One lone pod of the same priority
    on the other node frees enough: mincost evicts just that pod, and so does kep's
    victim-aware placement (each member where the victims it adds cost least)."""
    state = cluster(
        [node("n1", 3), node("n2", 3)],
        [pod(f"v-{i}", priority=LOW, node_name="n1", group="victims", created=i) for i in (1, 2, 3)]
        + [
            pod("keeper", 2, priority=1000, node_name="n2", created=1),
            pod("lone-low", 1, priority=LOW, node_name="n2", created=1),
            *preemptor_gang("g", 2, "500m"),
        ],
        [group("victims", 3, priority=LOW, mode=DisruptionMode.ALL), group("g", 2)],
    )
    kep, _ = preempt(state, ref("g"), KEP)
    assert victims(kep) == ["lone-low"]
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
        + preemptor_gang("g", 3, 1),
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
    where three small pods run: placed by the scores alone the members evict six pods.
    Placing each member on the node whose cheapest sufficient victims are cheapest evicts
    two (mincost's greedy; kep's victim-aware placement finds the same)."""
    state = cluster(
        [node(n, 3) for n in ("a1", "a2", "b1", "b2")],
        [
            pod(f"{n}-{i}", 1, priority=LOW, node_name=n, created=i)
            for n in ("a1", "a2")
            for i in (1, 2, 3)
        ]
        + [pod(f"{n}-big", 3, priority=LOW, node_name=n, created=1) for n in ("b1", "b2")]
        + preemptor_gang("g", 2, 3),
        [group("g", 2)],
    )
    kep, _ = preempt(state, ref("g"), KEP)
    assert victims(kep) == ["b1-big", "b2-big"]
    cheap, _ = preempt(state, ref("g"), MINCOST)
    assert victims(cheap) == ["b1-big", "b2-big"]
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
            *preemptor_gang("g", 2, 1),
        ],
        [group("g", 2)],
        [budget("db", 0, app="db")],
    )
    kep, _ = preempt(state, ref("g"), KEP)
    # Victim-aware, kep too puts the members where no budget is violated.
    assert kep.pdb_violations == 0 and victims(kep) == ["batch"]
    cheap, _ = preempt(state, ref("g"), MINCOST)
    assert victims(cheap) == ["batch"]
    assert cheap.pdb_violations == 0


@BOTH
def test_equal_victims_on_the_nominated_node_are_preferred(strategy: str) -> None:
    """One member bound on n2, the other nominated to n1: one 16-CPU victim on either node
    makes room. The nominated node wins although the victim on n2 is younger (mincost's age
    rule comes after the nomination), as kube-scheduler tries a nominated node first."""
    state = cluster(
        [node("n1", 32), node("n2", 32)],
        [
            pod("old-1", 16, priority=LOW, node_name="n1", created=1),
            pod("old-2", 16, priority=LOW, node_name="n1", created=2),
            pod("young", 16, priority=LOW, node_name="n2", created=3),
            pod("g-1", 16, priority=HIGH, group="g", node_name="n2", created=10),
            pod("g-2", 16, priority=HIGH, group="g", created=11, nominated="n1"),
        ],
        [group("g", 2)],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert outcome.started
    assert nominations(outcome) == {"g-2": "n1"}
    assert victims(outcome) == ["old-2"]


# ------------------------------------------------------------------------ workloads
@pytest.mark.parametrize("min_member", [1, 2])
def test_one_two_pod_job_is_cheaper_than_two_lone_pods(min_member: int) -> None:
    """Issue 14's cost order: a workload is a PodGroup or a lone pod, so with the same pods
    disrupted and evicted, one 2-pod job (node n0) goes rather than two lone pods (n1),
    whichever the job's minMember. Found missing in session 10: the lone pods counted as no
    workload at all, and no candidate took the job alone."""
    state = cluster(
        [node("n0", 2), node("n1", 2)],
        [
            pod("job-0", 1, memory=None, node_name="n0", priority=LOW, group="job", created=5),
            pod("job-1", 1, memory=None, node_name="n0", priority=LOW, group="job", created=5),
            pod("lone-0", 1, memory=None, node_name="n1", priority=LOW, created=5),
            pod("lone-1", 1, memory=None, node_name="n1", priority=LOW, created=5),
            *preemptor_gang("g", 2, 1),
        ],
        [group("job", min_member, priority=LOW), group("g", 2, priority=HIGH)],
    )
    outcome, _ = preempt(state, ref("g"), MINCOST)
    assert victims(outcome) == ["job-0", "job-1"], outcome.message
