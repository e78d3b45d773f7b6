"""The scheduler's side of a CompositePodGroup tree: the unit a tree is scheduled as (or why the
tree a PodGroup names a parent in has no root), and after a cycle each CompositePodGroup
level's outcome, where a level its bound members already satisfy stays scheduled.

A tree is placed by the tree placer (core/composite/placer.py, picked by core/placers.py),
and its PodGroups are told their outcome as every PodGroup is (schedule_group.py); the
scheduler (scheduler.py) runs both.
"""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.tree import BrokenTree, TreeNode, build_tree
from gangsched.core.composite.verdicts import met_by_bound
from gangsched.core.cycle import CycleResult, Gang
from gangsched.core.decisions import ERROR, SCHEDULED, UNSCHEDULABLE, Decision, GroupOutcome
from gangsched.core.model import Dialect, GroupRef


def broken_tree(cluster: ClusterState, key: GroupRef) -> BrokenTree | None:
    """Why the tree the PodGroup `key` names a parent in has no root (nothing of it is
    placed), or None."""
    if key.dialect is not Dialect.UPSTREAM or key not in cluster.groups:
        return None
    root = cluster.tree_root(key)
    return root if isinstance(root, BrokenTree) else None


def unit_tree(cluster: ClusterState, key: GroupRef) -> TreeNode | None:
    """The tree of the unit queued under `key`, when that is a CompositePodGroup."""
    if key.dialect is not Dialect.COMPOSITE:
        return None
    return build_tree(key, cluster.groups, cluster.composites, cluster.tree_children())


def levels_met(gang: Gang) -> dict[GroupRef, str]:
    """The levels of the gang's tree that its bound members satisfy (none for other gangs:
    a flat gang's outcome is its cycle's)."""
    if gang.tree is None or gang.broken is not None:
        return {}
    return met_by_bound(gang.tree, {part.group.ref: part for part in gang.parts})


def composite_outcomes(
    gang: Gang,
    placed: CycleResult | None,
    result: str,
    message: str,
    *,
    levels: dict[GroupRef, tuple[bool, str]] | None = None,
    met: dict[GroupRef, str] | None = None,
) -> list[Decision]:
    """One outcome per CompositePodGroup of the tree (their status condition and the
    report), and for a broken tree one per CompositePodGroup on the broken path. `met`: the
    levels its bound members satisfy, scheduled whatever this cycle says."""
    if gang.broken is not None:
        return [
            GroupOutcome(ref, ERROR, gang.broken.message)
            for ref in gang.broken.path
            if ref.dialect is Dialect.COMPOSITE
        ]
    if gang.tree is None:
        return []
    levels = placed.levels if placed is not None else (levels or {})
    out: list[Decision] = []
    for node in gang.tree.walk():
        if node.composite is None:
            continue
        level = levels.get(node.ref)
        if met and node.ref in met and (placed is None or (level is not None and not level[0])):
            # (A level this cycle placed more of speaks of those too: its own words.)
            out.append(GroupOutcome(node.ref, SCHEDULED, met[node.ref]))
            continue
        if placed is not None and level is not None and not level[0]:
            out.append(GroupOutcome(node.ref, UNSCHEDULABLE, level[1]))
            continue
        own = message
        if placed is None and level is not None and level[1] not in message:
            own = f"{level[1]}; {message}"
        elif placed is not None and level is not None:
            own = level[1]
        out.append(GroupOutcome(node.ref, result, own))
    return out
