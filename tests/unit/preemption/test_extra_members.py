"""Members beyond the quorum preempt (issue 19 item 1), under both strategies.

Upstream binds what fits, requeues the rest at once, and runs workload-aware preemption in
the next attempt, where minMember is already met by bound members and nothing new fits
(kube-scheduler's podgrouppreemption_test.go "Binding first before preemption for gang /
basic policy", "Partial Preemption with basic policy", "... schedule as many pods as
possible without preempting higher priority pods"). The same rules as for any preemptor:
only lower-priority victims, All-mode groups whole, PDBs, preemptionPolicy Never.
"""

from __future__ import annotations

import pytest

from gangsched.core.decisions import (
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING_ON_PREEMPTION,
    Bind,
    Evict,
    GroupOutcome,
    Nominate,
)
from gangsched.core.model import DisruptionMode, Pod, PodGroup
from gangsched.core.preemption import KEP, MINCOST, build_preemptor
from gangsched.core.scheduler import Scheduler
from gangsched.core.status import Code
from tests.builders import SCHEDULER, budget, cluster, group, node, pod, ref

from .drive import nominations, overcommitted, preempt, settle, victims

BOTH = pytest.mark.parametrize("strategy", [KEP, MINCOST])
LOW, HIGH = 10, 100


def binding_first(min_member: int) -> tuple[list[Pod], list[PodGroup]]:
    """One 4-CPU node: two members bound, a low pod, and two new members with room for one."""
    pods = [
        pod("pg-pod-1", priority=HIGH, node_name="n1", group="pg1", created=1),
        pod("pg-pod-2", priority=HIGH, node_name="n1", group="pg1", created=2),
        pod("low-1", priority=LOW, node_name="n1", created=3),
        pod("high-1", priority=HIGH, group="pg1", created=4),
        pod("high-2", priority=HIGH, group="pg1", created=5),
    ]
    return pods, [group("pg1", min_member, priority=HIGH)]


@BOTH
@pytest.mark.parametrize("min_member", [2, 1], ids=["gang", "basic"])
def test_binding_first_then_preemption_for_the_rest(strategy: str, min_member: int) -> None:
    pods, groups = binding_first(min_member)
    state = cluster([node("n1", cpu=4)], pods, groups)
    done = settle(state, strategy)
    order = [
        f"Bind:{d.pod.split('/')[1]}" if isinstance(d, Bind) else f"Evict:{d.pod.split('/')[1]}"
        for d in done.decisions
        if isinstance(d, Bind | Evict)
    ]
    # Upstream's expected event order: Bind:high-1, PodGroupPostFilter:pg1, Bind:high-2.
    assert order == ["Bind:high-1", "Evict:low-1", "Bind:high-2"]
    assert done.evicted == ["low-1"]
    assert not overcommitted(state)


@BOTH
def test_the_preempting_attempt_nominates_only_the_extra_pod(strategy: str) -> None:
    pods, groups = binding_first(2)
    state = cluster([node("n1", cpu=4)], pods, groups)
    sched = Scheduler(state, preemptor=build_preemptor(strategy=strategy, scheduler_name=SCHEDULER))
    sched.enqueue_pending()
    first = sched.step(0.0)
    assert first is not None and first.result == SCHEDULED
    assert [b.pod for b in first.bound] == ["default/high-1"]
    # The leftover member is requeued at once, not parked until a cluster event.
    second = sched.step(0.0)
    assert second is not None and second.result == WAITING_ON_PREEMPTION
    assert second.preemption is not None
    assert victims(second.preemption) == ["low-1"]
    assert nominations(second.preemption) == {"high-2": "n1"}
    outcomes = [d for d in second.decisions if isinstance(d, GroupOutcome)]
    assert [o.result for o in outcomes] == [WAITING_ON_PREEMPTION]
    assert "minCount (2) is met: 3 scheduled" in second.message


@BOTH
def test_no_new_preemption_while_the_victims_terminate(strategy: str) -> None:
    pods, groups = binding_first(2)
    state = cluster([node("n1", cpu=4)], pods, groups)
    sched = Scheduler(state, preemptor=build_preemptor(strategy=strategy, scheduler_name=SCHEDULER))
    sched.enqueue_pending()
    sched.step(0.0)
    second = sched.step(0.0)
    assert second is not None and second.preemption is not None
    # Carried out as the live scheduler does: the nomination lands, the victim terminates.
    for decision in second.decisions:
        if isinstance(decision, Nominate):
            state.nominate(state.pods[decision.pod], decision.node)
        elif isinstance(decision, Evict):
            state.pods[decision.pod].terminating = True
    sched.queue.cluster_changed(100.0)
    third = sched.step(100.0)
    assert third is not None and third.result == WAITING_ON_PREEMPTION
    assert third.preemption is not None and third.preemption.victims == []
    assert "waiting for 1 preemption victim(s) to terminate" in third.message
    assert not [d for d in third.decisions if isinstance(d, Evict)]


@BOTH
def test_basic_group_partial_preemption(strategy: str) -> None:
    """podgrouppreemption_test.go "Partial Preemption with basic policy": two of three fit,
    the third takes one victim; mincost takes the cheaper one (priority 5, not 10)."""
    state = cluster(
        [node("node1", cpu=2), node("node2", cpu=2)],
        [
            pod("low-1", priority=10, node_name="node1", created=1),
            pod("very-low-1", priority=5, node_name="node2", created=2),
            *(pod(f"high-{i}", priority=HIGH, group="pg1", created=2 + i) for i in (1, 2, 3)),
        ],
        [group("pg1", 1, priority=HIGH)],
    )
    done = settle(state, strategy)
    assert sorted(done.bound) == ["high-1", "high-2", "high-3"]
    assert len(done.evicted) == 1
    if strategy == MINCOST:
        assert done.evicted == ["very-low-1"]
    assert not overcommitted(state)


@BOTH
def test_extra_members_never_take_higher_priority_pods(strategy: str) -> None:
    """ "Gang scheduling: schedule as many pods as possible without preempting higher
    priority pods, but still more than minCount": p-c stays pending."""
    state = cluster(
        [node(f"node{i}", cpu=1) for i in (1, 2, 3, 4)],
        [
            pod("p1", priority=10, node_name="node1", created=1),
            pod("p2", priority=10, node_name="node2", created=2),
            pod("p3", priority=200, node_name="node3", created=3),
            pod("p4", priority=200, node_name="node4", created=4),
            *(pod(f"p-{c}", priority=HIGH, group="pg", created=5 + i) for i, c in enumerate("abc")),
        ],
        [group("pg", 1, priority=HIGH)],
    )
    done = settle(state, strategy)
    assert sorted(done.evicted) == ["p1", "p2"]
    assert sorted(done.bound) == ["p-a", "p-b"]
    assert state.pods["default/p-c"].node_name is None


@BOTH
def test_extra_members_preempt_all_mode_groups_whole(strategy: str) -> None:
    state = cluster(
        [node("n1", cpu=2), node("n2", cpu=1)],
        [
            pod("g-1", priority=HIGH, node_name="n1", group="g", created=1),
            pod("v-1", priority=LOW, node_name="n1", group="v", created=2),
            pod("v-2", priority=LOW, node_name="n2", group="v", created=3),
            pod("g-2", priority=HIGH, group="g", created=4),
        ],
        [group("g", 1, priority=HIGH), group("v", 2, priority=LOW, mode=DisruptionMode.ALL)],
    )
    outcome, result = preempt(state, ref("g"), strategy)
    assert result.code is Code.UNSCHEDULABLE
    assert outcome.started
    assert victims(outcome) == ["v-1", "v-2"]


@BOTH
def test_extra_members_spare_pdb_protected_pods(strategy: str) -> None:
    protected = {"app": "db"}
    state = cluster(
        [node("n1", cpu=3)],
        [
            pod("g-1", priority=HIGH, node_name="n1", group="g", created=1),
            pod("db-1", priority=LOW, node_name="n1", labels=protected, created=2),
            pod("batch-1", priority=LOW, node_name="n1", created=3),
            pod("g-2", priority=HIGH, group="g", created=4),
        ],
        [group("g", 1, priority=HIGH)],
        budgets=[budget("db", 0, app="db")],
    )
    outcome, _ = preempt(state, ref("g"), strategy)
    assert outcome.started
    assert victims(outcome) == ["batch-1"]
    assert outcome.pdb_violations == 0


@BOTH
def test_extra_members_with_preemption_policy_never_stay_pending(strategy: str) -> None:
    state = cluster(
        [node("n1", cpu=2)],
        [
            pod(
                "g-1",
                priority=HIGH,
                node_name="n1",
                group="g",
                created=1,
                preemption_policy="Never",
            ),
            pod("low", priority=LOW, node_name="n1", created=2),
            pod("g-2", priority=HIGH, group="g", created=3, preemption_policy="Never"),
        ],
        [group("g", 1, priority=HIGH)],
    )
    done = settle(state, strategy)
    assert done.evicted == []
    assert state.pods["default/g-2"].node_name is None
    last = done.reports[-1]
    assert getattr(last, "result", None) == UNSCHEDULABLE
    assert "preemptionPolicy: Never" in getattr(last, "message", "")


@BOTH
def test_a_quorum_met_by_bound_members_alone_preempts_for_the_rest(strategy: str) -> None:
    """minMember met before this attempt (a restart, or members added later): the first
    attempt places nothing and goes straight to preemption."""
    state = cluster(
        [node("n1", cpu=2), node("n2", cpu=2)],
        [
            pod("g-1", 2, priority=HIGH, node_name="n1", group="g", created=1),
            pod("low-a", 1, priority=LOW, node_name="n2", created=2),
            pod("low-b", 1, priority=LOW + 1, node_name="n2", created=3),
            pod("g-2", 1, priority=HIGH, group="g", created=4),
        ],
        [group("g", 1, priority=HIGH)],
    )
    outcome, result = preempt(state, ref("g"), strategy)
    assert result.code is Code.UNSCHEDULABLE and not result.placements
    assert "none of the 1 pending pod(s) fits" in result.message
    assert outcome.started
    assert victims(outcome) == ["low-a"]  # the lower of the two
    assert nominations(outcome) == {"g-2": "n2"}


@BOTH
def test_a_once_satisfied_koordinator_gang_preempts_for_later_members(strategy: str) -> None:
    """scheduling.sigs.k8s.io gangs are once-satisfied (Koordinator's default match policy):
    one bound member keeps minMember 2 met, so a later member preempts on its own."""
    state = cluster(
        [node("n1", cpu=2)],
        [
            pod("g-1", priority=HIGH, node_name="n1", group="g", created=1),
            pod("low", priority=LOW, node_name="n1", created=2),
            pod("g-2", priority=HIGH, group="g", created=3),
        ],
        [group("g", 2, priority=HIGH)],
    )
    outcome, result = preempt(state, ref("g"), strategy)
    assert "minCount (2) is met: 1 scheduled (once satisfied)" in result.message
    assert victims(outcome) == ["low"]
