"""Volcano's minTaskMember: a gang goes only when every task has its minimum among the
members bound or placed together; until enough members of a task exist it waits."""

from __future__ import annotations

from gangsched.core.decisions import SCHEDULED, WAITING, Bind
from gangsched.core.model import Dialect, Pod, PodGroup
from gangsched.core.scheduler import CycleReport, Scheduler
from tests.builders import cluster, group, node, pod


def member(name: str, task: str, cpu: int = 1, created: float = 0.0) -> Pod:
    p = pod(name, cpu, group="job", dialect=Dialect.VOLCANO, created=created)
    p.task = task
    return p


def job(min_member: int, tasks: dict[str, int]) -> list[PodGroup]:
    g = group("job", min_member, dialect=Dialect.VOLCANO)
    g.min_task_members = dict(tasks)
    return [g]


def step(sched: Scheduler) -> CycleReport | None:
    sched.enqueue_pending(0.0)
    return sched.step(0.0)


def bound(report: CycleReport) -> set[str]:
    return {d.pod for d in report.decisions if isinstance(d, Bind)}


def test_waits_for_a_task_minimum_even_with_min_member_met() -> None:
    pods = [member("w-0", "worker"), member("w-1", "worker")]
    sched = Scheduler(cluster([node("n1")], pods, job(2, {"ps": 1, "worker": 1})))
    report = step(sched)
    assert report is not None and report.result == WAITING
    assert "minTaskMember[ps] 1" in report.message
    assert bound(report) == set()


def test_places_the_task_minimum_before_optional_members() -> None:
    """minMember 2 fits twice over, but only a placement with the ps member satisfies the
    group: the worker members ordered first (older) must not take the room it needs."""
    pods = [
        member("w-0", "worker", cpu=2, created=0.0),
        member("w-1", "worker", cpu=2, created=1.0),
        member("ps-0", "ps", cpu=2, created=2.0),
    ]
    sched = Scheduler(cluster([node("n1", cpu=4)], pods, job(2, {"ps": 1, "worker": 1})))
    report = step(sched)
    assert report is not None
    assert report.result == SCHEDULED, report.message
    assert "default/ps-0" in bound(report)
    assert len(bound(report)) == 2


def test_unsatisfiable_task_minimum_binds_nothing() -> None:
    pods = [member("w-0", "worker"), member("ps-0", "ps", cpu=8)]
    sched = Scheduler(cluster([node("n1", cpu=4)], pods, job(1, {"ps": 1})))
    report = step(sched)
    assert report is not None
    assert report.result != SCHEDULED
    assert bound(report) == set()
    assert "ps" in report.message
