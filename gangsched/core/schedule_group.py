"""The scheduler's side of each PodGroup of a unit, whatever the unit's kind (a PodGroup, each
PodGroup of a Koordinator GangGroup, each leaf of a CompositePodGroup tree): before the cycle,
its members sorted by state and the bound ones that count toward minMember; after it, the
PodGroup's outcome.

A unit's kind decides its placer (core/placers.py) and, for a tree, what each CompositePodGroup
level is told (schedule_tree.py); what a PodGroup goes through is the same for every kind.
The scheduler (scheduler.py) runs both.
"""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang, GangMember
from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE, WAITING, Decision, GroupOutcome
from gangsched.core.model import Dialect, GroupRef, MatchPolicy, Pod, PodGroup


def group_member(cluster: ClusterState, ref: GroupRef) -> GangMember:
    """One PodGroup of a unit with its members sorted by state."""
    group = cluster.pod_group(ref) or missing_group(ref)
    bound: list[Pod] = []
    pending: list[Pod] = []
    foreign: list[Pod] = []
    gated: list[Pod] = []
    for pod in cluster.group_members(ref):
        if pod.is_finished or pod.terminating:
            # kube-scheduler never sees a Succeeded or Failed pod (its informer
            # filters them out): it counts for nothing toward minMember. The
            # PodGroup status still counts it as succeeded/failed (core/phase.py).
            continue
        if cluster.is_pending(pod):
            pending.append(pod)
        elif cluster.is_gated(pod):
            gated.append(pod)
        elif pod.node_name is not None:
            bound.append(pod)
        else:
            foreign.append(pod)
    return GangMember(
        group=group,
        bound=bound,
        pending=pending,
        foreign=foreign,
        gated=gated,
        counted_bound=counted_bound(ref, group, bound),
    )


def counted_bound(ref: GroupRef, group: PodGroup, bound: list[Pod]) -> int | None:
    """Koordinator's match policy: which bound members count toward minMember.

    Koordinator's gangs (scheduling.sigs.k8s.io PodGroups, annotation gangs) default to
    once-satisfied: once any member was bound the gang is satisfied for good and later
    members go one by one. only-waiting counts only members placed in this cycle;
    waiting-and-running counts bound ones too, which is kube-scheduler's and
    scheduler-plugins' rule for their dialects (None: every bound member counts).
    """
    policy = group.match_policy
    if policy is None and ref.dialect in (Dialect.SIGS, Dialect.KOORDINATOR):
        policy = MatchPolicy.ONCE_SATISFIED
    if policy is MatchPolicy.ONLY_WAITING:
        return 0
    if policy is MatchPolicy.ONCE_SATISFIED and bound:
        # Koordinator remembers "satisfied" in memory from the first bind on; here a gang
        # is satisfied while a member of it is bound and alive (finished members count
        # for nothing, as kube-scheduler never sees them).
        return max(len(bound), group.min_member)
    return None


def missing_group(ref: GroupRef) -> PodGroup:
    """Stand-in for a PodGroup the pods name but the cluster does not have (min_member -1)."""
    return PodGroup(ref=ref, min_member=-1)


def scheduled_outcomes(gang: Gang, result: CycleResult, met: dict[GroupRef, str]) -> list[Decision]:
    """Each PodGroup's outcome of a cycle that placed the unit: scheduled, with its pods
    counted, unless the tree's cycle left its level unsatisfied (then waiting or
    unschedulable, in the level's words) and its bound members do not meet its minimum
    (`met`: schedule_tree.levels_met)."""
    decisions: list[Decision] = []
    for part in gang.parts:
        scheduled = len(part.bound) + sum(
            1 for pod, _ in result.placements if any(pod is p for p in part.pending)
        )
        level = result.levels.get(part.group.ref)
        if level is not None and not level[0] and part.group.ref not in met:
            outcome = WAITING if short_of_members(part) else UNSCHEDULABLE
            decisions.append(GroupOutcome(part.group.ref, outcome, level[1]))
            continue
        decisions.append(GroupOutcome(part.group.ref, SCHEDULED, f"{scheduled} pod(s) scheduled"))
    return decisions


def failed_outcomes(
    gang: Gang,
    result: str,
    message: str,
    levels: dict[GroupRef, tuple[bool, str]] | None,
    met: dict[GroupRef, str],
) -> list[Decision]:
    """Each PodGroup's outcome of a cycle that did not place the unit (`result`): its
    level's own words (a tree's), then the unit's `message`."""
    decisions: list[Decision] = []
    for part in gang.parts:
        ref = part.group.ref
        if ref in met:
            # A level of a tree whose minimum its bound members meet stays scheduled
            # (see met_by_bound): the attempt failed for other members only.
            decisions.append(GroupOutcome(ref, SCHEDULED, met[ref]))
            continue
        level = (levels or {}).get(ref)
        own = message if level is None or level[1] in message else f"{level[1]}; {message}"
        decisions.append(GroupOutcome(ref, result, own))
    return decisions


def waiting_outcomes(gang: Gang, message: str, met: dict[GroupRef, str]) -> list[Decision]:
    """Each PodGroup's outcome while the unit waits before its cycle (for members, or for a
    PodGroup to exist)."""
    return [
        GroupOutcome(part.group.ref, SCHEDULED, met[part.group.ref])
        if part.group.ref in met
        else GroupOutcome(part.group.ref, WAITING, message)
        for part in gang.parts
    ]


def short_of_members(part: GangMember) -> bool:
    return part.quorum_bound + len(part.pending) < part.group.min_member
