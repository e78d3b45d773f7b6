"""Koordinator's pkg/scheduler/plugins/coscheduling/core/preemption_test.go, job-level preemption.

Upstream's cluster: node-1 and node-2 with 32 CPUs each, four 16-CPU pods already running on
them (two per node), and the gang gangA (here a scheduling.sigs.k8s.io PodGroup, minMember 2)
of two 16-CPU pending pods; priorities high 1000 and low 1. Upstream hands its evaluator a gang
context naming gangA and a gangB that has no objects; gangB is left out here. Each case runs
under both preemption strategies. Not ported: "already preempted" and "no pending pods"
(states of Koordinator's per-cycle preemption bookkeeping) and
TestJobPreemptionState_addMoreDetailForStateToMarshal (serialisation of that bookkeeping).
"""

from __future__ import annotations

from tests.conformance.harness import (
    SIGS_API,
    SIGS_LABEL,
    Manifest,
    Scenario,
    coscheduling_group,
    fails_with,
    node,
    pod,
)

SOURCE = "Koordinator `pkg/scheduler/plugins/coscheduling/core/preemption_test.go`"
HIGH, LOW = 1000, 1


def running(name: str, on: str, priority: int | None, *, terminating: bool = False) -> Manifest:
    raw = pod(name, cpu="16", priority=priority, node_name=on)
    if terminating:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        raw["status"]["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    return raw


def pending(
    name: str, priority: int | None, *, nominated: str | None = None, policy: str | None = None
) -> Manifest:
    raw = pod(
        name, cpu="16", priority=priority, labels={SIGS_LABEL: "gangA"}, preemption_policy=policy
    )
    if nominated:
        raw["status"] = {"phase": "Pending", "nominatedNodeName": nominated}
    return raw


def cluster(strategy: list[str], *, unschedulable: bool = False) -> Scenario:
    sc = Scenario(args=strategy)
    sc.create(
        node("node-1", cpu="32", pods="110", unschedulable=unschedulable),
        node("node-2", cpu="32", pods="110", unschedulable=unschedulable),
    )
    sc.create(coscheduling_group("gangA", 2, api=SIGS_API))
    return sc


def existing(priority: int | None, *, first_terminating: bool = False) -> list[Manifest]:
    return [
        running("existing-pod-1", "node-1", priority, terminating=first_terminating),
        running("existing-pod-2", "node-1", priority),
        running("existing-pod-3", "node-2", priority),
        running("existing-pod-4", "node-2", priority),
    ]


def assert_nothing_preempted(sc: Scenario) -> None:
    outcome = sc.settle()
    assert not outcome.preempted, outcome.preempted
    sc.assert_pending("pending-pod-1", "pending-pod-2")


def test_job_not_eligible_due_to_preemption_policy(strategy: list[str]) -> None:
    """preemption_test.go Test_preemptionEvaluatorImpl_preempt: job not eligible due to preemption policy."""
    sc = cluster(strategy)
    sc.create(
        existing(None),
        pending("pending-pod-1", None, policy="Never"),
        pending("pending-pod-2", None),
    )
    assert_nothing_preempted(sc)


def test_job_not_eligible_due_to_terminating_pod(strategy: list[str]) -> None:
    """preemption_test.go Test_preemptionEvaluatorImpl_preempt: job not eligible due to terminating pod (a victim of an earlier preemption is still terminating on the nominated node: nothing more is preempted)."""
    sc = cluster(strategy)
    sc.create(
        existing(LOW, first_terminating=True),
        pending("pending-pod-1", HIGH, nominated="node-1"),
        pending("pending-pod-2", HIGH, nominated="node-1"),
    )
    assert_nothing_preempted(sc)
    assert all(sc.exists(f"existing-pod-{i}") for i in (2, 3, 4))


def test_unschedulable_and_unresolvable(strategy: list[str]) -> None:
    """preemption_test.go Test_preemptionEvaluatorImpl_preempt: unschedulableAndUnResolvable (upstream's fake filter marks both nodes UnschedulableAndUnresolvable; here both nodes are cordoned, which kube-scheduler's NodeUnschedulable filter reports the same way)."""
    sc = cluster(strategy, unschedulable=True)
    sc.create(
        existing(HIGH),
        pending("pending-pod-1", HIGH, nominated="node-1"),
        pending("pending-pod-2", HIGH, nominated="node-1"),
    )
    assert_nothing_preempted(sc)


def test_no_potential_victims(strategy: list[str]) -> None:
    """preemption_test.go Test_preemptionEvaluatorImpl_preempt: no potential victims."""
    sc = cluster(strategy)
    sc.create(
        existing(HIGH),
        pending("pending-pod-1", HIGH, nominated="node-1"),
        pending("pending-pod-2", HIGH, nominated="node-1"),
    )
    assert_nothing_preempted(sc)


@fails_with(
    "kep",
    "deliberate: kep reproduces kube-scheduler, which tries each member's nominated node first "
    "(schedule_one.go evaluateNominatedNode); the fixture nominates the members to node-2 and "
    "node-1, so kep evicts one pod on each (2 victims, as many as Koordinator), where "
    "Koordinator packs both members on one node; mincost (the default) gives Koordinator's",
)
def test_preempt_success(strategy: list[str]) -> None:
    """preemption_test.go Test_preemptionEvaluatorImpl_preempt: preempt success (both members go to one node, whose two low-priority pods are the victims)."""
    sc = cluster(strategy)
    sc.create(
        existing(LOW),
        pending("pending-pod-1", HIGH, nominated="node-2"),
        pending("pending-pod-2", HIGH, nominated="node-1"),
    )
    outcome = sc.settle()
    sc.assert_scheduled("pending-pod-1", "pending-pod-2")
    assert len(outcome.preempted) == 2, outcome.preempted
    assert sc.node_of("pending-pod-1") == sc.node_of("pending-pod-2")


def test_preempt_success_with_one_waiting_pod(strategy: list[str]) -> None:
    """preemption_test.go Test_preemptionEvaluatorImpl_preempt: preempt success with one waiting pod (pending-pod-2 waits at Koordinator's Permit, assumed on node-2; here it is bound there, the state that wait ends in; one victim on node-1 makes room for pending-pod-1: the newer of the two, existing-pod-2; upstream's fixture nominates pending-pod-1 to node-1 as the trigger pod and to node-2 in the pending list: the trigger pod's node-1 is used)."""
    sc = cluster(strategy)
    member = pending("pending-pod-2", HIGH)
    member["spec"]["nodeName"] = "node-2"
    member["status"] = {"phase": "Running"}
    sc.create(
        running("existing-pod-1", "node-1", LOW),
        running("existing-pod-2", "node-1", LOW),
        running("existing-pod-4", "node-2", LOW),
        member,
        pending("pending-pod-1", HIGH, nominated="node-1"),
    )
    outcome = sc.settle()
    sc.assert_scheduled("pending-pod-1")
    assert sc.node_of("pending-pod-1") == "node-1"
    assert outcome.preempted == {"default/existing-pod-2"}, outcome.preempted
