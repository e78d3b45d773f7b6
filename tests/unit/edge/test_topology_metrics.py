"""The topology metrics under upstream's names, as the operator records one gang cycle."""

from __future__ import annotations

from gangsched.config import Config
from gangsched.core.decisions import SCHEDULED
from gangsched.core.model import HostPort
from gangsched.core.scheduler import Scheduler
from gangsched.core.topology.request import TopologyRequest
from gangsched.edge.operator import Operator
from tests.builders import cluster, gang_pods, group, node, pod
from tests.unit.edge.test_actuator_faults import FakeKube

RACK = "example.com/rack"


def test_generated_placements_and_evaluations_by_result() -> None:
    """Three racks: r0 too small (bound only, not an evaluation), r1 fails in the cycle (a
    host port), r2 holds the gang. Generated counts all three; evaluations count the two
    the cycle ran on, each with its result and a duration."""
    port = (HostPort("TCP", "", 9000),)
    nodes = [
        node("r0-0", 1, labels={RACK: "r0"}),
        node("r1-0", 4, labels={RACK: "r1"}),
        node("r1-1", 4, labels={RACK: "r1"}),
        node("r2-0", 2, labels={RACK: "r2"}),
        node("r2-1", 2, labels={RACK: "r2"}),
    ]
    holders = [
        pod(f"holder-{i}", 1, memory=None, node_name=f"r1-{i}", host_ports=port) for i in range(2)
    ]
    members = gang_pods("g", 2, memory=None, host_ports=port)
    constrained = group("g", 2)
    constrained.topology = TopologyRequest(required=RACK)
    state = cluster(nodes, [*holders, *members], [constrained])
    sched = Scheduler(state)
    report = sched.schedule(sched.gang(constrained.ref), 0.0)
    assert report.result == SCHEDULED, report.message
    operator = Operator(config=Config(), kube=FakeKube())  # type: ignore[arg-type]
    operator._record(report, 0.01)
    sample = operator.metrics.registry.get_sample_value
    assert sample("scheduler_generated_placements_total") == 3
    assert sample("scheduler_placement_evaluations_total", {"result": "feasible"}) == 1
    assert sample("scheduler_placement_evaluations_total", {"result": "infeasible"}) == 1
    assert sample("scheduler_placement_evaluations_total", {"result": "too-small"}) is None
    assert (
        sample("scheduler_placement_evaluation_duration_seconds_count", {"result": "feasible"}) == 1
    )
