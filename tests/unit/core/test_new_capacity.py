"""Gangs bound on nodes created after they became Unschedulable (issue 32 item 5)."""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import Bind
from gangsched.core.new_capacity import NewCapacity, bound_on_new_capacity
from tests.builders import cluster, gang_pods, group, node, ref

UNSCHEDULABLE_AT = 1_000.0


def state(*, since: float | None = UNSCHEDULABLE_AT) -> tuple[list[Bind], ClusterState]:
    members = gang_pods("train", 3)
    for offset, member in enumerate(members):
        member.unschedulable_since = None if since is None else since + offset
    old, new_a, new_b = node("old"), node("new-a"), node("new-b")
    old.created, new_a.created, new_b.created = 10.0, 1_030.0, 1_031.0
    binds = [
        Bind(pod=m.key, uid=m.uid, node=n, group=ref("train"))
        for m, n in zip(members, ["old", "new-a", "new-b"], strict=True)
    ]
    return binds, cluster([old, new_a, new_b], members, [group("train", 3)])


def test_the_new_nodes_and_the_seconds_since_the_first_unschedulable_member() -> None:
    binds, built = state()
    grown = bound_on_new_capacity(binds, built, now=1_075.0)
    assert grown == NewCapacity(seconds=75.0, nodes=2)


def test_a_gang_bound_only_on_old_nodes_is_not_counted() -> None:
    binds, built = state()
    on_old = [b for b in binds if b.node == "old"]
    assert bound_on_new_capacity(on_old, built, now=1_075.0) is None


def test_a_gang_never_unschedulable_is_not_counted() -> None:
    binds, built = state(since=None)
    assert bound_on_new_capacity(binds, built, now=1_075.0) is None
