"""The queue gauges the operator publishes once a second while gangs wait."""

from __future__ import annotations

from gangsched.config import Config
from gangsched.core.scheduler import Scheduler
from gangsched.edge.operator import Operator
from tests.builders import cluster, gang_pods, group, node, pod
from tests.unit.edge.test_actuator_faults import FakeKube


def test_pending_pods_are_counted_by_their_gangs_queue_state() -> None:
    """scheduler_pending_pods{queue}: a gang's members count in its gang's state (active,
    backoff), a pod with a scheduling gate as gated, whatever its gang; and each PodGroup with
    pending members has its pending-seconds series."""
    gated = pod("gated-0", 1)
    gated.scheduling_gates = ("example.com/hold",)
    pods = [*gang_pods("a", 2), *gang_pods("b", 3), gated, pod("lone", 1)]
    state = cluster([node("n0", 16)], pods, [group("a", 2), group("b", 3)])
    sched = Scheduler(state)
    sched.enqueue_pending(0.0)
    sched.queue.backoff(sched.unit_key(group("b", 3).ref), 0.0)
    operator = Operator(config=Config(), kube=FakeKube())  # type: ignore[arg-type]
    operator.scheduler = sched
    operator._publish_queue()
    sample = operator.metrics.registry.get_sample_value
    counts = {
        queue: sample("scheduler_pending_pods", {"queue": queue})
        for queue in ("active", "backoff", "unschedulable", "gated")
    }
    assert counts == {"active": 3.0, "backoff": 3.0, "unschedulable": 0.0, "gated": 1.0}
    assert sample("gangsched_podgroup_pending_seconds", {"namespace": "default", "podgroup": "b"})
