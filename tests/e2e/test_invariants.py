"""The fault tests' gang check (PodRecorder.violations), fed by hand: which preemptions the
scheduler's log may vouch for. No cluster; the recorder is driven as its informer would."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from .invariants import PodRecorder
from .k8s import JSON, Kube
from .workload import Gang, Workload


def pod(name: str, node: str | None = None) -> JSON:
    return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}, "status": {}}


def recorder() -> PodRecorder:
    workload = Workload(cast(Kube, None), "ns", nodes=["n0"])
    low = Gang("low", size=2, min_member=2, cpu="1", priority_class="low", priority=100)
    high = Gang("high", size=1, min_member=1, cpu="1", priority_class="high", priority=10000)
    for gang in (low, high):
        workload.gangs[gang.name] = gang
        for name in gang.pod_names():
            workload.pod_gang[name] = gang.name
    return PodRecorder(workload, Path("unused"))


LOGGED: dict[str, Any] = {"low-0": "ns/high-0"}


def test_a_gang_seen_short_without_a_victim_is_a_violation() -> None:
    rec = recorder()
    rec.replace([pod("low-1", "n0")])
    assert rec.violations() == [
        "gang low had at most 1 member(s) bound, fewer than minMember 2, and lost none to "
        "preemption"
    ]


def test_a_logged_victim_the_watch_never_showed_excuses_the_gang() -> None:
    """Created, bound and preempted before the recorder's relist after an API server restart:
    only the scheduler's log tells of it."""
    rec = recorder()
    rec.replace([pod("low-1", "n0")])
    assert rec.violations(logged_victims=LOGGED) == []


def test_a_logged_victim_deleted_while_the_watch_was_down_excuses_the_gang() -> None:
    rec = recorder()
    rec.replace([pod("low-0"), pod("low-1")])
    rec.replace([pod("low-1", "n0")])  # a relist: low-0 went while the watch was down
    assert rec.violations(logged_victims=LOGGED) == []


def test_the_log_does_not_overrule_what_the_watch_showed() -> None:
    """A pod the watch shows deleted without a DisruptionTarget condition was not preempted,
    whatever a log line says."""
    rec = recorder()
    rec.replace([pod("low-0"), pod("low-1")])
    rec.upsert(pod("low-1", "n0"))
    rec.delete(pod("low-0"))
    assert len(rec.violations(logged_victims=LOGGED)) == 1
