"""validate_group: kube-scheduler's checks before a PodGroup cycle, with its messages."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.decisions import ERROR, SCHEDULED
from gangsched.core.model import PREEMPT_NEVER, Dialect, GroupRef, PodGroup
from gangsched.core.scheduler import Scheduler
from gangsched.core.validation import validate_group
from tests.builders import cluster, gang_pods, group, node, pod


def upstream_group(priority: int = 0, policy: str | None = "PreemptLowerPriority") -> PodGroup:
    return PodGroup(
        ref=GroupRef(Dialect.UPSTREAM, "default", "g"),
        min_member=2,
        priority=priority,
        preemption_policy=policy,
    )


def test_a_bound_member_with_another_priority_fails_the_group() -> None:
    pending = [pod("g-1", priority=5)]
    bound = [pod("g-0", priority=3, node_name="n1")]
    assert validate_group(upstream_group(5), pending=pending, bound=bound) == (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 3 and 5"
    )


def test_pending_members_are_checked_before_bound_ones() -> None:
    pending = [pod("g-1", priority=4)]
    bound = [pod("g-0", priority=3, node_name="n1")]
    assert validate_group(upstream_group(5), pending=pending, bound=bound) == (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 4 and 5"
    )


def test_preemption_policy_must_be_the_groups() -> None:
    pending = [pod("g-1")]
    bound = [pod("g-0", node_name="n1", preemption_policy=PREEMPT_NEVER)]
    assert validate_group(upstream_group(), pending=pending, bound=bound) == (
        "all pods in a single pod group should have the same preemption policy as the pod "
        "group's preemption policy, got Never and PreemptLowerPriority"
    )
    never = upstream_group(policy=PREEMPT_NEVER)
    assert validate_group(never, pending=pending, bound=[]) == (
        "all pods in a single pod group should have the same preemption policy as the pod "
        "group's preemption policy, got PreemptLowerPriority and Never"
    )


def test_without_a_group_policy_members_agree_with_the_first() -> None:
    # A cluster without PodGroupPreemptionPolicy drops the field: upstream compares the pods.
    pods = [
        pod("g-0", created=0, preemption_policy=PREEMPT_NEVER),
        pod("g-1", created=1),
    ]
    assert validate_group(upstream_group(policy=None), pending=pods, bound=[]) == (
        "all pods in a single pod group should have the same preemption policy, "
        "got PreemptLowerPriority and Never"
    )
    same = [
        pod("g-0", preemption_policy=PREEMPT_NEVER),
        pod("g-1", preemption_policy=PREEMPT_NEVER),
    ]
    assert validate_group(upstream_group(policy=None), pending=same, bound=[]) is None


def test_scheduler_name_message_is_upstreams() -> None:
    pending = [pod("g-1")]
    bound = [pod("g-0", node_name="n1", scheduler_name="default-scheduler")]
    assert validate_group(upstream_group(), pending=pending, bound=bound) == (
        "all pods in a single pod group should have the same .spec.schedulerName set, "
        'got: "default-scheduler" and "gangsched"'
    )


def test_consistent_group_passes() -> None:
    pending = [pod("g-1", priority=5)]
    bound = [pod("g-0", priority=5, node_name="n1")]
    assert validate_group(upstream_group(5), pending=pending, bound=bound) is None


def test_groups_without_their_own_priority_check_pending_members_only() -> None:
    sigs = group("g", 2)
    bound = [pod("g-0", priority=3, node_name="n1")]
    assert validate_group(sigs, pending=[pod("g-1", priority=5)], bound=bound) is None
    assert validate_group(
        sigs, pending=[pod("g-1", priority=5), pod("g-2", priority=1)], bound=[]
    ) == ("all pods in a single pod group should have the same priority, got 1 and 5")
    # A sigs group naming a priority class is held to it like an upstream group.
    classed = replace(sigs, priority=5, preemption_policy="PreemptLowerPriority")
    assert validate_group(classed, pending=[pod("g-1", priority=5)], bound=bound) == (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 3 and 5"
    )


def test_a_disagreeing_bound_member_blocks_the_cycle_with_scheduler_error() -> None:
    pods = gang_pods("g", 3, priority=5)
    pods[0].node_name, pods[0].phase, pods[0].priority = "n1", "Running", 1
    state = cluster([node("n1"), node("n2")], pods, [group("g", 3, priority=5)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == ERROR
    assert "got 1 and 5" in report.message
    # Once the member agrees (it was recreated), the rest of the gang is placed.
    pods[0].priority = 5
    sched.queue.activate(report.gang)
    report = sched.step(100.0)
    assert report is not None and report.result == SCHEDULED
