"""The checks a tree must pass before its cycle (kube-scheduler 1.38, #141930).

Every PodGroup and CompositePodGroup of a tree is scheduled with the root's priority and
preemption policy, so all of them must agree with the root (the Workload API enforces this
for trees built from templates; hand-made objects can still disagree). Each leaf also passes
the ordinary PodGroup checks against its own pods. A failure is an error on the whole tree:
nothing of it is placed, and every level is told why.
"""

from __future__ import annotations

from gangsched.core.composite.tree import TreeNode
from gangsched.core.cycle import Gang, validate


def level_priority(node: TreeNode) -> int | None:
    if node.composite is not None:
        return node.composite.priority
    return node.group.priority if node.group is not None else None


def level_policy(node: TreeNode) -> str | None:
    if node.composite is not None:
        return node.composite.preemption_policy
    return node.group.preemption_policy if node.group is not None else None


def validate_tree(gang: Gang, tree: TreeNode) -> str | None:
    """Why the tree may not be scheduled as it is, or None."""
    root_priority = level_priority(tree) or 0
    root_policy = level_policy(tree)
    for node in tree.walk()[1:]:
        priority = level_priority(node) or 0
        if priority != root_priority:
            return (
                "all pod groups and composite pod groups in a hierarchy should have the same "
                f"priority as the root {tree.label()}, got {priority} ({node.label()}) "
                f"and {root_priority}"
            )
        policy = level_policy(node)
        if root_policy is not None and policy is not None and policy != root_policy:
            return (
                "all pod groups and composite pod groups in a hierarchy should have the same "
                f"preemptionPolicy as the root {tree.label()}, got {policy} ({node.label()}) "
                f"and {root_policy}"
            )
    return validate(gang)
