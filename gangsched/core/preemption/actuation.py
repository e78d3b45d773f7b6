"""Turn a chosen victim set into the decisions the driver carries out, in order.

Nominations come first so that, by the time the first victim is gone, the freed capacity is
already reserved for the preemptor (lower-priority pods cannot take it in between). Then,
per victim: the DisruptionTarget condition (so the workload's controller knows why), the
graceful eviction, and the Preempted event naming the preemptor.
"""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang, member_order
from gangsched.core.decisions import Decision, Event, Evict, Nominate, SetCondition
from gangsched.core.model import Dialect, Pod
from gangsched.core.preemption.engine import Candidate
from gangsched.core.preemption.victims import victim_priority

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def trigger_pod(gang: Gang, failed: CycleResult) -> Pod:
    """The pod named as the trigger: the member that failed, else the first in cycle order."""
    if failed.failed_pod is not None:
        return failed.failed_pod
    return member_order(gang.pending)[0]


def preemption_message(scheduler_name: str, gang: Gang, trigger: Pod) -> str:
    return (
        f"{scheduler_name}: preempting to accommodate a higher priority pod group, "
        f"preemptor: {gang.key.key}, triggerpod: {trigger.key}"
    )


def build_decisions(
    gang: Gang,
    candidate: Candidate,
    cluster: ClusterState,
    priority: int,
    message: str,
) -> list[Decision]:
    snap = cluster.snapshot
    decisions: list[Decision] = []
    placed: set[str] = set()
    chosen_nodes: set[int] = set()
    for pod, node in candidate.placements:
        placed.add(pod.key)
        chosen_nodes.add(node)
        decisions.append(Nominate(pod.key, pod.uid, snap.nodes[node].name))
    for pod in gang.pending:
        if pod.key not in placed and pod.nominated_node_name is not None:
            decisions.append(Nominate(pod.key, pod.uid, None))  # a stale earlier nomination
    own = {pod.key for pod in gang.pending}
    displaced = sorted(
        (
            res.pod
            for res in snap.nominated.values()
            if res.node in chosen_nodes
            and res.pod.key not in own
            and victim_priority(res.pod, cluster) < priority
        ),
        key=lambda pod: pod.key,
    )
    for pod in displaced:
        decisions.append(Nominate(pod.key, pod.uid, None))
    lone = gang.key.dialect is Dialect.LONE_POD
    related_kind = "Pod" if lone else "PodGroup"
    for victim in sorted(candidate.pods, key=lambda pod: pod.key):
        decisions.append(
            SetCondition(
                victim.key,
                victim.uid,
                DISRUPTION_TARGET,
                "True",
                PREEMPTION_BY_SCHEDULER,
                message,
            )
        )
        decisions.append(Evict(victim.key, victim.uid, gang.key, message))
        decisions.append(
            Event(
                regarding_kind="Pod",
                regarding=victim.key,
                type="Normal",
                reason="Preempted",
                action="Preempting",
                note=message,
                related_kind=related_kind,
                related=gang.key.key,
            )
        )
    return decisions
