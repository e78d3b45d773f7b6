"""Why a gang waits before any placement is tried: fewer than minMember members exist ungated
(or, for a Volcano group, too few members of one task).

Waiting is not unschedulable: autoscalers scale up on Unschedulable, and a gang still missing
members would have them add nodes for nothing. These texts go on the PodGroup (with counts)
and on the pods and events (without, so that each arriving member does not cost one API
write per pod); gated members are named with their gates, since removing a gate is what the
user does next.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from gangsched.core.cycle import Gang, GangMember
from gangsched.core.model import Pod


def waiting_part(gang: Gang) -> GangMember | None:
    """The first PodGroup of the gang with fewer members than its minMember (or, for a Volcano
    group, fewer members of one task than its minTaskMember)."""
    for part in gang.parts:
        if part.quorum_bound + len(part.pending) < part.group.min_member:
            return part
        if short_task(part, part.pending) is not None:
            return part
    return None


def short_task(part: GangMember, placed: Iterable[Pod]) -> tuple[str, int, int] | None:
    """The first task of a Volcano group with fewer bound + `placed` members than its
    minTaskMember asks: (task, have, need), or None when every task has enough."""
    if not part.group.min_task_members:
        return None
    have = Counter(pod.task for pod in part.bound)
    have.update(pod.task for pod in placed)
    for task, need in sorted(part.group.min_task_members.items()):
        if have[task] < need:
            return task, have[task], need
    return None


def waiting_message(gang: Gang) -> str | None:
    """Fewer members than minMember exist ungated: nothing is placed until they do.

    Gated members do not count (scheduler-plugins' rule: a gang goes once minMember members
    are bound or ungated); the message says how many are gated and by which gates."""
    part = waiting_part(gang)
    if part is None:
        return None
    have = part.quorum_bound + len(part.pending)
    need = part.group.min_member
    task = short_task(part, part.pending) if have >= need else None
    if task is not None:
        name, task_have, task_need = task
        text = (
            f"pod group {part.group.key} has {task_have} of minTaskMember[{name}] {task_need} "
            f"pods of task {name}; waiting for {task_need - task_have} more"
        )
        return f"{text}: {gated_summary(part.gated)}" if part.gated else text
    if not part.gated:
        return (
            f"pod group {part.group.key} has {have} of minMember {need} pods; "
            f"waiting for {need - have} more"
        )
    return (
        f"pod group {part.group.key} has {have} of minMember {need} pods bound or ungated; "
        f"waiting for {need - have} more: {gated_summary(part.gated)}"
    )


def waiting_note(gang: Gang) -> str:
    """The same without the counts: pod conditions and events keep one text while members
    arrive, instead of one API write per pod per arrival (the counts are in the PodGroup)."""
    part = waiting_part(gang)
    if part is None:
        return ""
    if not part.gated:
        return (
            f"pod group {part.group.key} is waiting for its members: "
            f"minMember {part.group.min_member} pods must exist before any is scheduled"
        )
    return (
        f"pod group {part.group.key} is waiting for its members: minMember "
        f"{part.group.min_member} pods must exist without scheduling gates before any is "
        f"scheduled; {gated_summary(part.gated)}"
    )


def gated_summary(pods: Sequence[Pod], *, limit: int = 5) -> str:
    """ "3 members gated: kueue.x-k8s.io/admission (a, b, c)": which gates hold which pods."""
    by_gate: dict[str, list[str]] = {}
    for pod in sorted(pods, key=lambda p: (p.created, p.name)):
        for gate in pod.scheduling_gates:
            by_gate.setdefault(gate, []).append(pod.name)
    parts = []
    for gate, names in by_gate.items():
        shown = ", ".join(names[:limit])
        if len(names) > limit:
            shown += f" and {len(names) - limit} more"
        parts.append(f"{gate} ({shown})")
    noun = "member" if len(pods) == 1 else "members"
    return f"{len(pods)} {noun} gated: {'; '.join(parts)}"
