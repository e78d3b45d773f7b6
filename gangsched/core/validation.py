"""The consistency checks kube-scheduler runs on a PodGroup before its cycle.

kube-scheduler 1.37 (`validatePodGroup` in pkg/scheduler/schedule_one_podgroup.go) fails the
whole group with `SchedulerError` when a member disagrees with the group: a different
schedulerName, a priority other than the group's, or (PodGroupPreemptionPolicy) a preemption
policy other than the group's. It checks the queued pods first, then the members already
scheduled, so a bound member that disagrees blocks the rest of its group too. The messages are
upstream's, word for word: users search for them.

Groups that name no priority of their own (scheduling.x-k8s.io, a sigs PodGroup without a
priorityClassName, Koordinator annotation gangs) have no group value to agree with; their
pending members must agree with each other, as gangsched has always required (one gang cycle
has one priority and one preemption policy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gangsched.core.model import PREEMPT_LOWER_PRIORITY, Dialect, Pod, PodGroup


def _queue_order(pods: Sequence[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (-p.priority, p.created, p.namespace, p.name))


def _scheduled_order(pods: Sequence[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (p.created, p.namespace, p.name))


def validate_group(
    group: PodGroup, *, pending: Sequence[Pod], bound: Sequence[Pod], foreign: Sequence[Pod] = ()
) -> str | None:
    """Why the group may not be scheduled as it is, or None.

    `foreign`: unbound members left to another scheduler; only the schedulerName check sees
    them (kube-scheduler never queues them, but they can never join this gang either).
    """
    members = [*_queue_order(pending), *_scheduled_order(bound), *foreign]
    if not members:
        return None
    scheduler_name = members[0].scheduler_name
    for pod in members:
        if pod.scheduler_name != scheduler_name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f'got: "{pod.scheduler_name}" and "{scheduler_name}"'
            )
    if group.priority is None and group.ref.dialect is not Dialect.UPSTREAM:
        return _members_agree(_queue_order(pending))
    return _members_match_group(group, [*_queue_order(pending), *_scheduled_order(bound)])


def _members_match_group(group: PodGroup, pods: Iterable[Pod]) -> str | None:
    """Upstream's per-pod checks against the group's own priority and preemption policy.

    Without a policy on the group (a cluster without the PodGroupPreemptionPolicy gate drops
    the field) upstream requires the pods to agree with the first one instead.
    """
    group_priority = group.priority or 0
    group_policy = group.preemption_policy or ""
    for pod in pods:
        if pod.priority != group_priority:
            return (
                "all pods in a single pod group should have the same priority as the pod "
                f"group's priority, got {pod.priority} and {group_priority}"
            )
        policy = pod.preemption_policy or PREEMPT_LOWER_PRIORITY
        if group.preemption_policy is not None:
            if policy != group_policy:
                return (
                    "all pods in a single pod group should have the same preemption policy as "
                    f"the pod group's preemption policy, got {policy} and {group_policy}"
                )
        elif not group_policy:
            group_policy = policy
        elif policy != group_policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {policy} and {group_policy}"
            )
    return None


def _members_agree(pods: Sequence[Pod]) -> str | None:
    if not pods:
        return None
    first = pods[0]
    for pod in pods[1:]:
        if pod.priority != first.priority:
            return (
                "all pods in a single pod group should have the same priority, "
                f"got {pod.priority} and {first.priority}"
            )
        if pod.preemption_policy != first.preemption_policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {pod.preemption_policy} and {first.preemption_policy}"
            )
    return None
