"""scheduler-plugins' test/integration/coscheduling_test.go, ported to simulate.

scheduling.x-k8s.io/v1alpha1 PodGroups (minMember, scheduleTimeoutSeconds 10, optional
minResources); pods join with the `scheduling.x-k8s.io/pod-group` label. Priorities: mid 100,
high 1000. Upstream runs the cases of one test function one after the other on one cluster,
deleting each case's pods and groups afterwards, so each case here starts from the same empty
node. Upstream checks only that the expected pods get scheduled; the cases here also check what
coscheduling promises for the others: no group is ever bound short of its minMember.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.conformance.harness import X_K8S_LABEL, Manifest, Scenario, coscheduling_group, node, pod

SOURCE = "scheduler-plugins `test/integration/coscheduling_test.go`"
MID, HIGH = 100, 1000


def memory_node() -> Manifest:
    """The node of TestCoschedulingPlugin: 300 bytes of memory, 32 pods, no CPU."""
    return node("fake-node", memory="300", labels={"node": "fake-node"})


def cpu_node(name: str, cpu: str) -> Manifest:
    return node(name, cpu=cpu, labels={"node": name})


def pg(name: str, min_member: int, min_memory: str | None = None) -> Manifest:
    return coscheduling_group(
        name,
        min_member,
        schedule_timeout_seconds=10,
        min_resources={"memory": min_memory} if min_memory else None,
    )


def member(name: str, group: str | None, priority: int = MID, **requests: Any) -> Manifest:
    labels = {X_K8S_LABEL: group} if group else None
    return pod(name, priority=priority, labels=labels, **requests)


def run(
    pods: Iterable[Manifest],
    groups: Iterable[Manifest],
    expected: Iterable[str],
    nodes: Iterable[Manifest],
) -> Scenario:
    """Groups first, then the pods in upstream's order; the expected pods must be scheduled."""
    sc = Scenario()
    sc.create(nodes)
    groups = list(groups)
    sc.create(groups)
    sc.create(pods)
    sc.settle()
    sc.assert_scheduled(*expected)
    for raw in groups:
        name, minimum = raw["metadata"]["name"], raw["spec"]["minMember"]
        placed = [
            key[3]
            for key, member_raw in sc.objects.items()
            if key[1] == "Pod"
            and member_raw["metadata"].get("labels", {}).get(X_K8S_LABEL) == name
            and member_raw["spec"].get("nodeName")
        ]
        assert not placed or len(placed) >= minimum, f"{name} bound short of minMember: {placed}"
    return sc


def gang(prefix: str, group: str, count: int, memory: str, priority: int = MID) -> list[Manifest]:
    return [member(f"{prefix}-{i}", group, priority, memory=memory) for i in range(1, count + 1)]


def test_equal_priority_sequentially_pg1_meets_min_and_pg2_does_not() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: equal priority, sequentially pg1 meet min and pg2 not meet min."""
    run(
        [*gang("t1-p1", "pg1-1", 3, "50"), *gang("t1-p2", "pg1-2", 4, "100")],
        [pg("pg1-1", 3), pg("pg1-2", 4)],
        ["t1-p1-1", "t1-p1-2", "t1-p1-3"],
        [memory_node()],
    )


def interleave(*gangs: list[Manifest]) -> list[Manifest]:
    """Upstream's "not sequentially": one pod of each group in turn."""
    out: list[Manifest] = []
    for i in range(max(len(g) for g in gangs)):
        out += [g[i] for g in gangs if i < len(g)]
    return out


def test_equal_priority_not_sequentially_pg1_meets_min_and_pg2_does_not() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: equal priority, not sequentially pg1 meet min and pg2 not meet min."""
    run(
        interleave(gang("t2-p1", "pg2-1", 3, "50"), gang("t2-p2", "pg2-2", 4, "100")),
        [pg("pg2-1", 3), pg("pg2-2", 4)],
        ["t2-p1-1", "t2-p1-2", "t2-p1-3"],
        [memory_node()],
    )


def test_equal_priority_not_sequentially_pg1_below_min_and_regular_pods() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: equal priority, not sequentially pg1 not meet min and 3 regular pods."""
    pods = [
        member("t3-p1-1", "pg3-1", memory="50"),
        member("t3-p2", None, memory="100"),
        member("t3-p1-2", "pg3-1", memory="50"),
        member("t3-p3", None, memory="100"),
        member("t3-p1-3", "pg3-1", memory="50"),
    ]
    sc = run(pods, [pg("pg3-1", 4)], ["t3-p2", "t3-p3"], [memory_node()])
    sc.assert_pending("t3-p1-1", "t3-p1-2", "t3-p1-3")


def test_different_priority_sequentially_both_meet_min() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: different priority, sequentially pg1 meet min and pg2 meet min."""
    run(
        [*gang("t4-p1", "pg4-1", 3, "100"), *gang("t4-p2", "pg4-2", 3, "50", HIGH)],
        [pg("pg4-1", 3), pg("pg4-2", 3)],
        ["t4-p2-1", "t4-p2-2", "t4-p2-3"],
        [memory_node()],
    )


def test_different_priority_not_sequentially_both_meet_min() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: different priority, not sequentially pg1 meet min and pg2 meet min."""
    run(
        interleave(gang("t5-p1", "pg5-1", 3, "100"), gang("t5-p2", "pg5-2", 3, "50", HIGH)),
        [pg("pg5-1", 3), pg("pg5-2", 3)],
        ["t5-p2-1", "t5-p2-2", "t5-p2-3"],
        [memory_node()],
    )


def test_different_priority_not_sequentially_pg1_meets_min_and_regular_pods() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: different priority, not sequentially pg1 meet min and 3 regular pods."""
    pods = [
        member("t6-p1-1", "pg6-1", memory="50"),
        member("t6-p2", None, HIGH, memory="100"),
        member("t6-p1-2", "pg6-1", memory="50"),
        member("t6-p3", None, HIGH, memory="100"),
        member("t6-p1-3", "pg6-1", memory="50"),
        member("t6-p4", None, HIGH, memory="100"),
    ]
    run(pods, [pg("pg6-1", 3)], ["t6-p2", "t6-p3", "t6-p4"], [memory_node()])


def test_equal_priority_not_sequentially_pg1_meets_min_and_two_groups_do_not() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: equal priority, not sequentially pg1 meet min and p2 p3 not meet min."""
    run(
        interleave(
            gang("t7-p1", "pg7-1", 3, "50"),
            gang("t7-p2", "pg7-2", 4, "100"),
            gang("t7-p3", "pg7-3", 4, "100"),
        ),
        [pg("pg7-1", 3), pg("pg7-2", 4), pg("pg7-3", 4)],
        ["t7-p1-1", "t7-p1-2", "t7-p1-3"],
        [memory_node()],
    )


def test_equal_priority_not_sequentially_two_groups_below_min_with_min_resources() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: equal priority, not sequentially pg1 meet min and p2 p3 not meet min, pgs have min resources."""
    run(
        interleave(
            gang("t8-p1", "pg8-1", 3, "50"),
            gang("t8-p2", "pg8-2", 4, "100"),
            gang("t8-p3", "pg8-3", 4, "100"),
        ),
        [pg("pg8-1", 3, "150"), pg("pg8-2", 4, "400"), pg("pg8-3", 4, "400")],
        ["t8-p1-1", "t8-p1-2", "t8-p1-3"],
        [memory_node()],
    )


def test_equal_priority_not_sequentially_pg2_below_min_with_min_resources() -> None:
    """coscheduling_test.go TestCoschedulingPlugin: equal priority, not sequentially pg1 meet min and pg2 not meet min, pgs have min resources."""
    run(
        interleave(gang("t9-p1", "pg9-1", 3, "50"), gang("t9-p2", "pg9-2", 4, "100")),
        [pg("pg9-1", 3, "150"), pg("pg9-2", 4, "400")],
        ["t9-p1-1", "t9-p1-2", "t9-p1-3"],
        [memory_node()],
    )


def test_pg_cannot_be_scheduled_with_completed_pod() -> None:
    """coscheduling_test.go TestPodCompleted: pg cannot be scheduled with completed pod (upstream's test never creates fake-node-1, which its Succeeded pod names; here the node exists with its 6 CPUs so that the case can fail: five pending members and one finished one do not reach minMember 6)."""
    sc = Scenario()
    sc.create(cpu_node("fake-node-1", "6"), pg("pg1-1", 6))
    sc.create(member("t1-p1-1", "pg1-1", cpu="1"))
    sc.update("t1-p1-1", spec={"nodeName": "fake-node-1"}, status={"phase": "Succeeded"})
    sc.create([member(f"t1-p1-{i}", "pg1-1", cpu="1") for i in range(2, 7)])
    sc.settle()
    sc.assert_pending(*(f"t1-p1-{i}" for i in range(2, 7)))


def test_pg1_cannot_be_scheduled_and_pg2_can() -> None:
    """coscheduling_test.go TestPodgroupBackoff: pg1 can not be scheduled and pg2 can be scheduled."""
    nodes = [cpu_node("fake-node-1", "6"), *(cpu_node(f"fake-node-{i}", "2") for i in (2, 3, 4))]
    sc = run(
        [
            *(member(f"t1-p1-{i}", "pg1-1", cpu="4") for i in range(1, 7)),
            member("t1-p2-1", "pg2-1", cpu="2"),
        ],
        [pg("pg1-1", 6), pg("pg2-1", 1)],
        ["t1-p2-1"],
        nodes,
    )
    sc.assert_pending(*(f"t1-p1-{i}" for i in range(1, 7)))
