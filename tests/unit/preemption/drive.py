"""Running the preemption path on a ClusterState built with tests.builders.

`preempt` runs one gang's cycle and, when it fails, the preemptor (as Scheduler does) and
checks the snapshot is left as it was; `settle` drives the scheduler to quiescence carrying
out its decisions at once (victims vanish), so scenarios can assert on the end state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang
from gangsched.core.decisions import Decision, Event, Evict, Nominate, SetCondition
from gangsched.core.gang_placer import GangPlacer
from gangsched.core.model import GroupRef, Pod
from gangsched.core.plugins import build_framework
from gangsched.core.preemption import KEP, MINCOST, build_preemptor
from gangsched.core.scheduler import PreemptionOutcome, Scheduler
from gangsched.core.status import Code
from tests.builders import SCHEDULER, Quantity, pod

BOTH = pytest.mark.parametrize("strategy", [KEP, MINCOST])
#: Priorities of the victims and preemptors in the scenarios.
LOW, MID, HIGH = 10, 50, 100


def preemptor_gang(
    name: str, n: int, cpu: Quantity, *, priority: int = HIGH, start: float = 100.0
) -> list[Pod]:
    """Members name-1 .. name-n of group `name`, pending, created after the victims."""
    return [
        pod(f"{name}-{i + 1}", cpu, priority=priority, group=name, created=start + i)
        for i in range(n)
    ]


def gang_of(state: ClusterState, key: GroupRef) -> Gang:
    return Scheduler(state).gang(state.unit_of(key)[0])


def preempt(
    state: ClusterState, key: GroupRef, strategy: str = "mincost"
) -> tuple[PreemptionOutcome, CycleResult]:
    """Run the cycle for one gang and, when it fails, the preemptor (as Scheduler does)."""
    framework = build_framework()
    gang = gang_of(state, key)
    snap = state.snapshot
    mark = snap.checkpoint()
    result = GangPlacer(framework).place(gang, snap)
    snap.rollback(mark)
    before = _fingerprint(state)
    if result.code is not Code.UNSCHEDULABLE:
        return PreemptionOutcome(False, f"cycle: {result.code.value}"), result
    outcome = build_preemptor(strategy=strategy, scheduler_name=SCHEDULER).preempt(
        gang, result, state, framework
    )
    assert _fingerprint(state) == before, "preemption left the snapshot changed"
    return outcome, result


def _fingerprint(state: ClusterState) -> tuple[object, ...]:
    snap = state.snapshot
    return (
        snap.requested.tobytes(),
        tuple(tuple(sorted(p)) for p in snap.node_pods),
        tuple(sorted((k, r.node) for k, r in snap.nominated.items())),
        len(snap._journal),
    )


def victims(outcome: PreemptionOutcome) -> list[str]:
    return sorted(p.name for p in outcome.victims)


def nominations(outcome: PreemptionOutcome) -> dict[str, str | None]:
    return {d.pod.split("/")[1]: d.node for d in outcome.decisions if isinstance(d, Nominate)}


@dataclass
class Settled:
    evicted: list[str] = field(default_factory=list)
    bound: dict[str, str] = field(default_factory=dict)
    reports: list[object] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)


def settle(state: ClusterState, strategy: str = "mincost", max_steps: int = 50) -> Settled:
    """Drive the scheduler to quiescence, carrying out decisions at once (victims vanish)."""
    sched = Scheduler(state, preemptor=build_preemptor(strategy=strategy, scheduler_name=SCHEDULER))
    out = Settled()
    now = 0.0
    idle = 0
    for _ in range(max_steps):
        sched.enqueue_pending(now)
        report = sched.step(now)
        if report is None:
            idle += 1
            if idle > 3:
                break
            now += 30.0
            sched.queue.cluster_changed(now)
            continue
        idle = 0
        out.reports.append(report)
        out.decisions.extend(report.decisions)
        changed = False
        for decision in report.decisions:
            if isinstance(decision, Evict):
                state.delete_pod(decision.pod)
                out.evicted.append(decision.pod.split("/")[1])
                changed = True
            elif isinstance(decision, Nominate):
                target = state.pods.get(decision.pod)
                if target is not None:
                    state.nominate(target, decision.node)
        for bind in report.bound:
            out.bound[bind.pod.split("/")[1]] = bind.node
        if changed:
            sched.queue.cluster_changed(now)
        now += 1.0
    return out


def disruption_conditions(decisions: Iterable[Decision]) -> list[SetCondition]:
    return [d for d in decisions if isinstance(d, SetCondition) and d.type == "DisruptionTarget"]


def events(decisions: Iterable[Decision]) -> list[Event]:
    return [d for d in decisions if isinstance(d, Event) and d.reason == "Preempted"]


def overcommitted(state: ClusterState) -> list[str]:
    snap = state.snapshot
    return [
        snap.nodes[i].name
        for i in range(len(snap))
        if (snap.requested[i] > snap.allocatable[i]).any()
    ]
