"""One tree under placement: its levels, the members of its PodGroups, and the arithmetic of
readiness and satisfaction over them.

The tree's cycle (placement.py), its two searches (search.py) and its verdicts (verdicts.py)
all read a tree this way; it lives below them so that none of them imports another to get
it. A level is ready (upstream's readiness, before anything is placed) when its PodGroup
has minCount members, or its CompositePodGroup minGroupCount ready children; it is satisfied
(`count`) when as many of them are placed.
"""

from __future__ import annotations

from gangsched.core.composite.tree import TreeNode
from gangsched.core.cycle import Gang, GangMember
from gangsched.core.model import GroupRef
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.topology.placement import TopologyPlacer


class TreeState:
    """A tree (or a constrained level's subtree) being placed over a snapshot by `placer`,
    which places each leaf PodGroup whole."""

    def __init__(
        self,
        placer: TopologyPlacer,
        gang: Gang,
        snap: Snapshot,
        *,
        outer: BoolVector | None = None,
    ) -> None:
        assert gang.tree is not None
        self.placer = placer
        self.gang = gang
        self.tree: TreeNode = gang.tree
        self.snap = snap
        self.parts: dict[GroupRef, GangMember] = {part.group.ref: part for part in gang.parts}
        self.nodes = self.tree.walk()
        #: The domain this (sub)tree is confined to by a constrained level above, if any.
        self.outer = outer

    def ancestors_within(self, node: TreeNode) -> list[TreeNode]:
        """The levels above `node` up to this placement's root (a subtree stops there)."""
        out = []
        current = node
        while current is not self.tree and current.parent is not None:
            current = current.parent
            out.append(current)
        return out

    # ------------------------------------------------------------------------ leaf facts
    def part(self, node: TreeNode) -> GangMember | None:
        return self.parts.get(node.ref)

    def bound_ok(self, node: TreeNode) -> bool:
        part = self.part(node)
        return part is not None and part.quorum_bound >= part.group.min_member

    def leaf_ready(self, node: TreeNode) -> bool:
        part = self.part(node)
        return (
            part is not None
            and node.group is not None
            and part.quorum_bound + len(part.pending) >= part.group.min_member
        )

    def ready(self, node: TreeNode) -> bool:
        """Upstream's readiness (propagates up): a PodGroup with minCount members, a
        CompositePodGroup with minGroupCount ready children (one, basic)."""
        if node.is_leaf:
            return self.leaf_ready(node)
        if node.composite is None:
            return False
        return sum(1 for child in node.children if self.ready(child)) >= node.needed

    def not_ready_reason(self, node: TreeNode) -> str:
        """Why `node` is not ready, naming the deepest level that holds it back."""
        if node.is_leaf:
            part = self.part(node)
            if part is None or node.group is None:
                return f"PodGroup {node.ref.key} does not exist"
            have = part.quorum_bound + len(part.pending)
            return f"PodGroup {node.ref.key} has {have} of minCount {part.group.min_member} pods"
        ready = sum(1 for child in node.children if self.ready(child))
        text = (
            f"CompositePodGroup {node.ref.key} has {ready} ready of {len(node.children)} "
            f"children, needs {node.needed} ({node.composite.policy if node.composite else ''})"
        )
        first = next((child for child in node.children if not self.ready(child)), None)
        if first is not None:
            text += f"; {self.not_ready_reason(first)}"
        return text

    # ------------------------------------------------------------------- satisfaction
    def count(self, node: TreeNode, leaves: dict[GroupRef, bool]) -> bool:
        if node.is_leaf:
            return leaves.get(node.ref, False)
        return sum(1 for child in node.children if self.count(child, leaves)) >= node.needed

    def achievable(self, decided: dict[GroupRef, bool]) -> bool:
        """Whether the root can still be satisfied, undecided ready leaves counted as yes."""
        leaves = {
            leaf.ref: decided.get(leaf.ref, self.leaf_ready(leaf)) for leaf in self.tree.leaves()
        }
        return self.count(self.tree, leaves)

    def achievable_open(self, state: dict[GroupRef, bool | None]) -> bool:
        return self.count(self.tree, {ref: value is not False for ref, value in state.items()})

    def complete_partial(self, state: dict[GroupRef, bool | None]) -> bool:
        """Open leaves count as not placed: is the tree already satisfied without them?"""
        return self.count(self.tree, {ref: bool(value) for ref, value in state.items()})

    def complete(
        self,
        leaves: dict[GroupRef, bool],
        *,
        placed_counts: dict[GroupRef, int] | None = None,
    ) -> bool:
        """The root is satisfied and every leaf that got pods has every ancestor satisfied."""
        if not self.count(self.tree, leaves):
            return False
        for leaf in self.tree.leaves():
            took = leaves.get(leaf.ref, False) and not self.bound_ok(leaf)
            if placed_counts is not None:
                took = placed_counts.get(leaf.ref, 0) > 0
            if took and not all(self.count(up, leaves) for up in self.ancestors_within(leaf)):
                return False
        return True
