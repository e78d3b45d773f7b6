"""A tree whose minimum was met stays initially scheduled (issue 29 item 6).

A gang root (minGroupCount 2) over three PodGroups of minCount 2, one of which never fits:
the first cycle binds the two that fit, and the requeued attempt for the third finds the root
satisfied by its bound members and nothing more to place. That attempt must not report the
root and the two bound children as unschedulable: the live status writer only sees the latest
outcome of each level, and when it had not yet written the success (or a restarted gangsched
finds an earlier False on the objects), upstream's rule -- False until the first success,
then True/Scheduled for good -- was broken. The child that never fits keeps its own
False/Unschedulable.
"""

from __future__ import annotations

from typing import Any

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.model import composite_ref
from gangsched.core.composite.status import COMPOSITE_CONDITION, composite_status
from gangsched.core.decisions import (
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING_ON_PREEMPTION,
    GroupOutcome,
    SetCondition,
)
from gangsched.core.group_status import UPSTREAM_CONDITION, desired_status, find_condition
from gangsched.core.model import Dialect, GroupRef, Pod
from gangsched.core.preemption import KEP, build_preemptor
from gangsched.core.scheduler import CycleReport, Scheduler
from tests.builders import SCHEDULER, node, pod
from tests.unit.composite.trees import cpg, leaf, tree_cluster

UP = Dialect.UPSTREAM
ROOT = composite_ref("default", "root")
FIRST, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:10:00Z"


def members(group: str, count: int, cpu: float = 1, start: float = 0.0, **kw: Any) -> list[Pod]:
    return [
        pod(f"{group}-{i}", group=group, dialect=UP, cpu=cpu, created=start + i, **kw)
        for i in range(count)
    ]


def extra_child_tree(*extra: Pod, topology_key: str | None = None) -> ClusterState:
    """root (gang of 2) over a, b, c (minCount 2 each); c's pods fit no node, ever."""
    root = cpg("root", 2)
    root.topology_key = topology_key
    return tree_cluster(
        [node("n1", cpu=4, labels={"zone": "z1"})],
        [
            *members("a", 2),
            *members("b", 2, start=10),
            *members("c", 2, cpu=8, start=20),
            *extra,
        ],
        [leaf(name, 2, parent="root", created=i) for i, name in enumerate("abc")],
        [root],
    )


def outcomes(report: CycleReport) -> dict[str, GroupOutcome]:
    return {d.group.name: d for d in report.decisions if isinstance(d, GroupOutcome)}


def pod_conditions(report: CycleReport) -> dict[str, SetCondition]:
    return {
        d.pod: d
        for d in report.decisions
        if isinstance(d, SetCondition) and d.type == "PodScheduled"
    }


def first_two_cycles(sched: Scheduler) -> tuple[CycleReport, CycleReport]:
    sched.enqueue_pending()
    first = sched.step(0.0)
    assert first is not None and first.result == SCHEDULED, first and first.message
    # The children that did not fit go straight back to the queue, as upstream's do.
    second = sched.step(0.0)
    assert second is not None
    return first, second


def condition_of(state: ClusterState, group: GroupOutcome, previous: dict[str, Any]) -> Any:
    """The condition the status writer would apply from this outcome alone."""
    ref = group.group
    if ref.dialect is Dialect.COMPOSITE:
        status = composite_status(state.composites[ref], group, previous, now=LATER)
        return find_condition(status or {}, COMPOSITE_CONDITION)
    status = desired_status(state.groups[ref], state.group_members(ref), group, previous, now=LATER)
    return find_condition(status or {}, UPSTREAM_CONDITION)


def state_of(condition: Any) -> tuple[str, str]:
    return condition["status"], condition["reason"]


def test_the_attempt_for_the_extra_child_keeps_the_tree_scheduled() -> None:
    state = extra_child_tree()
    first, second = first_two_cycles(Scheduler(state))
    bound = {p.name for p in state.pods.values() if p.node_name}
    assert bound == {"a-0", "a-1", "b-0", "b-1"}
    assert second.result == UNSCHEDULABLE  # nothing more fits: the cycle itself failed
    assert "none of the 2 pending pod(s) fits" in second.message
    before, after = outcomes(first), outcomes(second)
    for name in ("root", "a", "b"):
        # Same verdict, same words as the success: the status writer has nothing to rewrite.
        assert after[name].result == SCHEDULED, after[name]
        assert after[name].message == before[name].message
    assert after["root"].message == "2 of 3 children scheduled (gang (minGroupCount 2))"
    assert after["c"].result == UNSCHEDULABLE
    assert "Insufficient cpu" in after["c"].message, after["c"]
    assert "parent composite pod group" not in after["c"].message
    # c's pods say why they are not placed, in their own words.
    conditions = pod_conditions(second)
    assert "Insufficient cpu" in conditions["default/c-0"].message


def test_status_from_the_later_attempt_alone_is_true_and_c_stays_false() -> None:
    """The live writer may never see the success's outcome (the requeued attempt replaced it
    before it wrote), and a restarted gangsched may find an earlier attempt's False."""
    state = extra_child_tree()
    _, second = first_two_cycles(Scheduler(state))
    earlier_false = {
        "type": "",
        "status": "False",
        "reason": "Unschedulable",
        "message": "minGroupCount (2) cannot be satisfied",
        "lastTransitionTime": FIRST,
    }
    for name, outcome in outcomes(second).items():
        kind = COMPOSITE_CONDITION if name == "root" else UPSTREAM_CONDITION
        for previous in ({}, {"conditions": [{**earlier_false, "type": kind}]}):
            found = condition_of(state, outcome, previous)
            if name == "c":
                assert state_of(found) == ("False", "Unschedulable"), found
                assert "Insufficient cpu" in found["message"]
            else:
                assert state_of(found) == ("True", "Scheduled"), (name, previous, found)
                assert found["lastTransitionTime"] == LATER


def test_true_on_the_objects_is_kept_by_every_later_attempt() -> None:
    """What a restarted gangsched sees: the objects already say True/Scheduled, and the
    attempts for the extra child change nothing on them (same time, same message)."""
    state = extra_child_tree()
    sched = Scheduler(state)
    first, second = first_two_cycles(sched)
    held: dict[GroupRef, Any] = {}
    for outcome in outcomes(first).values():
        written = condition_of(state, outcome, {})
        held[outcome.group] = {"conditions": [{**written, "lastTransitionTime": FIRST}]}
    restarted = Scheduler(state)  # a new process: same objects, same bound pods
    restarted.enqueue_pending()
    for report in (second, restarted.step(1000.0)):
        assert report is not None and report.result == UNSCHEDULABLE
        for name, outcome in outcomes(report).items():
            previous = held[outcome.group]["conditions"][0]
            found = condition_of(state, outcome, {"conditions": [previous]})
            if name == "c":  # still False since the first attempt; its message may grow
                assert state_of(found) == ("False", "Unschedulable")
                assert found["lastTransitionTime"] == FIRST
                continue
            assert found == previous, name


def test_the_extra_child_placed_later_is_counted_on_the_root() -> None:
    state = extra_child_tree()
    sched = Scheduler(state)
    first_two_cycles(sched)
    state.upsert_node(node("n2", cpu=16, labels={"zone": "z1"}))
    sched.queue.cluster_changed(100.0)
    third = sched.step(100.0)
    assert third is not None and third.result == SCHEDULED, third and third.message
    after = outcomes(third)
    assert {name: o.result for name, o in after.items()} == dict.fromkeys("abc", SCHEDULED) | {
        "root": SCHEDULED
    }
    assert after["root"].message == "3 of 3 children scheduled (gang (minGroupCount 2))"
    assert after["c"].message == "2 pod(s) scheduled"


def test_an_extra_member_of_a_bound_child_is_unschedulable_not_the_child() -> None:
    """a has a third member beyond its minCount that fits nowhere: its pod is Unschedulable,
    a itself stays scheduled (its minCount is met)."""
    state = extra_child_tree(pod("a-2", group="a", dialect=UP, cpu=8, created=5))
    first, second = first_two_cycles(Scheduler(state))
    assert outcomes(first)["a"].result == SCHEDULED
    after = outcomes(second)
    assert {name: after[name].result for name in ("root", "a", "b")} == dict.fromkeys(
        ("root", "a", "b"), SCHEDULED
    )
    conditions = pod_conditions(second)
    assert conditions["default/a-2"].reason == "Unschedulable"
    assert "Insufficient cpu" in conditions["default/a-2"].message


def test_preempting_for_the_extra_child_keeps_the_tree_scheduled() -> None:
    """The requeued attempt preempts a lower-priority pod for c: only c waits on it."""
    low = pod("low", cpu=1, priority=0, node_name="n1", created=-1)
    state = tree_cluster(
        [node("n1", cpu=6)],
        [
            low,
            *members("a", 2, priority=100),
            *members("b", 2, start=10, priority=100),
            *members("c", 2, start=20, priority=100),
        ],
        [leaf(name, 2, parent="root", created=i, priority=100) for i, name in enumerate("abc")],
        [cpg("root", 2, priority=100)],
    )
    sched = Scheduler(state, preemptor=build_preemptor(strategy=KEP, scheduler_name=SCHEDULER))
    _, second = first_two_cycles(sched)
    assert second.result == WAITING_ON_PREEMPTION, second.message
    after = outcomes(second)
    assert {name: after[name].result for name in ("root", "a", "b")} == dict.fromkeys(
        ("root", "a", "b"), SCHEDULED
    )
    assert after["c"].result == WAITING_ON_PREEMPTION


def test_a_root_confined_to_a_domain_keeps_the_tree_scheduled() -> None:
    state = extra_child_tree(topology_key="zone")
    first, second = first_two_cycles(Scheduler(state))
    assert second.result == UNSCHEDULABLE, second.message
    before, after = outcomes(first), outcomes(second)
    for name in ("root", "a", "b"):
        assert after[name].result == SCHEDULED, after[name]
    assert after["c"].result == UNSCHEDULABLE
    assert before["c"].result == UNSCHEDULABLE
