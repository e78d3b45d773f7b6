"""Finished (Succeeded or Failed) pods: kube-scheduler never sees them.

Its pod informer filters out terminal pods, so a finished member counts for nothing toward
minMember, is no victim, holds no capacity and is not validated; only the PodGroup status
still counts it as succeeded/failed. Unit tests plus a hypothesis property: whatever the
phases and their transitions, node usage in the snapshot is exactly the sum of the
non-finished bound pods.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, WAITING
from gangsched.core.model import Dialect, GroupRef, Pod
from gangsched.core.phase import count_members
from gangsched.core.preemption import build_preemptor
from gangsched.core.scheduler import Scheduler
from tests.builders import cluster, gang_pods, group, node, pod

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def finished(name: str, phase: str, **kwargs: object) -> Pod:
    return replace(pod(name, **kwargs), phase=phase)  # type: ignore[arg-type]


def run_all(sched: Scheduler) -> list[str]:
    sched.enqueue_pending()
    results = []
    while (report := sched.step(0.0)) is not None:
        results.append(report.result)
    return results


def test_a_succeeded_member_does_not_complete_the_gang() -> None:
    # minMember 2: one member already ran to completion, one is pending. Before the fix the
    # finished pod counted as bound and the pending one was bound alone.
    pods = [
        finished("g-0", "Succeeded", group="g", node_name="n1"),
        pod("g-1", group="g", created=1),
    ]
    state = cluster([node("n1"), node("n2")], pods, [group("g", 2)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == WAITING
    assert report.message == "pod group default/g has 1 of minMember 2 pods; waiting for 1 more"
    assert state.pods["default/g-1"].node_name is None


def test_a_failed_member_does_not_count_either() -> None:
    pods = [
        finished("g-0", "Failed", group="g", node_name="n1"),
        finished("g-1", "Succeeded", group="g", node_name="n1"),
        *gang_pods("g", 4)[2:],
    ]
    state = cluster([node("n1", cpu=2), node("n2", cpu=2)], pods, [group("g", 3)])
    results = run_all(Scheduler(state))
    assert results == [WAITING]
    assert state.pods["default/g-2"].node_name is None


def test_replacements_for_finished_members_are_placed_as_a_gang() -> None:
    pods = [
        finished("g-0", "Succeeded", group="g", node_name="n1"),
        finished("g-1", "Failed", group="g", node_name="n1"),
        *gang_pods("g", 4)[2:],
    ]
    # The finished pods hold nothing: n1's 2 CPUs are free for the two replacements.
    state = cluster([node("n1", cpu=2)], pods, [group("g", 2)])
    assert run_all(Scheduler(state)) == [SCHEDULED]
    assert state.pods["default/g-2"].node_name == "n1"
    assert state.pods["default/g-3"].node_name == "n1"
    # The status still counts what finished.
    counts = count_members(state.group_members(GroupRef(Dialect.SIGS, "default", "g")))
    assert (counts.succeeded, counts.failed) == (1, 1)


def test_finished_pods_hold_no_capacity_and_free_it_when_they_finish() -> None:
    state = cluster(
        [node("n1", cpu=2)],
        [finished("done", "Succeeded", cpu=2, node_name="n1"), pod("busy", cpu=1, node_name="n1")],
    )
    cpu = state.snapshot.columns["cpu"]
    assert state.snapshot.requested[0, cpu] == 1000
    busy = state.pods["default/busy"]
    state.upsert_pod(replace(busy, phase="Failed"))
    assert state.snapshot.requested[0, cpu] == 0
    assert "default/busy" not in state.snapshot.node_pods[0]


def test_finished_pods_are_never_preemption_victims() -> None:
    # The only low-priority pods on the node are finished: nothing to preempt, and the
    # preemptor fits because they hold nothing.
    pods = [
        finished("old", "Succeeded", cpu=2, node_name="n1", priority=1),
        pod("hp", cpu=2, priority=100),
    ]
    state = cluster([node("n1", cpu=2)], pods)
    sched = Scheduler(state, preemptor=build_preemptor())
    assert run_all(sched) == [SCHEDULED]
    assert "default/old" in state.pods


def test_a_finished_member_with_another_priority_is_not_validated() -> None:
    # Upstream validates every member, bound ones included, but never sees finished ones.
    pods = [
        finished("g-0", "Succeeded", group="g", node_name="n1", priority=7),
        *gang_pods("g", 3)[1:],
    ]
    state = cluster([node("n1")], pods, [group("g", 2)])
    assert run_all(Scheduler(state)) == [SCHEDULED]


def test_koordinator_gang_sized_by_its_pods_ignores_finished_ones() -> None:
    ref = GroupRef(Dialect.KOORDINATOR, "default", "k")
    pods = [
        replace(finished("k-0", "Succeeded", node_name="n1"), group=ref),
        replace(pod("k-1", created=1), group=ref),
    ]
    state = ClusterState.build(scheduler_name="gangsched", nodes=[node("n1")], pods=pods)
    implicit = state.pod_group(ref)
    assert implicit is not None and implicit.min_member == 1
    assert run_all(Scheduler(state)) == [SCHEDULED]


# ------------------------------------------------------------------------------ property
@st.composite
def phased_pods(draw: st.DrawFn) -> list[Pod]:
    pods = []
    for i in range(draw(st.integers(0, 8))):
        pods.append(
            finished(
                f"p{i}",
                draw(st.sampled_from(PHASES)),
                cpu=draw(st.sampled_from([0.5, 1, 2])),
                node_name=draw(st.sampled_from(["n0", "n1"])),
            )
        )
    return pods


def usage_of_live_pods(state: ClusterState) -> None:
    cpu = state.snapshot.columns["cpu"]
    expected = np.zeros(len(state.snapshot), dtype=np.int64)
    for p in state.pods.values():
        if p.node_name is not None and p.phase not in ("Succeeded", "Failed"):
            expected[state.snapshot.index[p.node_name]] += p.requests.get("cpu", 0)
    used = state.snapshot.requested[:, cpu]
    assert (used == expected).all(), (used, expected)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phased_pods(), st.lists(st.tuples(st.integers(0, 7), st.sampled_from(PHASES)), max_size=8))
def test_terminal_pods_never_consume_node_capacity(
    pods: list[Pod], transitions: list[tuple[int, str]]
) -> None:
    state = cluster([node("n0", cpu=64), node("n1", cpu=64)], pods)
    usage_of_live_pods(state)
    for index, phase in transitions:
        if index >= len(pods):
            continue
        current = state.pods[pods[index].key]
        state.upsert_pod(replace(current, phase=phase))
        usage_of_live_pods(state)
        finished_here = [
            key
            for node_pods in state.snapshot.node_pods
            for key, p in node_pods.items()
            if p.phase in ("Succeeded", "Failed")
        ]
        assert finished_here == []
