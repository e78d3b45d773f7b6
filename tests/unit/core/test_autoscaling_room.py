"""A complete gang no node Karpenter may still add can make fit (issue 32 item 1): its members
get `NodePoolLimitReached` instead of `Unschedulable`, and never when it might fit."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.autoscaling_room import (
    NODE_POOL_LIMIT_REACHED,
    NODEPOOL_LABEL,
    NodePool,
    Requirement,
    node_pool_from_raw,
    pool_limit_shortfall,
)
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SetCondition
from gangsched.core.scheduler import Scheduler
from tests.builders import cluster, gang_pods, group, node, pod, ref

SELECTOR = {"e2e-test": "a"}


def pool(
    name: str = "pool-a",
    *,
    cpu_limit: int | None = None,
    used_cpu: int = 0,
    labels: Mapping[str, str] | None = None,
    requirements: tuple[Requirement, ...] = (),
) -> NodePool:
    return NodePool(
        name=name,
        limits={} if cpu_limit is None else {"cpu": cpu_limit * 1000},
        used={"cpu": used_cpu * 1000},
        labels=dict(SELECTOR if labels is None else labels),
        requirements=requirements,
    )


def state(*pools: NodePool, members: int = 4, min_member: int = 4, cpu: int = 2) -> ClusterState:
    """One 4-CPU node, a gang of `members` pods of `cpu` CPUs each."""
    built = cluster(
        [node("n1", 4, labels=SELECTOR)],
        gang_pods("train", members, cpu=cpu, memory=None, node_selector=SELECTOR),
        [group("train", min_member)],
    )
    built.node_pools.update({p.name: p for p in pools})
    return built


def reasons(built: ClusterState) -> set[str]:
    scheduler = Scheduler(built)
    scheduler.enqueue_pending()
    report = scheduler.step(0.0)
    assert report is not None
    return {
        d.reason
        for d in report.decisions
        if isinstance(d, SetCondition) and d.type == "PodScheduled"
    }


def scheduled_message(built: ClusterState) -> str:
    scheduler = Scheduler(built)
    scheduler.enqueue_pending()
    report = scheduler.step(0.0)
    assert report is not None
    return report.message


def test_a_gang_larger_than_free_plus_the_pools_room_is_not_unschedulable() -> None:
    # 8 CPUs needed, 4 free, the pool may add 2 more.
    built = state(pool(cpu_limit=2))
    assert reasons(built) == {NODE_POOL_LIMIT_REACHED}


def test_the_message_names_the_resource_and_the_pool_at_its_limit() -> None:
    built = state(pool(cpu_limit=4, used_cpu=4))
    built.nodes["n1"].labels[NODEPOOL_LABEL] = "pool-a"
    message = scheduled_message(built)
    assert (
        "the gang needs 8 cpu, more than the 4 free on its nodes and the 0 the NodePools can "
        "still add: pool pool-a at its cpu limit 4"
    ) in message
    message = scheduled_message(state(pool(cpu_limit=2)))
    assert "pool pool-a has 2 of its cpu limit 2 left" in message


def test_a_gang_that_fits_in_free_plus_room_stays_unschedulable() -> None:
    # 8 CPUs needed, 4 free, the pool may add exactly 4: Karpenter must be asked.
    assert reasons(state(pool(cpu_limit=4))) == {"Unschedulable"}


def test_without_node_pools_nothing_changes() -> None:
    assert reasons(state()) == {"Unschedulable"}


def test_a_pool_without_a_limit_on_the_resource_is_unbounded() -> None:
    assert reasons(state(pool(cpu_limit=0), pool("free-for-all"))) == {"Unschedulable"}


def test_the_room_of_every_matching_pool_adds_up() -> None:
    assert reasons(state(pool("a", cpu_limit=2), pool("b", cpu_limit=2))) == {"Unschedulable"}


def test_a_pool_whose_template_contradicts_the_members_selector_gives_no_room() -> None:
    other = pool("other", labels={"e2e-test": "b"})
    assert reasons(state(pool(cpu_limit=0), other)) == {NODE_POOL_LIMIT_REACHED}
    excluded = pool("excluded", labels={}, requirements=(Requirement("e2e-test", "In", ("b",)),))
    assert reasons(state(pool(cpu_limit=0), excluded)) == {NODE_POOL_LIMIT_REACHED}


def test_free_capacity_counts_only_nodes_a_member_may_use() -> None:
    """A big node the members' nodeSelector excludes adds no room; a cordoned one does (a
    member may tolerate the unschedulable taint, and the bound must never hold back a gang
    that could fit)."""
    built = state(pool(cpu_limit=2))
    built.upsert_node(node("elsewhere", 64, labels={"e2e-test": "b"}))
    assert reasons(built) == {NODE_POOL_LIMIT_REACHED}
    built.upsert_node(node("cordoned", 2, labels=SELECTOR, unschedulable=True))
    assert reasons(built) == {"Unschedulable"}
    built = state(pool(cpu_limit=2))
    built.upsert_node(node("spare", 2, labels=SELECTOR))
    assert reasons(built) == {"Unschedulable"}


def test_a_pool_with_no_opinion_on_the_selector_may_launch_for_the_gang() -> None:
    unlabelled = pool("unlabelled", labels={})
    assert reasons(state(pool(cpu_limit=0), unlabelled)) == {"Unschedulable"}


def test_only_the_members_minmember_still_needs_count() -> None:
    # 6 members of 2 CPUs, minMember 4: 8 CPUs needed, 4 free + 4 of room.
    assert reasons(state(pool(cpu_limit=4), members=6, min_member=4)) == {"Unschedulable"}
    assert reasons(state(pool(cpu_limit=2), members=6, min_member=4)) == {NODE_POOL_LIMIT_REACHED}


def test_usage_not_yet_seen_as_nodes_counts_as_room() -> None:
    """status.resources runs ahead of the nodes while NodeClaims launch: the room counted
    is the limit minus the smaller of the two, so a gang whose nodes are on their way is
    not held back."""
    launching = pool(cpu_limit=8, used_cpu=8)
    # 12 CPUs needed, 4 free: the pool's 8 CPUs are not seen as nodes yet, so they count.
    assert reasons(state(launching, cpu=3)) == {"Unschedulable"}
    built = state(launching, cpu=3)
    built.nodes["n1"].labels[NODEPOOL_LABEL] = "pool-a"  # 4 of them seen: 4 + 4 < 12
    assert reasons(built) == {NODE_POOL_LIMIT_REACHED}


def test_a_node_pool_is_read_from_its_json() -> None:
    read = node_pool_from_raw(
        {
            "metadata": {"name": "p"},
            "spec": {
                "limits": {"cpu": "48", "memory": "1Gi"},
                "template": {
                    "metadata": {"labels": {"team": "ml"}},
                    "spec": {"requirements": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                },
            },
            "status": {"resources": {"cpu": "16", "nodes": "1"}},
        }
    )
    assert read.limits == {"cpu": 48_000, "memory": 2**30}
    assert read.used == {"cpu": 16_000, "nodes": 1}
    assert read.labels == {"team": "ml"}
    assert read.requirements == (Requirement("zone", "In", ("a",)),)


@settings(max_examples=200, deadline=None)
@given(
    node_cpus=st.lists(st.integers(0, 16), max_size=4),
    member_cpus=st.lists(st.integers(1, 8), min_size=1, max_size=8),
    rooms=st.lists(st.integers(0, 16), min_size=1, max_size=3),
    slack=st.integers(0, 8),
)
def test_never_withholds_a_gang_that_fits_in_free_plus_room(
    node_cpus: list[int], member_cpus: list[int], rooms: list[int], slack: int
) -> None:
    """Pools whose rooms add up to at least what the gang lacks beyond free capacity: the
    bound never says no; and when they add up to less, it always does."""
    nodes = [node(f"n{i}", cpu, labels=SELECTOR) for i, cpu in enumerate(node_cpus)]
    members = [
        pod(f"m-{i}", cpu, memory=None, group="m", created=float(i), node_selector=SELECTOR)
        for i, cpu in enumerate(member_cpus)
    ]
    built = cluster(nodes, members, [group("m", len(members))])
    gang = Scheduler(built).gang(ref("m"))
    lacking = max(0, sum(member_cpus) - sum(node_cpus))
    extra = max(0, lacking - sum(rooms)) + slack
    enough = [pool(f"p{i}", cpu_limit=r + (extra if i == 0 else 0)) for i, r in enumerate(rooms)]
    assert pool_limit_shortfall(gang, snapshot=built.snapshot, pools=enough, nodes=nodes) is None
    if lacking > 0:
        short = [pool("short", cpu_limit=lacking - 1)]
        found = pool_limit_shortfall(gang, snapshot=built.snapshot, pools=short, nodes=nodes)
        assert found is not None and found.resource == "cpu"
