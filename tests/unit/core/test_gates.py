"""Scheduling gates and "waiting is not unschedulable" (issue 12 section 1, issue 19 item 5).

A gated pod is never bound, never a preemptor, never marked and never counted toward
minMember; a gang goes once minMember members are bound or ungated. A gang held before the
cycle (members missing, gated, or no PodGroup) gets `NotReadyForScheduling`, never
`Unschedulable`, and only a change to its own members or PodGroup brings it back.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import (
    NOT_READY_FOR_SCHEDULING,
    SCHEDULED,
    WAITING,
    Bind,
    Event,
    Evict,
    GroupOutcome,
    Nominate,
    SetCondition,
)
from gangsched.core.model import Pod
from gangsched.core.phase import count_members
from gangsched.core.preemption import build_preemptor
from gangsched.core.queue import State
from gangsched.core.scheduler import CycleReport, Scheduler
from tests.builders import cluster, gang_pods, group, node, pod

ADMISSION = "kueue.x-k8s.io/admission"


def gated(p: Pod, *gates: str) -> Pod:
    p.scheduling_gates = gates or (ADMISSION,)
    return p


def ungate(state: ClusterState, key: str) -> Pod:
    """What the cache does on the update that removes the last gate: a new model object."""
    new = dataclasses.replace(state.pods[key], scheduling_gates=())
    state.upsert_pod(new)
    return new


def step(sched: Scheduler, now: float = 0.0) -> CycleReport | None:
    sched.enqueue_pending(now)
    return sched.step(now)


def conditions(report: CycleReport) -> list[SetCondition]:
    return [d for d in report.decisions if isinstance(d, SetCondition)]


def test_gang_with_a_gated_member_binds_nothing_and_says_which_gate() -> None:
    pods = gang_pods("job", 2)
    gated(pods[1])
    state = cluster([node("n1")], pods, [group("job", 2)])
    sched = Scheduler(state)
    report = step(sched)
    assert report is not None and report.result == WAITING
    assert not report.bound
    assert report.message == (
        "pod group default/job has 1 of minMember 2 pods bound or ungated; waiting for 1 "
        f"more: 1 member gated: {ADMISSION} (job-1)"
    )
    # Only the ungated member is told, and never with Unschedulable.
    assert [(c.pod, c.reason) for c in conditions(report)] == [
        ("default/job-0", NOT_READY_FOR_SCHEDULING)
    ]
    assert f"1 member gated: {ADMISSION} (job-1)" in conditions(report)[0].message
    (outcome,) = [d for d in report.decisions if isinstance(d, GroupOutcome)]
    assert outcome.result == WAITING
    (event,) = [d for d in report.decisions if isinstance(d, Event)]
    assert (event.regarding_kind, event.type, event.reason) == (
        "PodGroup",
        "Normal",
        NOT_READY_FOR_SCHEDULING,
    )
    assert all(p.node_name is None for p in state.pods.values())


def test_removing_the_gate_requeues_the_gang_and_it_binds_whole() -> None:
    pods = gang_pods("job", 2)
    gated(pods[1])
    state = cluster([node("n1"), node("n2")], pods, [group("job", 2)])
    sched = Scheduler(state)
    assert step(sched).result == WAITING  # type: ignore[union-attr]
    # An unrelated change does not wake a waiting gang...
    sched.queue.cluster_changed(100.0)
    assert sched.step(100.0) is None
    # ...removing the gate does.
    ungate(state, "default/job-1")
    sched.queue.activate(sched.unit_key(state.group_of(state.pods["default/job-1"])))
    report = step(sched, 100.0)
    assert report is not None and report.result == SCHEDULED
    assert sorted(b.pod for b in report.bound) == ["default/job-0", "default/job-1"]


def test_extra_gated_members_do_not_stop_a_gang_and_join_later() -> None:
    pods = gang_pods("job", 4)
    gated(pods[2], ADMISSION, "example.com/quota")
    gated(pods[3])
    state = cluster([node("n1", cpu=8)], pods, [group("job", 2)])
    sched = Scheduler(state)
    report = step(sched)
    assert report is not None and report.result == SCHEDULED
    assert sorted(b.pod for b in report.bound) == ["default/job-0", "default/job-1"]
    assert {c.pod for c in conditions(report)} == set()  # gated members are never marked
    assert step(sched) is None  # nothing to do while they are gated
    ungate(state, "default/job-3")
    report = step(sched)
    assert report is not None and [b.pod for b in report.bound] == ["default/job-3"]
    assert state.pods["default/job-2"].node_name is None


def test_a_gang_whose_members_are_all_gated_is_not_queued() -> None:
    pods = [gated(p) for p in gang_pods("job", 3)]
    state = cluster([node("n1")], pods, [group("job", 2)])
    sched = Scheduler(state)
    assert step(sched) is None
    assert len(sched.queue) == 0


def test_a_gated_lone_pod_is_never_attempted() -> None:
    state = cluster([node("n1")], [gated(pod("solo"))])
    sched = Scheduler(state)
    assert step(sched) is None
    assert state.pods["default/solo"].node_name is None


def test_a_gated_pod_is_never_a_preemptor() -> None:
    running = pod("low", node_name="n1", cpu=4, priority=1)
    high = gated(pod("high", cpu=4, priority=100))
    state = cluster([node("n1", cpu=4)], [running, high])
    sched = Scheduler(state, preemptor=build_preemptor())
    assert step(sched) is None
    assert state.pods["default/low"].node_name == "n1"


def test_gated_members_count_for_nothing_in_the_group_counters() -> None:
    pods = gang_pods("job", 3)
    gated(pods[0])
    counts = count_members(pods)
    assert counts.members == 2


def test_fewer_members_than_min_member_is_not_ready_not_unschedulable() -> None:
    state = cluster([node("n1")], gang_pods("g", 2), [group("g", 3)])
    report = step(Scheduler(state))
    assert report is not None and report.result == WAITING
    assert {c.reason for c in conditions(report)} == {NOT_READY_FOR_SCHEDULING}
    assert all(not isinstance(d, Bind | Evict | Nominate) for d in report.decisions), (
        report.decisions
    )


def test_a_missing_pod_group_is_not_ready_and_each_pod_is_told() -> None:
    state = cluster([node("n1")], [pod("x", group="ghost"), pod("y", group="ghost")])
    sched = Scheduler(state)
    report = step(sched)
    assert report is not None and report.result == WAITING
    assert report.message == "scheduling.sigs.k8s.io PodGroup default/ghost not found"
    assert {c.reason for c in conditions(report)} == {NOT_READY_FOR_SCHEDULING}
    events = [d for d in report.decisions if isinstance(d, Event)]
    assert sorted((e.regarding_kind, e.regarding) for e in events) == [
        ("Pod", "default/x"),
        ("Pod", "default/y"),
    ]
    # The PodGroup arriving (the cache activates the gang) lets it go.
    state.upsert_group(group("ghost", 2))
    sched.queue.activate(sched.unit_key(state.group_of(state.pods["default/x"])))
    report = step(sched, 1.0)
    assert report is not None and report.result == SCHEDULED


def test_waiting_is_not_an_attempt_and_ignores_unrelated_changes() -> None:
    state = cluster([node("n1")], gang_pods("g", 1), [group("g", 2)])
    sched = Scheduler(state)
    report = step(sched)
    assert report is not None and report.result == WAITING
    ref = report.gang
    assert sched.queue.is_waiting(ref) and sched.queue.attempts_of(ref) == 0
    sched.queue.cluster_changed(50.0)
    assert sched.queue.state_of(ref) is State.UNSCHEDULABLE
    # One of its own pods changing wakes it at once.
    sched.queue.activate_waiting(ref)
    assert sched.queue.state_of(ref) is State.ACTIVE and not sched.queue.is_waiting(ref)


def test_activate_waiting_leaves_an_unschedulable_gang_in_its_backoff() -> None:
    state = cluster([node("n1", cpu=1)], gang_pods("g", 2), [group("g", 2)])
    sched = Scheduler(state)
    report = step(sched)
    assert report is not None and report.result != WAITING
    sched.queue.activate_waiting(report.gang)
    assert sched.queue.state_of(report.gang) is State.UNSCHEDULABLE


# -- properties ---------------------------------------------------------------------------------
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def gated_clusters(draw: st.DrawFn) -> ClusterState:
    nodes = [node(f"n{i}", cpu=draw(st.integers(1, 6))) for i in range(draw(st.integers(1, 3)))]
    pods: list[Pod] = []
    groups = []
    created = 0.0
    for g in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 4))
        groups.append(group(f"g{g}", draw(st.integers(1, size))))
        for m in range(size):
            created += 1
            member = pod(
                f"g{g}-{m}",
                group=f"g{g}",
                cpu=draw(st.sampled_from([0.5, 1, 2])),
                created=created,
                priority=draw(st.sampled_from([0, 10])) if m == 0 else 0,
            )
            if draw(st.booleans()):
                gated(member)
            pods.append(member)
    for i in range(draw(st.integers(0, 2))):
        pods.append(pod(f"lone-{i}", cpu=1, created=100.0 + i))
        if draw(st.booleans()):
            gated(pods[-1])
    # Members of one group share a priority (otherwise the group is a scheduler error).
    for p in pods:
        if p.group is not None:
            p.priority = 0
    return cluster(nodes, pods, groups)


def settle(state: ClusterState) -> list[CycleReport]:
    sched = Scheduler(state, preemptor=build_preemptor())
    reports = []
    now = 0.0
    sched.enqueue_pending(now)
    for _ in range(200):
        report = sched.step(now)
        if report is None:
            break
        reports.append(report)
        now += 100.0
        sched.queue.cluster_changed(now)
        sched.enqueue_pending(now)
    return reports


@SETTINGS
@given(gated_clusters())
def test_gated_pods_are_never_bound_marked_or_counted(state: ClusterState) -> None:
    gated_keys = {key for key, p in state.pods.items() if p.is_gated}
    ungated_per_group = {
        ref: sum(1 for p in state.group_members(ref) if not p.is_gated) for ref in state.groups
    }
    reports = settle(state)
    for report in reports:
        for decision in report.decisions:
            if isinstance(decision, Bind | SetCondition | Nominate):
                assert decision.pod not in gated_keys, decision
            if isinstance(decision, SetCondition) and report.result == WAITING:
                assert decision.reason == NOT_READY_FOR_SCHEDULING
    for key in gated_keys:
        assert state.pods[key].node_name is None
    for ref, grp in state.groups.items():
        bound = sum(1 for p in state.group_members(ref) if p.node_name)
        # All or nothing, counting only ungated members: a gang with fewer than minMember
        # ungated members binds nothing.
        assert bound == 0 or bound >= grp.min_member
        if ungated_per_group[ref] < grp.min_member:
            assert bound == 0, (ref, ungated_per_group[ref], grp.min_member)
