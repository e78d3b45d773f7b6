"""The shape of a PodGroup tree: who is whose parent, the root of a group, and what is broken.

Parent links point upwards (`parentCompositePodGroupName` on PodGroups and CompositePodGroups),
so a tree is found by walking from a leaf to its root and then collecting everything below
the root. A link to a CompositePodGroup that does not exist, a cycle, or a tree deeper than
upstream allows leaves the tree without a root: nothing of it may be placed, and every object
on the broken path is told why. Victim grouping (highest DisruptionMode All ancestor) walks
the same links and tolerates the same breakage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gangsched.core.composite.model import CompositePodGroup, composite_ref
from gangsched.core.model import Dialect, DisruptionMode, GroupRef, PodGroup

#: kube-apiserver's WorkloadMaxTreeDepth: a Workload's template tree is at most 4 levels deep.
MAX_TREE_DEPTH = 4


@dataclass(frozen=True, slots=True)
class BrokenTree:
    """Why a group has no usable root, and the objects on the broken path (leaf first)."""

    message: str
    path: tuple[GroupRef, ...]


@dataclass(slots=True)
class TreeNode:
    """One level of a tree: a CompositePodGroup with children, or a leaf PodGroup."""

    ref: GroupRef
    composite: CompositePodGroup | None = None
    group: PodGroup | None = None
    children: list[TreeNode] = field(default_factory=list)
    parent: TreeNode | None = None

    @property
    def is_leaf(self) -> bool:
        return self.composite is None

    @property
    def needed(self) -> int:
        """Children that must be placed: minGroupCount, or one for a basic policy."""
        return self.composite.min_group_count if self.composite is not None else 0

    def walk(self) -> list[TreeNode]:
        """This node and everything below it, parents before children, children in order."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out

    def leaves(self) -> list[TreeNode]:
        return [node for node in self.walk() if node.is_leaf]

    def ancestors(self) -> list[TreeNode]:
        out = []
        node = self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def label(self) -> str:
        kind = "CompositePodGroup" if self.composite is not None else "PodGroup"
        return f"{kind} {self.ref.key}"


def parent_ref(ref: GroupRef, parent: str | None) -> GroupRef | None:
    return composite_ref(ref.namespace, parent) if parent is not None else None


def parent_of(
    ref: GroupRef,
    groups: Mapping[GroupRef, PodGroup],
    composites: Mapping[GroupRef, CompositePodGroup],
) -> GroupRef | None:
    """The CompositePodGroup `ref` names as its parent (whether it exists or not)."""
    if ref.dialect is Dialect.COMPOSITE:
        composite = composites.get(ref)
        return parent_ref(ref, composite.parent) if composite is not None else None
    group = groups.get(ref)
    return parent_ref(ref, group.parent) if group is not None else None


def in_tree(ref: GroupRef, groups: Mapping[GroupRef, PodGroup]) -> bool:
    """Whether `ref` is a PodGroup that names a parent (and so is scheduled with its tree)."""
    group = groups.get(ref) if ref.dialect is Dialect.UPSTREAM else None
    return group is not None and group.parent is not None


def root_of(
    ref: GroupRef,
    groups: Mapping[GroupRef, PodGroup],
    composites: Mapping[GroupRef, CompositePodGroup],
) -> GroupRef | BrokenTree:
    """The root CompositePodGroup above `ref`, or why there is none."""
    path = [ref]
    current = ref
    while True:
        up = parent_of(current, groups, composites)
        if up is None:
            return current
        if up in path:
            cycle = " -> ".join(r.name for r in [*path[path.index(up) :], up])
            return BrokenTree(
                f"CompositePodGroup {up.key} is part of a cycle of parent references "
                f"({cycle}); the tree has no root, so none of it is scheduled",
                tuple(path),
            )
        if up not in composites:
            return BrokenTree(
                f"{_kind(current)} {current.key} names parentCompositePodGroupName "
                f'"{up.name}", which does not exist; none of the tree is scheduled until it does',
                tuple(path),
            )
        path.append(up)
        if len(path) > MAX_TREE_DEPTH + 1:
            return BrokenTree(
                f"the tree above {_kind(ref)} {ref.key} is deeper than {MAX_TREE_DEPTH} "
                "levels (kube-apiserver's limit for Workload trees)",
                tuple(path),
            )
        current = up


def _kind(ref: GroupRef) -> str:
    return "CompositePodGroup" if ref.dialect is Dialect.COMPOSITE else "PodGroup"


def children_index(
    groups: Mapping[GroupRef, PodGroup], composites: Mapping[GroupRef, CompositePodGroup]
) -> dict[GroupRef, list[GroupRef]]:
    """CompositePodGroup -> its children, oldest first (KEP-6012's alpha order), then name."""
    index: dict[GroupRef, list[tuple[float, str, GroupRef]]] = {}
    for ref, group in groups.items():
        up = parent_ref(ref, group.parent) if ref.dialect is Dialect.UPSTREAM else None
        if up is not None:
            index.setdefault(up, []).append((group.created, ref.name, ref))
    for ref, composite in composites.items():
        up = parent_ref(ref, composite.parent)
        if up is not None:
            index.setdefault(up, []).append((composite.created, ref.name, ref))
    return {parent: [ref for *_, ref in sorted(kids)] for parent, kids in index.items()}


def build_tree(
    root: GroupRef,
    groups: Mapping[GroupRef, PodGroup],
    composites: Mapping[GroupRef, CompositePodGroup],
    children: Mapping[GroupRef, list[GroupRef]],
) -> TreeNode:
    """The tree below `root` (a CompositePodGroup, or a lone PodGroup)."""

    def build(ref: GroupRef, parent: TreeNode | None, seen: set[GroupRef]) -> TreeNode:
        if ref.dialect is Dialect.COMPOSITE:
            node = TreeNode(ref=ref, composite=composites.get(ref), parent=parent)
            seen.add(ref)
            for kid in children.get(ref, ()):
                if kid not in seen:
                    node.children.append(build(kid, node, seen))
            return node
        return TreeNode(ref=ref, group=groups.get(ref), parent=parent)

    return build(root, None, set())


def highest_all_ancestor(
    ref: GroupRef,
    groups: Mapping[GroupRef, PodGroup],
    composites: Mapping[GroupRef, CompositePodGroup],
) -> GroupRef | None:
    """The highest group at or above PodGroup `ref` with DisruptionMode All: upstream's
    preemption victim unit (getHighestAllAncestor). Stops at a missing parent or a cycle."""
    found: GroupRef | None = None
    group = groups.get(ref)
    if group is not None and group.disruption_mode is DisruptionMode.ALL:
        found = ref
    seen = {ref}
    up = parent_of(ref, groups, composites)
    while up is not None and up not in seen:
        composite = composites.get(up)
        if composite is None:
            break
        seen.add(up)
        if composite.disruption_mode is DisruptionMode.ALL:
            found = up
        up = parent_ref(up, composite.parent)
    return found


def leaves_below(ref: GroupRef, children: Mapping[GroupRef, list[GroupRef]]) -> list[GroupRef]:
    """Every PodGroup in the subtree of `ref` (itself, for a PodGroup)."""
    out: list[GroupRef] = []
    stack = [ref]
    seen: set[GroupRef] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.dialect is Dialect.COMPOSITE:
            stack.extend(reversed(children.get(current, ())))
        else:
            out.append(current)
    return out
