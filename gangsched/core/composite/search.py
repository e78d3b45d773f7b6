"""The two searches of the tree cycle, run where upstream's greedy order fails (the module
doc of placement.py): which leaves to take, each placed whole by the gang cycle; and where each
pod goes across the whole tree, exact on small trees within the cycle's search budget.
"""

from __future__ import annotations

import numpy as np

from gangsched.core.composite.attempt import Attempt
from gangsched.core.composite.state import TreeState
from gangsched.core.composite.tree import TreeNode
from gangsched.core.composite.verdicts import placed_message
from gangsched.core.cycle import Gang, member_order
from gangsched.core.model import GroupRef, Pod
from gangsched.core.node_equivalence import nodes_interchangeable, nodes_to_try
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code

#: Leaf placements the "which children" search may try before it gives up.
SUBSET_BUDGET = 256


def leaf_orders(tp: TreeState) -> tuple[list[TreeNode], list[TreeNode]]:
    leaves = [leaf for leaf in tp.tree.leaves() if tp.leaf_ready(leaf)]
    return leaves, sorted(leaves, key=lambda node: demand(tp, node), reverse=True)


def demand(tp: TreeState, node: TreeNode) -> float:
    """A leaf's share of the cluster: its minCount smallest pending pods' dominant share."""
    part = tp.part(node)
    if part is None or not part.pending:
        return 0.0
    snap = tp.snap
    capacity = snap.allocatable.sum(axis=0).astype(np.float64) if len(snap) else None
    vectors = np.stack([snap.vector(pod) for pod in part.pending]).astype(np.float64)
    need = max(part.group.min_member - part.quorum_bound, 0)
    wanted = np.sort(vectors, axis=0)[:need].sum(axis=0)
    if capacity is None:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(capacity > 0, wanted / capacity, 0.0)
    return float(shares.max(initial=0.0))


def subset_search(tp: TreeState, order: list[TreeNode]) -> Attempt | None:
    """Which leaves to take: each one placed whole by the gang cycle, or left out."""
    snap = tp.snap
    at = Attempt()
    decided: dict[GroupRef, bool] = {}
    budget = [SUBSET_BUDGET]

    def search(index: int) -> bool:
        if index == len(order):
            return tp.complete(decided) and bool(at.placements)
        if budget[0] <= 0:
            return False
        leaf = order[index]
        part = tp.part(leaf)
        if tp.bound_ok(leaf) or part is None:
            decided[leaf.ref] = tp.bound_ok(leaf)
            if tp.achievable(decided) and search(index + 1):
                return True
            del decided[leaf.ref]
            return False
        budget[0] -= 1
        mark, start = snap.checkpoint(), len(at.placements)
        result = tp.placer.place(Gang(key=leaf.ref, parts=[part]), snap)
        if result.code is Code.SUCCESS:
            at.placements.extend(result.placements)
            decided[leaf.ref] = True
            if tp.achievable(decided) and search(index + 1):
                return True
            del at.placements[start:]
        snap.rollback(mark)
        decided[leaf.ref] = False
        if tp.achievable(decided) and search(index + 1):
            return True
        del decided[leaf.ref]
        return False

    if not search(0):
        return None
    mark_satisfied(tp, at, decided)
    return at


def fragmentation(snap: Snapshot, at: Attempt) -> tuple[int, int]:
    """How much of the cluster a placement breaks up, lower is better: first the whole nodes
    it takes (nodes that held no pod before this placement; each one lost is room a later
    gang needing whole nodes no longer has), then how many nodes it touches. This is the
    topology module's "tightest first" applied to nodes: fill what is already in use before
    opening an idle node. Read from the snapshot with the placement assumed."""
    on_node: dict[int, set[str]] = {}
    for pod, node in at.placements:
        on_node.setdefault(node, set()).add(pod.key)
    opened = sum(1 for node, keys in on_node.items() if set(snap.node_pods[node]) <= keys)
    return opened, len(on_node)


def backtrack(tp: TreeState, *, tightest: bool = False) -> Attempt | None:
    """Where each pod goes, across the whole tree (module doc, search 2). With ``tightest``
    the nodes already in use are tried before idle ones (scorer order otherwise), the search
    that looks for the least fragmented placement."""
    snap, framework = tp.snap, tp.placer.framework
    config = tp.placer.config
    leaves = [
        leaf for leaf in leaf_orders(tp)[1] if not tp.bound_ok(leaf) and tp.part(leaf) is not None
    ]
    sequence: list[tuple[Pod, TreeNode, bool]] = []
    for leaf in leaves:
        part = tp.part(leaf)
        assert part is not None
        pods = member_order(part.pending)
        sequence += [(pod, leaf, i == len(pods) - 1) for i, pod in enumerate(pods)]
    placed: dict[GroupRef, int] = {leaf.ref: 0 for leaf in leaves}
    remaining: dict[GroupRef, int] = {
        leaf.ref: len(tp.part(leaf).pending)  # type: ignore[union-attr]
        for leaf in leaves
    }
    at = Attempt()
    budget = [config.search_budget]
    dedupe = nodes_interchangeable([pod for pod, _, _ in sequence], snap)

    def leaf_state() -> dict[GroupRef, bool | None]:
        state: dict[GroupRef, bool | None] = {}
        for leaf in tp.tree.leaves():
            part = tp.part(leaf)
            if part is None:
                state[leaf.ref] = False
            elif tp.bound_ok(leaf):
                state[leaf.ref] = True
            elif leaf.ref not in placed:
                state[leaf.ref] = False  # not ready
            else:
                have = part.quorum_bound + placed[leaf.ref]
                if have >= part.group.min_member:
                    state[leaf.ref] = True
                elif have + remaining[leaf.ref] < part.group.min_member:
                    state[leaf.ref] = False
                else:
                    state[leaf.ref] = None  # still open
        return state

    def leaf_whole(leaf: TreeNode) -> bool:
        part = tp.part(leaf)
        assert part is not None
        count = placed[leaf.ref]
        return count == 0 or part.quorum_bound + count >= part.group.min_member

    def done() -> bool:
        # Checked at leaf boundaries only: every leaf before is whole, every later one
        # has nothing placed yet.
        state = leaf_state()
        leaves = {ref: value is True for ref, value in state.items()}
        return bool(at.placements) and tp.complete(leaves, placed_counts=placed)

    def search(index: int) -> bool:
        if index == len(sequence) or (index > 0 and sequence[index - 1][2] and done()):
            return done()
        if budget[0] <= 0:
            return False
        pod, leaf, last = sequence[index]
        remaining[leaf.ref] -= 1
        ctx = framework.context(pod, snap)
        mask = framework.feasible(ctx, snap)
        ranked = [int(node) for node in framework.ranked(ctx, snap, mask)]
        if tightest:
            ranked.sort(key=lambda node: not snap.node_pods[node])  # stable: scorer order kept
        width = config.search_width
        for node in nodes_to_try(snap, ranked, width=width, budget=budget, dedupe=dedupe):
            mark = snap.checkpoint()
            snap.assume(pod, node)
            at.placements.append((pod, node))
            placed[leaf.ref] += 1
            whole = not last or leaf_whole(leaf)
            if whole and tp.achievable_open(leaf_state()) and search(index + 1):
                return True
            placed[leaf.ref] -= 1
            at.placements.pop()
            snap.rollback(mark)
        whole = not last or leaf_whole(leaf)
        if whole and tp.achievable_open(leaf_state()) and search(index + 1):
            return True
        remaining[leaf.ref] += 1
        return False

    if not search(0):
        return None
    state = leaf_state()
    mark_satisfied(tp, at, {ref: value is True for ref, value in state.items()})
    return at


def mark_satisfied(tp: TreeState, at: Attempt, leaves: dict[GroupRef, bool]) -> None:
    """Each level's verdict in `at` once a search decided which leaves are placed."""
    for node in tp.nodes:
        ok = tp.count(node, leaves)
        at.satisfied[node.ref] = ok
        if node.is_leaf:
            at.messages[node.ref] = "placed" if ok else "not needed by its parent"
        else:
            placed = sum(1 for child in node.children if tp.count(child, leaves))
            at.messages[node.ref] = placed_message(node, placed)
