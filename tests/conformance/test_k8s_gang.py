"""kube-scheduler's test/integration/scheduler/gang/gang_test.go, ported to simulate.

Upstream cluster: one node with 4 CPUs, the PodGroup pg (gang, minCount 3, no priority) and pods
of 1 CPU joining it through spec.schedulingGroup; a 2-CPU blocker. No pod sets a priority.
"""

from __future__ import annotations

from tests.conformance.harness import Manifest, Scenario, node, pod, upstream_group

SOURCE = "kube-scheduler `test/integration/scheduler/gang/gang_test.go`"


def cluster() -> Scenario:
    return Scenario().create(node("node", cpu="4"))


def pg() -> Manifest:
    return upstream_group("pg", min_count=3)


def gang(*names: str) -> list[Manifest]:
    return [pod(name, cpu="1", pod_group="pg") for name in names]


def test_gang_schedules_when_podgroup_and_resources_are_available() -> None:
    """gang_test.go TestGangScheduling: gang schedules when PodGroup and resources are available."""
    sc = cluster()
    sc.create(pg(), gang("p1", "p2", "p3"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")


def test_gang_waits_for_quorum_to_start_then_schedules() -> None:
    """gang_test.go TestGangScheduling: gang waits for quorum to start, then schedules."""
    sc = cluster()
    sc.create(pg(), gang("p1", "p2"))
    sc.settle()
    sc.assert_waiting("p1", "p2")
    sc.create(gang("p3"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")


def test_gang_waits_for_pod_group_then_for_resources_then_schedules() -> None:
    """gang_test.go TestGangScheduling: gang waits for pod group, then for resources, then schedules."""
    sc = cluster()
    sc.create(pod("blocker", cpu="2"))
    sc.settle()
    sc.assert_scheduled("blocker")
    sc.create(gang("p1", "p2", "p3"))
    sc.settle()
    sc.assert_waiting("p1", "p2", "p3")
    sc.create(pg())
    sc.settle()
    sc.assert_unschedulable("p1", "p2", "p3")
    sc.delete("blocker")
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")
