"""What a tree's cycle says: each level's verdict for its status condition, the message of a
failed tree, and why a pending pod was left out, in kube-scheduler's words where upstream has
them (PlacementFeasible), so a user reading a CompositePodGroup's condition finds the level that
failed and the reason, not only that the tree did not fit.
"""

from __future__ import annotations

from collections.abc import Mapping

from gangsched.core.composite.attempt import Attempt
from gangsched.core.composite.state import TreeState
from gangsched.core.composite.tree import TreeNode
from gangsched.core.cycle import CycleResult, GangMember
from gangsched.core.model import GroupRef, Pod
from gangsched.core.status import Code


def level_verdicts(
    tp: TreeState, at: Attempt, failure: str | None
) -> dict[GroupRef, tuple[bool, str]]:
    """Each level's verdict for status: its own failure first, else (kube-scheduler's
    words) the nearest level above that failed, else placed. `failure`: the root's
    message when the whole tree failed."""
    root = tp.tree
    failed_here = {
        node.ref
        for node in tp.nodes
        if at.satisfied.get(node.ref) is False and at.messages.get(node.ref)
    }
    if failure is not None:
        failed_here.add(root.ref)
    levels: dict[GroupRef, tuple[bool, str]] = {}
    for node in tp.nodes:
        if node is root and failure is not None:
            levels[node.ref] = (False, failure)
            continue
        if node.ref in failed_here:
            levels[node.ref] = (False, at.messages[node.ref])
            continue
        up = next((a for a in tp.ancestors_within(node) if a.ref in failed_here), None)
        if up is not None:
            relation = "parent" if up is node.parent else "ancestor"
            why = failure if up is root and failure is not None else at.messages[up.ref]
            levels[node.ref] = (
                False,
                f'{relation} composite pod group "{up.ref.name}" is unschedulable: {why}',
            )
            continue
        ok = bool(at.satisfied.get(node.ref))
        levels[node.ref] = (ok, at.messages.get(node.ref) or ("placed" if ok else "not tried"))
    return levels


def failure_result(tp: TreeState, at: Attempt, *, nothing_placed: bool = False) -> CycleResult:
    root = tp.tree
    if nothing_placed:
        message = (
            f"{root.label()} is satisfied by its bound members, but none of the "
            f"{len(tp.gang.pending)} pending pod(s) fits"
        )
    else:
        message = f"{root.label()}: {at.messages.get(root.ref) or 'cannot be scheduled'}"
    levels = level_verdicts(tp, at, message)
    for part in tp.gang.parts:
        for pod in part.pending:
            if pod.key not in at.pod_messages:
                at.pod_messages[pod.key] = levels.get(part.group.ref, (False, message))[1]
    return CycleResult(
        Code.UNSCHEDULABLE,
        message=message,
        pod_messages=at.pod_messages,
        failed_pod=at.failed_pod,
        diagnosis=at.diagnosis,
        levels=levels,
    )


def met_by_bound(tree: TreeNode, parts: Mapping[GroupRef, GangMember]) -> dict[GroupRef, str]:
    """The levels whose minimum their bound members alone meet (a PodGroup with minCount
    bound pods, a CompositePodGroup with minGroupCount such children), each with the words a
    successful cycle gives it. Such a level was scheduled: whatever an attempt for the
    members still pending says (the extra child of a satisfied root that fits nowhere, a
    preemption for it), its InitiallyScheduled condition is True and stays so, as upstream's
    never goes back to False; reporting it unschedulable made the status writer, which sees
    only the latest outcome, write False when it had not written the success yet, and kept a
    False written by an earlier attempt (issue 29 item 6)."""
    met: dict[GroupRef, str] = {}

    def visit(node: TreeNode) -> bool:
        if node.is_leaf:
            part = parts.get(node.ref)
            if part is None or not part.bound or part.quorum_bound < part.group.min_member:
                return False
            met[node.ref] = f"{len(part.bound)} pod(s) scheduled"  # as scheduled_outcomes
            return True
        placed = sum([visit(child) for child in node.children])  # every child: its own verdict
        if placed == 0 or placed < node.needed:
            return False
        met[node.ref] = placed_message(node, placed)
        return True

    visit(tree)
    return met


def why_not(tp: TreeState, pod: Pod, at: Attempt) -> str:
    ref = _leaf_of(pod, tp.parts)
    if ref is None:
        return "not placed"
    return at.messages.get(ref) or "not placed: its PodGroup was not needed or did not fit"


def spread_message(node: TreeNode, key: str, values: list[str]) -> str:
    shown = ", ".join(f"{key}={value}" if value else f"no {key}" for value in values)
    return (
        f"{node.label()}: members are bound in more than one {key} domain ({shown}); "
        "no single domain can hold the subtree"
    )


def _leaf_of(pod: Pod, parts: dict[GroupRef, GangMember]) -> GroupRef | None:
    for ref, part in parts.items():
        if any(member is pod for member in part.pending):
            return ref
    return None


def placed_message(node: TreeNode, placed: int) -> str:
    return (
        f"{placed} of {len(node.children)} children scheduled "
        f"({node.composite.policy if node.composite else 'leaf'})"
    )


def short_message(
    node: TreeNode,
    placed: int,
    remaining: int,
    failed: TreeNode | None,
    messages: dict[GroupRef, str],
) -> str:
    """Why a CompositePodGroup failed, in kube-scheduler's words (PlacementFeasible), then
    the first child that failed and why."""
    text = (
        f"minGroupCount ({node.needed}) cannot be satisfied: "
        f"{placed} scheduled, {remaining} remaining"
    )
    if failed is not None and messages.get(failed.ref):
        text += f"; {failed.label()}: {messages[failed.ref]}"
    return text
