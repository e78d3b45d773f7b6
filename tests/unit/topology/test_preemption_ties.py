"""Issue 29 item 5: where two domains cost the same victims, preemption takes the domain
kube-scheduler's placement score ranks first with the lower-priority pods removed (for the
default scoring, the highest allocation), as upstream's TAS preemption does."""

from __future__ import annotations

from gangsched.core.model import Dialect, Node, Pod
from gangsched.core.topology.request import TopologyRequest
from tests.builders import cluster, group, node, pod
from tests.unit.preemption.drive import BOTH, HIGH, LOW, settle

RACK, ZONE = "rack", "zone"
UP = Dialect.UPSTREAM

#: Upstream's nodes: 2 CPUs each, labelled rack and zone.
LAYOUT = [
    ("node1-z1-r1", "rack-1", "zone-1"),
    ("node2-z1-r1", "rack-1", "zone-1"),
    ("node3-z2-r2", "rack-2", "zone-2"),
    ("node4-z2-r2", "rack-2", "zone-2"),
    ("node5-z2-r2", "rack-2", "zone-2"),
    ("node6-z2-r3", "rack-3", "zone-2"),
    ("node7-z2-r3", "rack-3", "zone-2"),
    ("node8-z2-r3", "rack-3", "zone-2"),
    ("node9-z2-r4", "rack-4", "zone-2"),
]


def nodes() -> list[Node]:
    return [node(name, 2, labels={RACK: rack, ZONE: zone}) for name, rack, zone in LAYOUT]


def running() -> list[Pod]:
    """Upstream's bound pods, in its order of creation: two of priority 100, four of 10."""
    placed = [
        ("existing1", "node3-z2-r2", 2, HIGH),
        ("existing2", "node8-z2-r3", 1, HIGH),
        ("low1-z1-r1", "node1-z1-r1", 2, LOW),
        ("low1-z2-r2", "node4-z2-r2", 2, LOW),
        ("low1-z2-r3", "node6-z2-r3", 2, LOW),
        ("low2-z2-r3", "node8-z2-r3", 1, LOW),
    ]
    return [
        pod(name, cpu, memory=None, node_name=on, priority=priority, created=float(i))
        for i, (name, on, cpu, priority) in enumerate(placed)
    ]


@BOTH
def test_flattened_cpg_picks_the_rack_with_the_highest_allocation(strategy: str) -> None:
    """cpg_tas_test.go TestCPGTopologyAwareSchedulingWorkloadAwarePreemption: "preemption
    chooses the rack with the highest allocation percentage among several feasible racks",
    the tree (a rack-constrained root over gangs of 2 and 1) flattened into one PodGroup of
    three constrained to a rack. Racks 1-3 are each freed by one priority-10 victim (a tie
    by every count); with the lower-priority pods removed rack-2 is the fullest after
    placing the group, (2+3)/6 against 3/4 for rack-1 and (1+3)/6 for rack-3: upstream
    evicts low1-z2-r2 and places the group in rack-2."""
    g = group("pg", 3, priority=HIGH, dialect=UP, created=10.0)
    g.topology = TopologyRequest(required=RACK)
    members = [
        pod(f"p{i}", 1, memory=None, group="pg", dialect=UP, priority=HIGH, created=10.0 + i)
        for i in (1, 2, 3)
    ]
    state = cluster(nodes(), [*running(), *members], [g])
    out = settle(state, strategy)
    assert out.evicted == ["low1-z2-r2"]
    assert set(out.bound) == {"p1", "p2", "p3"}
    assert set(out.bound.values()) <= {"node3-z2-r2", "node4-z2-r2", "node5-z2-r2"}


@BOTH
def test_a_tie_goes_to_the_fullest_rack_once_the_lower_priority_pods_are_gone(
    strategy: str,
) -> None:
    """Racks a and b are each freed by one priority-10 pod on one node (the same cost by every
    count). Now, a is the fuller (6 of 8 CPUs against 5), and its victim is the younger; with
    the lower-priority pods removed and the gang placed, b is (3+4)/8 allocated against (2+4)/8
    for a: upstream's choice is b."""
    nodes = [node(f"{r}-{i}", 4, labels={RACK: r}) for r in "ab" for i in range(2)]
    placed = [
        ("b-low", "b-1", 2, LOW),
        ("a-low", "a-0", 4, LOW),
        ("a-high", "a-1", 2, HIGH),
        ("b-high", "b-0", 3, HIGH),
    ]
    running = [
        pod(name, cpu, memory=None, node_name=on, priority=priority, created=float(i))
        for i, (name, on, cpu, priority) in enumerate(placed)
    ]
    g = group("g", 2, priority=HIGH)
    g.topology = TopologyRequest(required=RACK)
    members = [
        pod(f"g-{i}", 2, memory=None, group="g", priority=HIGH, created=10.0 + i) for i in (1, 2)
    ]
    state = cluster(nodes, [*running, *members], [g])
    out = settle(state, strategy)
    assert out.evicted == ["b-low"]
    assert out.bound == {"g-1": "b-1", "g-2": "b-1"}
