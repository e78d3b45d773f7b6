"""kube-scheduler's test/integration/scheduler/gangscheduling/gang_scheduling_binding_test.go.

Upstream cluster: node-0..node-N (10 GiB memory each) plus ten "test-node-*" nodes that have only
a pod capacity of 32 (the framework test helper adds them); scheduling.k8s.io/v1alpha3 gangs
without a priority. Two facts are adapted, each a slip that would make the upstream case fail on
any scheduler: the nodes' CPU is written `NewScaledQuantity(10, resource.Milli)`, i.e. 10m, which
no 1-CPU pod fits; here they have 10 CPUs. And the preemptor gang's pods have priority 100 while
their PodGroup has none (0); Kubernetes 1.37 refuses such a group (every member must agree with
the group's priority), so the group here has priority 100 too.
"""

from __future__ import annotations

from tests.conformance.harness import Manifest, Scenario, node, pod, upstream_group

SOURCE = (
    "kube-scheduler `test/integration/scheduler/gangscheduling/gang_scheduling_binding_test.go`"
)


def cluster(count: int) -> Scenario:
    sc = Scenario()
    sc.create([node(f"node-{i}", cpu="10", memory="10Gi") for i in range(count)])
    sc.create([node(f"test-node-{i}") for i in range(10)])
    return sc


def member(name: str, group: str, *, cpu: str = "1", priority: int | None = None) -> Manifest:
    return pod(name, cpu=cpu, pod_group=group, priority=priority)


def test_gang_scheduling_with_binding_and_nnn() -> None:
    """gang_scheduling_binding_test.go TestGangSchedulingWithBindingAndNNN: a 2-pod gang stays pending with one pod and binds both once the second arrives."""
    sc = cluster(2)
    sc.create(upstream_group("test-gang", min_count=2), member("gang-pod-1", "test-gang"))
    sc.settle()
    sc.assert_pending("gang-pod-1")
    sc.create(member("gang-pod-2", "test-gang"))
    sc.settle()
    sc.assert_scheduled("gang-pod-1", "gang-pod-2")


def test_gang_scheduling_preemption_with_nnn() -> None:
    """gang_scheduling_binding_test.go TestGangSchedulingPreemptionWithNNN: a gang of two 4-CPU pods preempts 8-CPU priority-1 pods bound to both nodes."""
    sc = cluster(2)
    sc.create(
        pod("victim-1", cpu="8", priority=1, node_name="node-0"),
        pod("victim-2", cpu="8", priority=1, node_name="node-1"),
    )
    sc.create(upstream_group("preemptor-gang", min_count=2, priority=100))
    sc.create(
        member("preemptor-1", "preemptor-gang", cpu="4", priority=100),
        member("preemptor-2", "preemptor-gang", cpu="4", priority=100),
    )
    sc.settle()
    sc.assert_scheduled("preemptor-1", "preemptor-2")
    assert not (sc.exists("victim-1") and sc.exists("victim-2")), "no victim was preempted"


def test_gang_scheduling_multiple_groups_binding_isolation() -> None:
    """gang_scheduling_binding_test.go TestGangSchedulingMultipleGroupsBindingIsolation: two 2-pod gangs created interleaved both bind."""
    sc = cluster(3)
    sc.create(
        upstream_group("gang-group-1", min_count=2), upstream_group("gang-group-2", min_count=2)
    )
    sc.create(
        member("g1p1", "gang-group-1"),
        member("g2p1", "gang-group-2"),
        member("g1p2", "gang-group-1"),
        member("g2p2", "gang-group-2"),
    )
    sc.settle()
    sc.assert_scheduled("g1p1", "g2p1", "g1p2", "g2p2")


def test_gang_scheduling_binding_race_conditions() -> None:
    """gang_scheduling_binding_test.go TestGangSchedulingBindingRaceConditions: three 2-pod gangs whose pods are created concurrently all bind."""
    sc = cluster(5)
    sc.create([upstream_group(f"concurrent-group-{i}", min_count=2) for i in range(3)])
    sc.create([member(f"g{i}p{j}", f"concurrent-group-{i}") for j in range(2) for i in range(3)])
    sc.settle()
    sc.assert_scheduled(*(f"g{i}p{j}" for i in range(3) for j in range(2)))
