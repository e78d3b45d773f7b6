"""scheduler-plugins' test/integration/podgroup_controller_test.go, ported to simulate.

The PodGroup controller's phases for scheduling.x-k8s.io groups (issue 19 item 7): one
PodGroup pg1-1 (minMember 3) and three 50-byte pods already bound to fake-node (300 bytes);
the pods' phases change and the group's phase and counters must follow. The counters are
checked where simulate reports them (running, succeeded, failed); `scheduled` is not, because
upstream's expectation for it (0) only reflects that PostBind does not run in that test.
"""

from __future__ import annotations

from tests.conformance.harness import X_K8S_LABEL, Scenario, coscheduling_group, node, pod

SOURCE = "scheduler-plugins `test/integration/podgroup_controller_test.go`"
NAMES = ["t1-p1-1", "t1-p1-2", "t1-p1-3"]


def cluster(*, labelled: bool = True, phase: str) -> Scenario:
    sc = Scenario()
    sc.create(node("fake-node", memory="300", labels={"node": "fake-node"}))
    sc.create(coscheduling_group("pg1-1", 3, schedule_timeout_seconds=10))
    labels = {X_K8S_LABEL: "pg1-1"} if labelled else None
    sc.create(
        [
            pod(name, memory="50", priority=100, labels=labels, node_name="fake-node", phase=phase)
            for name in NAMES
        ]
    )
    return sc


def set_phase(sc: Scenario, names: list[str], phase: str) -> None:
    for name in names:
        sc.update(name, status={"phase": phase})


def assert_status(sc: Scenario, phase: str, *, running: int, succeeded: int, failed: int) -> None:
    entry = sc.outcomes[-1].group("pg1-1")
    assert entry["phase"] == phase, entry
    counts = {"running": running, "succeeded": succeeded, "failed": failed}
    reported = {key: entry[key] for key in counts if key in entry}
    assert reported == {key: counts[key] for key in reported}, entry


def test_statuses_of_all_pods_change_from_pending_to_running() -> None:
    """podgroup_controller_test.go TestPodGroupController: Statuses of all pods change from pending to running."""
    sc = cluster(phase="Pending")
    sc.settle()
    assert_status(sc, "Scheduling", running=0, succeeded=0, failed=0)
    set_phase(sc, NAMES, "Running")
    sc.settle()
    assert_status(sc, "Running", running=3, succeeded=0, failed=0)


def test_statuses_of_all_pods_change_from_running_to_succeeded() -> None:
    """podgroup_controller_test.go TestPodGroupController: Statuses of all pods change from running to succeeded."""
    sc = cluster(phase="Running")
    sc.settle()
    assert_status(sc, "Running", running=3, succeeded=0, failed=0)
    set_phase(sc, NAMES, "Succeeded")
    sc.settle()
    assert_status(sc, "Finished", running=0, succeeded=3, failed=0)


def test_the_status_of_one_pod_changes_from_running_to_succeeded() -> None:
    """podgroup_controller_test.go TestPodGroupController: The status of one pod changes from running to succeeded."""
    sc = cluster(phase="Running")
    sc.settle()
    assert_status(sc, "Running", running=3, succeeded=0, failed=0)
    set_phase(sc, NAMES[:1], "Succeeded")
    sc.settle()
    assert_status(sc, "Running", running=2, succeeded=1, failed=0)


def test_the_status_of_the_pod_changes_from_running_to_failed() -> None:
    """podgroup_controller_test.go TestPodGroupController: The status of the pod changes from running to failed."""
    sc = cluster(phase="Running")
    sc.settle()
    assert_status(sc, "Running", running=3, succeeded=0, failed=0)
    set_phase(sc, NAMES[:1], "Failed")
    sc.settle()
    assert_status(sc, "Failed", running=2, succeeded=0, failed=1)


def test_the_status_of_no_podgroup_label_pod_changes_from_pending_to_running() -> None:
    """podgroup_controller_test.go TestPodGroupController: The status of no podGroup label pod changes from pending to running."""
    sc = cluster(labelled=False, phase="Pending")
    sc.settle()
    assert_status(sc, "Pending", running=0, succeeded=0, failed=0)
    set_phase(sc, NAMES, "Running")
    sc.settle()
    assert_status(sc, "Pending", running=0, succeeded=0, failed=0)
