"""kube-scheduler's podgrouppreemption_test.go: TestPodGroupAsyncPreemption and
TestDisablePodGroupPreemption.

Upstream pauses its asynchronous preemption API calls to look at the moment when victims are
still being deleted. Offline, that moment is a state: victims whose deletion is in flight carry a
deletionTimestamp and still hold their resources, and the preemptor that evicted them is pending
with status.nominatedNodeName. "Completing the preemption API calls" deletes those victims.
Nodes have 4 CPUs (upstream's async framework). Cases about a victim blocked in binding, about
queueing hints, and about the node a preemptor falls back to while another binding is blocked
cannot be expressed offline: see tests/conformance/README.md.
"""

from __future__ import annotations

from tests.conformance.harness import Manifest, Scenario, node, pod, upstream_group

SOURCE = "kube-scheduler `test/integration/scheduler/preemption/podgroup/podgrouppreemption_test.go` (TestPodGroupAsyncPreemption, TestDisablePodGroupPreemption)"


def victims(
    count: int, cpu: str, *, terminating: int = 0, prefix: str = "victim"
) -> list[Manifest]:
    """Priority-1 pods on "node"; the first `terminating` are being deleted by a preemption."""
    made = []
    for i in range(count):
        raw = pod(f"{prefix}-{i}", cpu=cpu, priority=1, node_name="node")
        if i < terminating:
            raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        made.append(raw)
    return made


def preemptor(
    name: str, cpu: str, priority: int, group: str, *, nominated: bool = False
) -> Manifest:
    raw = pod(name, cpu=cpu, priority=priority, pod_group=group)
    if nominated:
        raw["status"] = {"phase": "Pending", "nominatedNodeName": "node"}
    return raw


def cluster(strategy: list[str]) -> Scenario:
    return Scenario(args=strategy).create(node("node", cpu="4"))


def complete_preemption(sc: Scenario) -> None:
    """The victims' deletions finish."""
    for key, raw in list(sc.objects.items()):
        if key[1] == "Pod" and raw["metadata"].get("deletionTimestamp"):
            sc.delete(raw["metadata"]["name"])


def test_base_async_preemption_happens(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupAsyncPreemption: base: async preemption happens expectedly."""
    sc = cluster(strategy)
    sc.create(victims(2, "2"))
    sc.create(upstream_group("pg-preemptor", min_count=2, priority=100))
    sc.create(
        preemptor("preemptor-1", "2", 100, "pg-preemptor"),
        preemptor("preemptor-2", "2", 100, "pg-preemptor"),
    )
    outcome = sc.settle()
    assert outcome.preempted == {"default/victim-0", "default/victim-1"}
    sc.assert_scheduled("preemptor-1", "preemptor-2")


def test_base_async_preemption_with_one_victim(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupAsyncPreemption: base async preemption with 1 victim, preemptor gated until preemption API call finishes."""
    sc = cluster(strategy)
    sc.create(victims(1, "1"))
    sc.create(upstream_group("pg-preemptor", min_count=1, priority=100))
    sc.create(preemptor("preemptor", "4", 100, "pg-preemptor"))
    outcome = sc.settle()
    assert outcome.preempted == {"default/victim-0"}
    sc.assert_scheduled("preemptor")


def test_lower_priority_pod_does_not_take_the_place_of_a_preempting_higher_priority_pod(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupAsyncPreemption: Lower priority Pod doesn't take over the place for higher priority Pod that is running the preemption."""
    sc = cluster(strategy)
    sc.create(victims(2, "2", terminating=2))
    sc.create(upstream_group("pg-preemptor", min_count=1, priority=100))
    sc.create(preemptor("preemptor-high-priority", "4", 100, "pg-preemptor", nominated=True))
    sc.settle()
    sc.assert_pending("preemptor-high-priority")
    sc.create(upstream_group("pg-mid-priority", min_count=1, priority=50))
    sc.create(preemptor("pod-mid-priority", "4", 50, "pg-mid-priority"))
    outcome = sc.settle()
    sc.assert_pending("pod-mid-priority", "preemptor-high-priority")
    assert not outcome.preempted, "nothing is left to preempt for the mid-priority pod"
    complete_preemption(sc)
    sc.settle()
    sc.assert_scheduled("preemptor-high-priority")
    sc.assert_pending("pod-mid-priority")


def test_higher_priority_pod_takes_the_place_of_a_preempting_lower_priority_pod(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupAsyncPreemption: Higher priority Pod takes over the place for lower priority Pod that is running the preemption."""
    sc = cluster(strategy)
    sc.create(victims(4, "1", terminating=4))
    sc.create(upstream_group("pg-preemptor", min_count=1, priority=100))
    sc.create(preemptor("preemptor-high-priority", "4", 100, "pg-preemptor", nominated=True))
    sc.create(upstream_group("pg-preemptor-super-high-priority", min_count=1, priority=200))
    sc.create(
        preemptor("preemptor-super-high-priority", "4", 200, "pg-preemptor-super-high-priority")
    )
    sc.settle()
    sc.assert_pending("preemptor-super-high-priority", "preemptor-high-priority")
    complete_preemption(sc)
    sc.settle()
    sc.assert_scheduled("preemptor-super-high-priority")
    sc.assert_pending("preemptor-high-priority")


def test_lower_priority_pod_shares_the_node_a_higher_priority_pod_is_preempting_on(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupAsyncPreemption: Lower priority Pod can select the same place where the higher priority Pod is preempting if the node is big enough."""
    sc = cluster(strategy)
    sc.create(victims(4, "1", terminating=2))
    sc.create(upstream_group("pg-preemptor", min_count=1, priority=100))
    sc.create(preemptor("preemptor-high-priority", "2", 100, "pg-preemptor", nominated=True))
    sc.create(upstream_group("pg-second-preemptor", min_count=1, priority=50))
    sc.create(preemptor("preemptor-mid-priority", "2", 50, "pg-second-preemptor"))
    sc.settle()
    complete_preemption(sc)
    sc.settle()
    sc.assert_scheduled("preemptor-high-priority", "preemptor-mid-priority")
    sc.assert_removed("victim-2", "victim-3")


def test_disable_podgroup_preemption() -> None:
    """podgrouppreemption_test.go TestDisablePodGroupPreemption: with preemption disabled a group preemptor stays unschedulable and is nominated nowhere."""
    sc = Scenario(args=["--preemption", "off"])
    sc.create(node("node1", cpu="500m", memory="500"))
    sc.create(pod("victim-pod", cpu="400m", memory="200", priority=100))
    sc.settle()
    sc.assert_scheduled("victim-pod")
    sc.create(upstream_group("pg-preemptor", min_count=1, priority=300))
    sc.create(
        pod("preemptor-pod", cpu="300m", memory="200", priority=300, pod_group="pg-preemptor")
    )
    outcome = sc.settle()
    sc.assert_unschedulable("preemptor-pod")
    assert outcome.nominated("preemptor-pod") is None
    assert sc.exists("victim-pod")
