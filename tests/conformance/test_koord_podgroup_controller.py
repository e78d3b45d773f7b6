"""Koordinator's pkg/scheduler/plugins/coscheduling/controller/podgroup_test.go (Test_Run).

The phase Koordinator's PodGroup controller gives a scheduling.sigs.k8s.io group from its pods:
every pod of the case is bound to node "test" in the phase given, the PodGroup (in namespace
default, scheduleTimeoutSeconds 10) carries the previous phase in its status, and where the case
has a next phase the pods move to it before the phase is read. Not ported: "Group should not
enqueue, created too long" (the controller skips groups created more than 48 hours ago; a
reconciler shortcut, not a phase rule) and TestFillGroupStatusOccupied / TestFillOccupiedObj
(status.occupiedBy is written by `gangsched run` only; simulate does not report it).
"""

from __future__ import annotations

from tests.conformance.harness import SIGS_API, SIGS_LABEL, Scenario, coscheduling_group, node, pod

SOURCE = "Koordinator `pkg/scheduler/plugins/coscheduling/controller/podgroup_test.go`"


def phase_after(
    group: str,
    min_member: int,
    pods: list[str],
    phase: str,
    previous: str,
    *,
    next_phase: str | None = None,
) -> str:
    sc = Scenario()
    sc.create(node("test", cpu="64", memory="64Gi"))
    raw = coscheduling_group(group, min_member, api=SIGS_API, schedule_timeout_seconds=10)
    raw["status"] = {"phase": previous, "scheduled": min_member, "occupiedBy": "test"}
    sc.create(raw)
    sc.create(
        [pod(name, labels={SIGS_LABEL: group}, node_name="test", phase=phase) for name in pods]
    )
    if next_phase is not None:
        for name in pods:
            sc.update(name, status={"phase": next_phase})
    outcome = sc.settle()
    return str(outcome.group(group)["phase"])


def test_group_running() -> None:
    """controller/podgroup_test.go Test_Run: Group running."""
    assert phase_after("pg1", 2, ["pod1", "pod2"], "Running", "Scheduled") == "Running"


def test_group_running_more_than_min_member() -> None:
    """controller/podgroup_test.go Test_Run: Group running, more than min member."""
    assert phase_after("pg11", 2, ["pod11", "pod21"], "Running", "Scheduled") == "Running"


def test_group_failed() -> None:
    """controller/podgroup_test.go Test_Run: Group failed."""
    assert phase_after("pg2", 2, ["pod1", "pod2"], "Failed", "Scheduled") == "Failed"


def test_group_finished() -> None:
    """controller/podgroup_test.go Test_Run: Group finished."""
    assert phase_after("pg3", 2, ["pod1", "pod2"], "Succeeded", "Scheduled") == "Finished"


def test_group_status_from_scheduling_to_scheduled() -> None:
    """controller/podgroup_test.go Test_Run: Group status convert from scheduling to scheduled."""
    assert phase_after("pg4", 2, ["pod1", "pod2"], "Pending", "Scheduling") == "Scheduled"


def test_group_status_from_scheduling_to_succeeded() -> None:
    """controller/podgroup_test.go Test_Run: Group status convert from scheduling to succeed (the first of two cases of this name)."""
    assert (
        phase_after("pg5", 2, ["pod1", "pod2"], "Pending", "Scheduling", next_phase="Succeeded")
        == "Finished"
    )


def test_group_status_from_scheduling_to_succeeded_again() -> None:
    """controller/podgroup_test.go Test_Run: Group status convert from scheduling to succeed (the second case of this name)."""
    assert (
        phase_after("pg6", 2, ["pod1", "pod2"], "Pending", "Scheduling", next_phase="Succeeded")
        == "Finished"
    )


def test_group_status_from_pending_to_prescheduling() -> None:
    """controller/podgroup_test.go Test_Run: Group status convert from pending to prescheduling (its pods succeed, so the expected phase is Finished)."""
    assert (
        phase_after("pg7", 2, ["pod1", "pod2"], "Pending", "Pending", next_phase="Succeeded")
        == "Finished"
    )


def test_group_min_member_more_than_pod_number() -> None:
    """controller/podgroup_test.go Test_Run: Group min member more than Pod number."""
    assert phase_after("pg9", 3, ["pod91", "pod92"], "Pending", "Pending") == "Pending"


def test_group_status_from_running_to_pending() -> None:
    """controller/podgroup_test.go Test_Run: Group status convert from running to pending."""
    assert phase_after("pg10", 2, [], "Pending", "Running") == "Pending"


def test_group_status_from_scheduling_to_scheduled_bug_case() -> None:
    """controller/podgroup_test.go Test_Run: Group status convert from scheduling to scheduled, bugCase."""
    names = ["pod11-1", "pod11-2", "pod11-3", "pod11-4"]
    assert phase_after("pg11", 4, names, "Running", "Scheduling") == "Running"
