"""desired_status: each dialect's PodGroup status as its owner writes it."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.decisions import (
    ERROR,
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING,
    WAITING_ON_PREEMPTION,
    GroupOutcome,
)
from gangsched.core.group_status import desired_status, make_condition, unchanged
from gangsched.core.model import Dialect, GroupRef, Pod, PodGroup
from tests.builders import pod

NOW = "2026-11-23T16:00:00Z"
LATER = "2026-11-23T16:05:00Z"


def upstream(generation: int = 3) -> PodGroup:
    return PodGroup(
        ref=GroupRef(Dialect.UPSTREAM, "default", "g"),
        min_member=2,
        priority=0,
        generation=generation,
    )


def outcome(group: PodGroup, result: str, message: str = "why") -> GroupOutcome:
    return GroupOutcome(group.ref, result, message)


@pytest.mark.parametrize(
    ("result", "status", "reason"),
    [
        (UNSCHEDULABLE, "False", "Unschedulable"),
        (WAITING_ON_PREEMPTION, "False", "Unschedulable"),  # no reason of our own
        (ERROR, "False", "SchedulerError"),
        (SCHEDULED, "True", "Scheduled"),
    ],
)
def test_upstream_condition_is_kube_schedulers(result: str, status: str, reason: str) -> None:
    group = upstream()
    desired = desired_status(group, [], outcome(group, result), {}, now=NOW)
    assert desired == {
        "conditions": [
            {
                "type": "PodGroupInitiallyScheduled",
                "status": status,
                "reason": reason,
                "message": "why",
                "lastTransitionTime": NOW,
                "observedGeneration": 3,
            }
        ]
    }


def test_upstream_writes_no_phase_and_no_old_condition_type() -> None:
    group = upstream()
    desired = desired_status(group, [pod("a")], outcome(group, UNSCHEDULABLE), {}, now=NOW)
    assert desired is not None
    assert set(desired) == {"conditions"}
    assert [c["type"] for c in desired["conditions"]] == ["PodGroupInitiallyScheduled"]


def test_upstream_writes_nothing_before_a_cycle_or_while_members_are_missing() -> None:
    group = upstream()
    assert desired_status(group, [], None, {}, now=NOW) is None
    assert desired_status(group, [], outcome(group, WAITING), {}, now=NOW) is None


def test_upstream_true_never_goes_back_to_false() -> None:
    group = upstream()
    first = desired_status(group, [], outcome(group, SCHEDULED, "2 pod(s) scheduled"), {}, now=NOW)
    assert first is not None
    held = {"conditions": [*first["conditions"], {"type": "Other", "status": "True"}]}
    again = desired_status(group, [], outcome(group, UNSCHEDULABLE), held, now=LATER)
    assert again == first  # re-applied as it is: omitting it from an apply would delete it
    assert unchanged(held, again)


def test_upstream_true_once_min_count_members_are_bound_whatever_the_latest_attempt() -> None:
    """The success's own write can be overtaken: the attempt for an extra member that does not
    fit runs before the True reaches the server, or gangsched restarts in between. With
    minCount members bound the group was scheduled, so that attempt writes True/Scheduled;
    with fewer bound, the attempt's False stands."""
    group = upstream()
    bound = [pod(f"m{i}", node_name="n1", phase="Running") for i in range(2)]
    extra = pod("m2")
    earlier = desired_status(group, [*bound[:1], extra], outcome(group, UNSCHEDULABLE), {}, now=NOW)
    assert earlier is not None
    assert earlier["conditions"][0]["status"] == "False"
    for result in (UNSCHEDULABLE, WAITING_ON_PREEMPTION, ERROR):
        later = desired_status(group, [*bound, extra], outcome(group, result), earlier, now=LATER)
        assert later is not None
        (condition,) = later["conditions"]
        assert (condition["status"], condition["reason"]) == ("True", "Scheduled")
        assert (condition["message"], condition["lastTransitionTime"]) == (
            "2 pod(s) scheduled",
            LATER,
        )
    terminating = [bound[0], pod("m1", node_name="n1", terminating=True), extra]
    still = desired_status(group, terminating, outcome(group, UNSCHEDULABLE), earlier, now=LATER)
    assert still is not None
    assert still["conditions"][0]["status"] == "False"


def test_upstream_false_keeps_its_transition_time_and_follows_the_generation() -> None:
    group = upstream(generation=1)
    first = desired_status(group, [], outcome(group, UNSCHEDULABLE, "a"), {}, now=NOW)
    assert first is not None
    group.generation = 2  # minCount changed
    second = desired_status(group, [], outcome(group, UNSCHEDULABLE, "b"), first, now=LATER)
    assert second is not None
    (condition,) = second["conditions"]
    assert condition["lastTransitionTime"] == NOW
    assert (condition["message"], condition["observedGeneration"]) == ("b", 2)
    assert not unchanged(first, second)
    scheduled = desired_status(group, [], outcome(group, SCHEDULED, "ok"), second, now=LATER)
    assert scheduled is not None
    assert scheduled["conditions"][0]["lastTransitionTime"] == LATER


def test_unchanged_ignores_other_writers_conditions_and_timestamps() -> None:
    mine = make_condition(
        None,
        type_="PodGroupInitiallyScheduled",
        status="False",
        reason="Unschedulable",
        message="m",
        generation=1,
        now=NOW,
    )
    server = {
        "conditions": [{"type": "Theirs", "status": "True"}, {**mine, "lastTransitionTime": LATER}]
    }
    assert unchanged(server, {"conditions": [mine]})
    assert not unchanged(
        {"conditions": [{"type": "Theirs", "status": "True"}]}, {"conditions": [mine]}
    )
    assert not unchanged(None, {"conditions": [mine]})


# -- scheduling.sigs.k8s.io: ours ----------------------------------------------------------
def sigs(min_member: int = 2, timeout: int | None = None) -> PodGroup:
    return PodGroup(
        ref=GroupRef(Dialect.SIGS, "default", "g"),
        min_member=min_member,
        schedule_timeout_seconds=timeout,
        generation=5,
    )


def test_sigs_keeps_our_condition_phase_and_counters() -> None:
    group = sigs()
    members = [pod("a", node_name="n1"), pod("b")]
    members[0].owner = "default/job"
    desired = desired_status(
        group,
        members,
        outcome(group, WAITING_ON_PREEMPTION, "preempting"),
        {},
        now=NOW,
        schedule_start=NOW,
    )
    assert desired is not None
    assert desired["phase"] == "Scheduling"
    assert (desired["scheduled"], desired["running"]) == (1, 1)
    assert desired["occupiedBy"] == "default/job"
    assert desired["scheduleStartTime"] == NOW
    (condition,) = desired["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodGroupScheduled",
        "False",
        "WaitingForPreemption",
    )
    assert condition["observedGeneration"] == 5


def test_sigs_timeout_condition() -> None:
    group = sigs(timeout=30)
    desired = desired_status(
        group,
        [pod("a"), pod("b")],
        outcome(group, UNSCHEDULABLE, "full"),
        {},
        now=NOW,
        timed_out=True,
    )
    assert desired is not None
    types = {c["type"]: (c["status"], c["reason"]) for c in desired["conditions"]}
    assert types == {
        "PodGroupScheduled": ("False", "Unschedulable"),
        "PodGroupScheduleTimeout": ("True", "ScheduleTimeout"),
    }


# -- scheduling.x-k8s.io: scheduler-plugins' controller --------------------------------------
def x_k8s(min_member: int, created: float = 0.0) -> PodGroup:
    return PodGroup(
        ref=GroupRef(Dialect.X_K8S, "default", "g"), min_member=min_member, created=created
    )


def members(*phases: str, bound: bool = True) -> list[Pod]:
    out = []
    for index, phase in enumerate(phases):
        member = pod(f"p{index}", node_name="n1" if bound else None)
        member.phase = phase
        out.append(member)
    return out


def x_status(
    group: PodGroup, pods: list[Pod], previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    desired = desired_status(group, pods, None, previous or {}, now=NOW)
    assert desired is not None
    return desired


# (case name from scheduler-plugins pkg/controllers/podgroup_controller_test.go Test_Run)
@pytest.mark.parametrize(
    ("case", "min_member", "phases", "previous", "expected"),
    [
        ("Group running", 2, ["Running"] * 2, "Scheduling", "Running"),
        ("Group running, more than min member", 2, ["Running"] * 4, "Scheduling", "Running"),
        ("Group failed", 2, ["Failed"] * 2, "Scheduling", "Failed"),
        ("Group finished", 2, ["Succeeded"] * 2, "Scheduling", "Finished"),
        ("pending to prescheduling", 2, ["Pending"] * 2, "Pending", "Scheduling"),
        ("scheduling to finished", 2, ["Succeeded"] * 2, "Scheduling", "Finished"),
        ("Group status keeps pending", 3, ["Running"] * 2, "Pending", "Pending"),
        ("pending to finished", 2, ["Succeeded"] * 2, "Pending", "Finished"),
        ("min member more than Pod number", 3, ["Pending"] * 2, "Pending", "Pending"),
        ("running to pending", 4, ["Pending"] * 2, "Running", "Pending"),
    ],
)
def test_scheduler_plugins_phases(
    case: str, min_member: int, phases: list[str], previous: str, expected: str
) -> None:
    status = x_status(x_k8s(min_member), members(*phases), {"phase": previous})
    assert status["phase"] == expected, case
    assert "conditions" not in status and "scheduled" not in status


def test_scheduler_plugins_integration_counters() -> None:
    # test/integration/podgroup_controller_test.go: (phase, running, succeeded, failed)
    group = x_k8s(3)
    scheduling = x_status(group, members("Pending", "Pending", "Pending"))
    assert scheduling == {"phase": "Scheduling", "running": 0, "succeeded": 0, "failed": 0}
    running = x_status(group, members("Running", "Running", "Running"), scheduling)
    assert running == {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0}
    one_done = x_status(group, members("Succeeded", "Running", "Running"), running)
    assert one_done == {"phase": "Running", "running": 2, "succeeded": 1, "failed": 0}
    one_failed = x_status(group, members("Failed", "Running", "Running"), running)
    assert one_failed == {"phase": "Failed", "running": 2, "succeeded": 0, "failed": 1}
    finished = x_status(group, members("Succeeded", "Succeeded", "Succeeded"), running)
    assert finished == {"phase": "Finished", "running": 0, "succeeded": 3, "failed": 0}
    # Final phases stay, whatever the pods do next.
    assert x_status(group, members("Running"), finished)["phase"] == "Finished"
    assert x_status(group, members("Running", "Running", "Running"), one_failed) == one_failed


def test_scheduler_plugins_pending_does_not_recount() -> None:
    group = x_k8s(3)
    assert x_status(group, members("Running")) == {"phase": "Pending"}
    previous = {"phase": "Pending", "running": 7, "succeeded": 0, "failed": 0}
    assert x_status(group, members("Running"), previous) == previous
    # Leaving Scheduling for Pending recounts once.
    back = x_status(group, members("Running"), {"phase": "Scheduling", "running": 0})
    assert back == {"phase": "Pending", "running": 1, "succeeded": 0, "failed": 0}


def test_scheduler_plugins_scheduling_needs_members_not_bindings() -> None:
    # Enough labelled pods make the group Scheduling even before any is bound.
    assert x_status(x_k8s(2), members("Pending", "Pending", bound=False))["phase"] == "Scheduling"


def test_scheduler_plugins_occupied_by_every_owner_of_the_first_member() -> None:
    pods = members("Pending", "Pending")
    pods[0].owner_refs = ("default/new-occupied-2", "default/new-occupied-1")
    status = x_status(x_k8s(2), pods, {"phase": "Pending", "occupiedBy": "test"})
    assert status["occupiedBy"] == "default/new-occupied-1,default/new-occupied-2"
    # Filled only when leaving Pending; kept afterwards.
    pods[0].owner_refs = ("default/other",)
    assert x_status(x_k8s(2), pods, status)["occupiedBy"] == status["occupiedBy"]


def test_scheduler_plugins_freezes_a_group_started_48_hours_after_creation() -> None:
    # "Group should not enqueue, created too long": nothing running, scheduleStartTime - created
    # beyond 48 h: the controller leaves the group as it is.
    group = x_k8s(2, created=0.0)
    previous = {"phase": "Pending", "scheduleStartTime": "1970-01-04T00:00:00Z", "running": 0}
    assert x_status(group, members("Running", "Running"), previous) == {
        "phase": "Pending",
        "running": 0,
    }
    recent = {**previous, "scheduleStartTime": "1970-01-02T00:00:00Z"}
    assert x_status(group, members("Running", "Running"), recent)["phase"] == "Running"
