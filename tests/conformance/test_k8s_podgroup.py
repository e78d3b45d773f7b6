"""kube-scheduler's test/integration/scheduler/podgroup/podgroup_test.go, ported to simulate.

Upstream cluster: one node with 4 CPUs (zone1); the PodGroups pg1 (gang, minCount 3, priority
100), pg2 (the same, another Workload), a basic pg1, mid-pg (gang, minCount 2, priority 50); pods
of 1 CPU. Steps that wait for the scheduler become `settle()` calls. Ported from the newest
version in the search index (the stepsframework one, v1alpha2 objects), written here as v1beta1;
the topology-aware case follows v1.37.1 (k8s.io/kubernetes module), where a constrained gang
preempts.
Not ported: TestPostFilterInvocationCount (counts calls of a mock PostFilter plugin).
"""

from __future__ import annotations

from tests.conformance.harness import Manifest, Scenario, node, pod, upstream_group, workload

SOURCE = "kube-scheduler `test/integration/scheduler/podgroup/podgroup_test.go`"
ZONE = "topology.kubernetes.io/zone"


def cluster() -> Scenario:
    sc = Scenario()
    sc.create(
        node("node", cpu="4", labels={ZONE: "zone1"}),
        workload("workload", ("t1", 3), ("t2", None), ("t-mid", 2)),
        workload("other-workload", ("t", 3)),
    )
    return sc


def gang_pg() -> Manifest:
    return upstream_group("pg1", min_count=3, priority=100, template=("workload", "t1"))


def other_gang_pg() -> Manifest:
    return upstream_group("pg2", min_count=3, priority=100, template=("other-workload", "t"))


def basic_pg() -> Manifest:
    # The stored upstream version (v1alpha2) sets no priority here; 1.37 validates that every
    # member agrees with its group's priority, so the basic group takes its pods' 100.
    return upstream_group("pg1", priority=100, template=("workload", "t2"))


def mid_pg() -> Manifest:
    return upstream_group("mid-pg", min_count=2, priority=50, template=("workload", "t-mid"))


def member(name: str, group: str = "pg1", priority: int = 100) -> Manifest:
    return pod(name, cpu="1", pod_group=group, priority=priority)


def members(*names: str, group: str = "pg1", priority: int = 100) -> list[Manifest]:
    return [member(name, group, priority) for name in names]


def lone(name: str, cpu: str, priority: int) -> Manifest:
    return pod(name, cpu=cpu, priority=priority)


def test_gang_schedules_when_pod_group_and_resources_are_available() -> None:
    """podgroup_test.go TestPodGroupScheduling: gang schedules when pod group and resources are available."""
    sc = cluster()
    sc.create(gang_pg(), members("p1", "p2", "p3"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")
    sc.assert_group_scheduled("pg1")


def test_gang_waits_for_quorum_to_start_then_schedules() -> None:
    """podgroup_test.go TestPodGroupScheduling: gang waits for quorum to start, then schedules."""
    sc = cluster()
    sc.create(gang_pg(), members("p1", "p2"))
    sc.settle()
    sc.assert_waiting("p1", "p2")
    sc.create(member("p3"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")


def test_gang_waits_for_pod_group_then_for_resources_then_schedules() -> None:
    """podgroup_test.go TestPodGroupScheduling: gang waits for pod group, then for resources, then schedules."""
    sc = cluster()
    sc.create(lone("blocker", "2", 100))
    sc.settle()
    sc.assert_scheduled("blocker")
    sc.create(members("p1", "p2", "p3"))
    sc.settle()
    sc.assert_waiting("p1", "p2", "p3")
    sc.create(gang_pg())
    sc.settle()
    sc.assert_unschedulable("p1", "p2", "p3")
    sc.assert_group_unschedulable("pg1")
    sc.delete("blocker")
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")
    sc.assert_group_scheduled("pg1")


def test_min_count_scheduled_one_pod_unschedulable_until_resources_are_released() -> None:
    """podgroup_test.go TestPodGroupScheduling: minCount is scheduled, but one pod from a gang remain unschedulable until the blocked resources are released."""
    sc = cluster()
    sc.create(lone("small-blocker", "1", 100))
    sc.settle()
    sc.assert_scheduled("small-blocker")
    sc.create(members("p1", "p2", "p3", "p4"))
    sc.create(gang_pg())
    sc.settle()
    placed = [name for name in ("p1", "p2", "p3", "p4") if sc.node_of(name)]
    left = sorted({"p1", "p2", "p3", "p4"} - set(placed))
    assert len(placed) == 3
    sc.assert_unschedulable(*left)
    sc.delete("small-blocker")
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")


def test_two_gangs_competing_do_not_deadlock_reversed_order() -> None:
    """podgroup_test.go TestPodGroupScheduling: two gangs competing for the same resources shouldn't deadlock, reversed order."""
    sc = cluster()
    sc.create(gang_pg(), other_gang_pg())
    sc.create(
        member("other-p3", "pg2"),
        member("p3"),
        member("other-p2", "pg2"),
        member("p2"),
        member("other-p1", "pg2"),
        member("p1"),
    )
    sc.settle()
    sc.assert_scheduled("other-p1", "other-p2", "other-p3")
    sc.assert_unschedulable("p1", "p2", "p3")


def test_two_gangs_competing_do_not_deadlock() -> None:
    """podgroup_test.go TestPodGroupScheduling: two gangs competing for the same resources shouldn't deadlock."""
    sc = cluster()
    sc.create(gang_pg(), other_gang_pg())
    sc.create(
        member("p1"),
        member("other-p1", "pg2"),
        member("p2"),
        member("other-p2", "pg2"),
        member("p3"),
        member("other-p3", "pg2"),
    )
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")
    sc.assert_unschedulable("other-p1", "other-p2", "other-p3")


def test_gang_schedules_with_preemption() -> None:
    """podgroup_test.go TestPodGroupScheduling: gang schedules with preemption."""
    sc = cluster()
    sc.create(lone("low-priority-blocker", "2", 10))
    sc.settle()
    sc.assert_scheduled("low-priority-blocker")
    sc.create(gang_pg(), members("p1", "p2", "p3", "p4"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_group_scheduled("pg1")
    sc.assert_removed("low-priority-blocker")


def test_basic_group_schedules_without_gang_enforcement() -> None:
    """podgroup_test.go TestPodGroupScheduling: basic group schedules when pod group and resources are available, without gang enforcement."""
    sc = cluster()
    sc.create(basic_pg(), member("p1"))
    sc.settle()
    sc.assert_scheduled("p1")
    sc.create(members("p2", "p3"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")


def test_basic_group_waits_for_pod_group_part_waits_for_resources_then_schedules() -> None:
    """podgroup_test.go TestPodGroupScheduling: basic group waits for pod group, part of it waits for resources, then schedules."""
    sc = cluster()
    sc.create(lone("blocker", "2", 100))
    sc.settle()
    sc.assert_scheduled("blocker")
    sc.create(members("p1", "p2", "p3"))
    sc.settle()
    sc.assert_waiting("p1", "p2", "p3")
    sc.create(basic_pg())
    sc.settle()
    placed = [name for name in ("p1", "p2", "p3") if sc.node_of(name)]
    assert len(placed) == 2
    sc.assert_unschedulable(*sorted({"p1", "p2", "p3"} - set(placed)))
    sc.delete("blocker")
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")


def test_basic_group_schedules_with_preemption() -> None:
    """podgroup_test.go TestPodGroupScheduling: basic group schedules with preemption."""
    sc = cluster()
    sc.create(lone("low-priority-blocker", "2", 10))
    sc.settle()
    sc.create(basic_pg(), members("p1", "p2", "p3", "p4"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_removed("low-priority-blocker")


def test_basic_group_schedules_with_workload_aware_preemption() -> None:
    """podgroup_test.go TestPodGroupScheduling: basic group schedules with workload-aware preemption."""
    sc = cluster()
    sc.args = ["--preemption", "kep"]
    sc.create(lone("low-priority-blocker", "2", 10))
    sc.settle()
    sc.assert_scheduled("low-priority-blocker")
    sc.create(basic_pg(), members("p1", "p2", "p3", "p4"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_removed("low-priority-blocker")


def test_gang_schedules_with_workload_aware_preemption() -> None:
    """podgroup_test.go TestPodGroupScheduling: gang schedules with workload-aware preemption."""
    sc = cluster()
    sc.args = ["--preemption", "kep"]
    sc.create([lone(f"low-p{i}", "1", 10) for i in range(1, 5)])
    sc.settle()
    sc.assert_scheduled("low-p1", "low-p2", "low-p3", "low-p4")
    sc.create(gang_pg(), members("p1", "p2", "p3", "p4"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_removed("low-p1", "low-p2", "low-p3", "low-p4")


def test_gang_schedules_with_partial_workload_aware_preemption() -> None:
    """podgroup_test.go TestPodGroupScheduling: gang schedules with partial workload-aware preemption."""
    sc = cluster()
    sc.args = ["--preemption", "kep"]
    sc.create(
        lone("very-low-p1", "1", 5),
        lone("very-low-p2", "1", 5),
        lone("low-p1", "1", 10),
        lone("low-p2", "1", 10),
    )
    sc.settle()
    sc.assert_scheduled("very-low-p1", "very-low-p2", "low-p1", "low-p2")
    sc.create(mid_pg(), members("mid-p1", "mid-p2", group="mid-pg", priority=50))
    sc.settle()
    sc.assert_scheduled("mid-p1", "mid-p2", "low-p1", "low-p2")
    sc.assert_removed("very-low-p1", "very-low-p2")


def _tas_case() -> Scenario:
    sc = cluster()
    sc.create(
        lone("very-low-p1", "1", 5),
        lone("very-low-p2", "1", 5),
        lone("low-p1", "1", 10),
        lone("low-p2", "1", 10),
    )
    sc.settle()
    sc.assert_scheduled("very-low-p1", "very-low-p2", "low-p1", "low-p2")
    group = mid_pg()
    group["spec"]["schedulingConstraints"] = {"topology": [{"key": ZONE}]}
    sc.create(group, members("mid-p1", "mid-p2", group="mid-pg", priority=50))
    return sc


def test_tas_gang_with_constraint_uses_workload_preemption() -> None:
    """podgroup_test.go TestPodGroupScheduling (v1.37.1): tas gang with constraint uses workload preemption (1.36's two cases, "does not use pod by pod / workload preemption", were replaced by this one when TAS joined workload-aware preemption, k/k#140683)."""
    sc = _tas_case()
    sc.settle()
    sc.assert_scheduled("mid-p1", "mid-p2", "low-p1", "low-p2")
    sc.assert_removed("very-low-p1", "very-low-p2")
    assert sc.node_of("mid-p1") == sc.node_of("mid-p2") == "node", "one zone: the only node"


def test_workload_aware_preemption_invocation() -> None:
    """podgroup_test.go TestWorkloadAwarePreemptionInvocation: a gang in disruption mode PodGroup preempts as a pod group."""
    sc = Scenario(args=["--preemption", "kep"])
    sc.create(
        node("node", cpu="4"),
        workload("workload", ("t1", 3)),
        [lone(f"low-{i}", "1", 10) for i in range(1, 5)],
    )
    sc.settle()
    sc.assert_scheduled("low-1", "low-2", "low-3", "low-4")
    group = upstream_group(
        "pg1", min_count=3, priority=100, template=("workload", "t1"), disruption_mode="all"
    )
    sc.create(group, [member(f"high-{i}") for i in range(1, 4)])
    outcome = sc.settle()
    sc.assert_scheduled("high-1", "high-2", "high-3")
    assert outcome.preempted, "no victim preempted"
    for key in outcome.preempted:
        message = outcome.raw["preempted"][key]
        assert "pod group" in message and "default/pg1" in message, message
