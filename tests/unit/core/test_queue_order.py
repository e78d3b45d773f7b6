"""Queue order per dialect's owner (issue 19 item 2; core/queue_order.py).

kube-scheduler orders upstream groups and lone pods by priority, then the queue timestamp of
their pods; scheduler-plugins' Coscheduling and Koordinator order their groups by priority,
then the PodGroup's creation time, a pod without a PodGroup by its own; ties by pod name.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE
from gangsched.core.model import Dialect, GroupRef, Pod, PodGroup
from gangsched.core.queue_order import queue_position
from gangsched.core.scheduler import Scheduler
from tests.builders import SCHEDULER, node, pod


def ref(dialect: Dialect, name: str) -> GroupRef:
    return GroupRef(dialect, "default", name)


def pod_group(
    dialect: Dialect, name: str, min_member: int, *, created: float, priority: int = 0
) -> PodGroup:
    return PodGroup(
        ref=ref(dialect, name), min_member=min_member, created=created, priority=priority
    )


def member(name: str, dialect: Dialect, group: str, *, created: float, **kwargs: object) -> Pod:
    return replace(pod(name, created=created, **kwargs), group=ref(dialect, group))  # type: ignore[arg-type]


def build(pods: list[Pod], groups: list[PodGroup], cpu: float = 4) -> ClusterState:
    return ClusterState.build(
        scheduler_name=SCHEDULER, nodes=[node("node", cpu=cpu)], pods=pods, groups=groups
    )


def pop_order(state: ClusterState) -> list[str]:
    sched = Scheduler(state)
    sched.enqueue_pending()
    order = []
    while (key := sched.queue.pop(0.0)) is not None:
        order.append(key.key)
    return order


def test_a_lone_pod_created_before_a_gangs_pods_goes_first_despite_an_older_pod_group() -> None:
    """podgroup_test.go "pod group interleaving with an individual pod shouldn't deadlock nor
    livelock, and the individual pod gets scheduled": PodGroup, then blocker, p1, p2, p3."""
    group = pod_group(Dialect.UPSTREAM, "pg1", 3, created=1, priority=100)
    pods = [
        pod("blocker", cpu=2, priority=100, created=2),
        *(member(f"p{i}", Dialect.UPSTREAM, "pg1", created=2 + i, priority=100) for i in (1, 2, 3)),
    ]
    state = build(pods, [group])
    assert pop_order(build(pods, [group])) == ["default/blocker", "default/pg1"]
    sched = Scheduler(state)
    sched.enqueue_pending()
    results = []
    while (report := sched.step(0.0)) is not None:
        results.append((report.gang.key, report.result))
    assert results == [("default/blocker", SCHEDULED), ("default/pg1", UNSCHEDULABLE)]
    assert state.pods["default/blocker"].node_name == "node"


def test_upstream_gangs_go_in_the_order_of_their_first_pods() -> None:
    """podgroup_test.go "two gangs competing ... reversed order": pg1 is the older PodGroup,
    but pg2's first pod was created first, so pg2 is scheduled and pg1 is not."""
    groups = [
        pod_group(Dialect.UPSTREAM, "pg1", 3, created=1, priority=100),
        pod_group(Dialect.UPSTREAM, "pg2", 3, created=2, priority=100),
    ]
    names = ["other-p3", "p3", "other-p2", "p2", "other-p1", "p1"]
    pods = [
        member(n, Dialect.UPSTREAM, "pg2" if n.startswith("other") else "pg1", created=3 + i)
        for i, n in enumerate(names)
    ]
    assert pop_order(build(pods, groups)) == ["default/pg2", "default/pg1"]


def test_scheduler_plugins_groups_go_in_the_order_of_their_pod_groups() -> None:
    """Coscheduling's Less: the PodGroup's creationTimestamp, whatever its pods' ages; a pod
    without a PodGroup by its own (initial attempt) time."""
    for dialect in (Dialect.X_K8S, Dialect.SIGS):
        groups = [pod_group(dialect, "old", 1, created=1), pod_group(dialect, "new", 1, created=5)]
        pods = [
            member("new-0", dialect, "new", created=6),
            pod("lone", created=3),
            member("old-0", dialect, "old", created=9),
        ]
        assert pop_order(build(pods, groups)) == ["default/old", "default/lone", "default/new"]


def test_a_group_whose_pod_group_is_missing_goes_by_its_pods() -> None:
    pods = [member("x-0", Dialect.X_K8S, "ghost", created=4), pod("lone", created=3)]
    state = build(pods, [])
    gang = Scheduler(state).gang(ref(Dialect.X_K8S, "ghost"))
    assert queue_position(gang).timestamp == 4
    assert pop_order(state) == ["default/lone", "default/ghost"]


def test_koordinator_annotation_gangs_go_by_their_first_pod() -> None:
    pods = [
        member("k-1", Dialect.KOORDINATOR, "k", created=7),
        member("k-0", Dialect.KOORDINATOR, "k", created=2, node_name="node"),
        pod("lone", created=5),
    ]
    # The gang came into being with k-0 (bound since): Koordinator's gang CreateTime.
    assert pop_order(build(pods, [])) == ["default/k", "default/lone"]


def test_priority_beats_age_in_every_dialect() -> None:
    groups = [pod_group(Dialect.X_K8S, "old-low", 1, created=1, priority=1)]
    pods = [
        member("a", Dialect.X_K8S, "old-low", created=1, priority=1),
        pod("young-high", created=50, priority=2),
    ]
    assert pop_order(build(pods, groups)) == ["default/young-high", "default/old-low"]


def test_ties_go_to_the_smallest_pod_name() -> None:
    groups = [pod_group(Dialect.X_K8S, "zz", 1, created=3)]
    pods = [
        member("a-member", Dialect.X_K8S, "zz", created=3),
        pod("b-lone", created=3),
    ]
    # Coscheduling compares "namespace/podname" on equal times: a-member before b-lone.
    assert pop_order(build(pods, groups)) == ["default/zz", "default/b-lone"]


def test_mixed_dialects_share_one_order() -> None:
    groups = [
        pod_group(Dialect.UPSTREAM, "up", 1, created=1),
        pod_group(Dialect.X_K8S, "xk", 1, created=3),
    ]
    pods = [
        member("up-0", Dialect.UPSTREAM, "up", created=5),
        member("xk-0", Dialect.X_K8S, "xk", created=10),
        pod("lone", created=4),
    ]
    assert pop_order(build(pods, groups)) == ["default/xk", "default/lone", "default/up"]


def test_a_gang_group_stands_where_its_earliest_part_stands() -> None:
    a = replace(
        pod_group(Dialect.SIGS, "a", 1, created=6),
        gang_group=(ref(Dialect.SIGS, "a"), ref(Dialect.SIGS, "b")),
    )
    b = replace(pod_group(Dialect.SIGS, "b", 1, created=2), gang_group=a.gang_group)
    pods = [
        member("a-0", Dialect.SIGS, "a", created=7),
        member("b-0", Dialect.SIGS, "b", created=8),
        pod("lone", created=4),
    ]
    state = build(pods, [a, b])
    gang = Scheduler(state).gang(ref(Dialect.SIGS, "a"))
    assert queue_position(gang).timestamp == 2
    assert pop_order(state) == ["default/a", "default/lone"]


# ------------------------------------------------------------------------------ property
@st.composite
def upstream_and_lone(draw: st.DrawFn) -> ClusterState:
    pods: list[Pod] = []
    groups: list[PodGroup] = []
    for g in range(draw(st.integers(0, 3))):
        groups.append(
            pod_group(
                Dialect.UPSTREAM,
                f"g{g}",
                1,
                created=draw(st.integers(0, 20)),
                priority=draw(st.sampled_from([0, 5])),
            )
        )
        prio = groups[-1].priority
        for m in range(draw(st.integers(1, 3))):
            pods.append(
                member(
                    f"g{g}-{m}",
                    Dialect.UPSTREAM,
                    f"g{g}",
                    created=draw(st.integers(0, 20)),
                    priority=prio,
                )
            )
    for i in range(draw(st.integers(0, 4))):
        pods.append(
            pod(
                f"lone-{i}",
                created=draw(st.integers(0, 20)),
                priority=draw(st.sampled_from([0, 5])),
            )
        )
    return build(pods, groups)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(upstream_and_lone())
def test_upstream_entities_pop_by_priority_then_their_own_pods_age(state: ClusterState) -> None:
    """Never a PodGroup object's age: between two entities of equal priority, the one whose
    earliest pending pod is older pops first."""
    sched = Scheduler(state)
    first_pod = {}
    for key in {sched.unit_key(r) for r in state.pending_refs()}:
        gang = sched.gang(key)
        first_pod[key.key] = (gang.priority, min(p.created for p in gang.pending))
    order = pop_order(state)
    assert sorted(order) == sorted(first_pod)
    for before, after in pairwise(order):
        (p1, t1), (p2, t2) = first_pod[before], first_pod[after]
        assert p1 > p2 or (p1 == p2 and t1 <= t2), (before, after, first_pod)
