"""kube-scheduler's test/integration/scheduler/podgroup/topology_aware_scheduling/cpg_tas_test.go
(TestCPGTopologyAwareSchedulingWorkloadAwarePreemption), every case.

The trees of test_k8s_cpg_tas.py where the domain the tree needs is held by pods of priority 10:
the tree (priority 100) preempts at the root, in one domain per constrained level, and only the
victims of the domain it lands in go. Nodes of 2 CPUs labelled `rack` and `zone` (`block` too in
one case); pods of 1 CPU. Each case runs under both preemption strategies.
"""

from __future__ import annotations

from tests.conformance.harness import Manifest, Scenario, pod
from tests.conformance.test_k8s_cpg_tas import (
    assigned,
    child,
    labelled,
    labels_of,
    member,
    root,
    sub,
    tas_node,
)

SOURCE = (
    "kube-scheduler `test/integration/scheduler/podgroup/topology_aware_scheduling/"
    "cpg_tas_test.go` (TestCPGTopologyAwareSchedulingWorkloadAwarePreemption)"
)


def low(name: str, on: str, cpu: str) -> Manifest:
    """A bound pod of priority 10, below the trees' 100: what preemption may take."""
    return pod(name, cpu=cpu, priority=10, node_name=on)


def basic_child(name: str, parent: str = "cpg-root") -> Manifest:
    return child(name, None, parent=parent)


def four_nodes_two_racks() -> list[Manifest]:
    return [
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
    ]


def settled(strategy: list[str], *steps: list[Manifest]) -> Scenario:
    """Each step created then settled in turn (upstream waits for the bound pods of a step
    before the next)."""
    sc = Scenario(args=strategy)
    for step in steps:
        sc.create(step)
        sc.settle()
    return sc


def rack_one_after_preemption(strategy: list[str]) -> Scenario:
    """The tree of two gangs of two preempts both low pods of rack-1 (rack-2 keeps 2 CPUs of
    priority 100)."""
    sc = settled(
        strategy,
        [
            *four_nodes_two_racks(),
            low("low1-z1-r1", "node1-z1-r1", "2"),
            low("low2-z1-r1", "node2-z1-r1", "2"),
            assigned("existing", "node4-z1-r2", "2"),
        ],
        [
            root("rack"),
            child("pg1", 2),
            child("pg2", 2),
            member("p1", "pg1"),
            member("p2", "pg1"),
            member("p3", "pg2"),
            member("p4", "pg2"),
        ],
    )
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_removed("low1-z1-r1", "low2-z1-r1")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3", "p4")} <= {"node1-z1-r1", "node2-z1-r1"}
    return sc


def test_preempts_on_one_rack(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; schedules on a
    single rack after preempting lower priority pods."""
    sc = rack_one_after_preemption(strategy)
    sc.assert_scheduled("existing")


def test_preempts_on_one_rack_then_a_new_member_cannot_leave_it(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; schedules on a
    single rack after preempting lower priority pods, then cannot schedule additional pods
    (rack-2 has 2 CPUs free, but the tree is on rack-1)."""
    sc = rack_one_after_preemption(strategy)
    sc.create(member("p5", "pg1"))
    sc.settle()
    sc.assert_unschedulable("p5")
    sc.assert_scheduled("p1", "p2", "p3", "p4", "existing")


def test_bound_member_pins_the_rack_where_low_pods_are_preempted(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; preexisting pod
    belonging to the hierarchy determines topology and lower priority pods are preempted."""
    sc = settled(
        strategy,
        [
            *four_nodes_two_racks(),
            assigned("existing", "node4-z1-r2", "1", group="pg1"),
            low("low1-z1-r2", "node3-z1-r2", "2"),
            low("low2-z1-r2", "node4-z1-r2", "1"),
        ],
        [
            root("rack"),
            child("pg1", 2),
            child("pg2", 2),
            member("p1", "pg1"),
            member("p2", "pg2"),
            member("p3", "pg2"),
        ],
    )
    sc.assert_scheduled("p1", "p2", "p3")
    sc.assert_removed("low1-z1-r2", "low2-z1-r2")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3")} <= {"node3-z1-r2", "node4-z1-r2"}


def test_basic_children_preempt_on_the_rack_of_low_pods(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; schedules on a
    rack after preempting lower priority pods (basic children; rack-2 is held at priority
    100)."""
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1"),
            tas_node("node2-z1-r2", "rack-2", "zone-1"),
            low("low1-z1-r1", "node1-z1-r1", "2"),
            assigned("existing2", "node2-z1-r2", "2"),
        ],
        [
            root("rack"),
            basic_child("pg1"),
            basic_child("pg2"),
            member("p1", "pg1"),
            member("p2", "pg2"),
        ],
    )
    sc.assert_scheduled("p1", "p2")
    sc.assert_removed("low1-z1-r1")
    assert {sc.node_of(p) for p in ("p1", "p2")} == {"node1-z1-r1"}


def test_preemption_picks_the_rack_with_the_highest_allocation(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; preemption
    chooses the rack with the highest allocation percentage among several feasible racks
    (each of racks 1-3 is freed by one victim of priority 10; with every victim removed,
    rack-2 is (2+3)/6 allocated, rack-1 3/4, rack-3 4/6, and rack-4 holds 2 CPUs only)."""
    layout = [
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
    sc = settled(
        strategy,
        [
            *(tas_node(name, rack, zone) for name, rack, zone in layout),
            assigned("existing1", "node3-z2-r2", "2"),
            assigned("existing2", "node8-z2-r3", "1"),
            low("low1-z1-r1", "node1-z1-r1", "2"),
            low("low1-z2-r2", "node4-z2-r2", "2"),
            low("low1-z2-r3", "node6-z2-r3", "2"),
            low("low2-z2-r3", "node8-z2-r3", "1"),
        ],
        [
            root("rack"),
            child("pg1", 2),
            child("pg2", 1),
            member("p1", "pg1"),
            member("p2", "pg1"),
            member("p3", "pg2"),
        ],
    )
    sc.assert_scheduled("p1", "p2", "p3")
    sc.assert_removed("low1-z2-r2")
    rack_2 = {"node3-z2-r2", "node4-z2-r2", "node5-z2-r2"}
    assert {sc.node_of(p) for p in ("p1", "p2", "p3")} <= rack_2
    sc.assert_nodes(
        {"low1-z1-r1": "node1-z1-r1", "low1-z2-r3": "node6-z2-r3", "low2-z2-r3": "node8-z2-r3"}
    )


def zone_over_rack_after_preemption(strategy: list[str]) -> Scenario:
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1"),
            tas_node("node2-z1-r2", "rack-2", "zone-1"),
            tas_node("node3-z2-r1", "rack-1", "zone-2"),
            tas_node("node4-z2-r1", "rack-1", "zone-2"),
            low("low-z1-r1", "node1-z1-r1", "2"),
            low("low-z1-r2", "node2-z1-r2", "2"),
            assigned("existing-z2", "node3-z2-r1", "1"),
        ],
        [
            root("zone"),
            child("pg1", 2, "rack"),
            child("pg2", 2, "rack"),
            member("p1", "pg1"),
            member("p2", "pg1"),
            member("p3", "pg2"),
            member("p4", "pg2"),
        ],
    )
    return sc


def test_zone_and_rack_constraints_with_preemption(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG and child PGs both have topology constraints (multi-level
    constraints: zone and rack) with preemption."""
    sc = zone_over_rack_after_preemption(strategy)
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_removed("low-z1-r1", "low-z1-r2")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3", "p4")} <= {"node1-z1-r1", "node2-z1-r2"}
    assert len(labels_of(sc, ["p1", "p2"], "rack")) == 1
    assert len(labels_of(sc, ["p3", "p4"], "rack")) == 1


def test_preemption_does_not_move_a_placed_tree_to_another_zone(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG and child PGs both have topology constraints (multi-level
    constraints: zone and rack), preemption does not help for subsequent (pg3 added later
    preempts on rack-3 of zone-1; pg4 after it could only fit by preempting in zone-2, outside
    the zone the tree is bound in)."""
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1"),
            tas_node("node2-z1-r2", "rack-2", "zone-1"),
            tas_node("node3-z1-r3", "rack-3", "zone-1"),
            tas_node("node4-z2-r1", "rack-1", "zone-2"),
            tas_node("node5-z2-r1", "rack-1", "zone-2"),
            low("low-z1-r3", "node3-z1-r3", "2"),
            low("low-z2-r1", "node4-z2-r1", "2"),
        ],
        [
            root("zone"),
            child("pg1", 2, "rack"),
            child("pg2", 2, "rack"),
            member("p1", "pg1"),
            member("p2", "pg1"),
            member("p3", "pg2"),
            member("p4", "pg2"),
        ],
    )
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_scheduled("low-z1-r3", "low-z2-r1")
    assert len(labels_of(sc, ["p1", "p2"], "rack")) == 1
    assert len(labels_of(sc, ["p3", "p4"], "rack")) == 1
    sc.create(child("pg3", 2, "rack"), member("p5", "pg3"), member("p6", "pg3"))
    sc.settle()
    sc.assert_scheduled("p5", "p6")
    sc.assert_removed("low-z1-r3")
    assert len(labels_of(sc, ["p5", "p6"], "rack")) == 1
    sc.create(child("pg4", 2, "rack"), member("p7", "pg4"), member("p8", "pg4"))
    sc.settle()
    sc.assert_unschedulable("p7", "p8")
    sc.assert_scheduled("low-z2-r1")


def test_one_child_constrained_the_other_in_the_parents_zone_with_preemption(
    strategy: list[str],
) -> None:
    """cpg_tas_test.go: parent CPG and only one child PG has topology constraints; the other
    child uses parent's topology with preemption (pg1 tolerates the tainted node1, held by a
    pod of priority 10)."""
    preferred = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": ["node4-z2-r1"],
                                }
                            ]
                        },
                    }
                ]
            }
        }
    }
    tolerate = {"tolerations": [{"key": "taint", "operator": "Exists"}]}
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1", taint="taint"),
            tas_node("node2-z1-r2", "rack-2", "zone-1"),
            tas_node("node3-z1-r3", "rack-3", "zone-1"),
            tas_node("node4-z2-r1", "rack-1", "zone-2"),
            tas_node("node5-z2-r2", "rack-2", "zone-2"),
            low("low-z1-r1", "node1-z1-r1", "2"),
            assigned("existing-z2", "node5-z2-r2", "1"),
            assigned("existing-z1-r2", "node2-z1-r2", "1"),
            assigned("existing-z1-r3", "node3-z1-r3", "1"),
        ],
        [
            root("zone"),
            child("pg1", 2, "rack"),
            child("pg2", 2),
            member("p1", "pg1", **tolerate),
            member("p2", "pg1", **tolerate),
            member("p3", "pg2", **preferred),
            member("p4", "pg2", **preferred),
        ],
    )
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_removed("low-z1-r1")
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2"], "rack")) == 1


def test_bound_member_pins_the_zone_and_rack_with_preemption(strategy: list[str]) -> None:
    """cpg_tas_test.go: parent CPG and all child PGs have topology constraints, preexisting
    pod group pods constrain available topology domains with preemption."""
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1"),
            tas_node("node2-z1-r2", "rack-2", "zone-1"),
            tas_node("node3-z1-r2", "rack-2", "zone-1"),
            tas_node("node4-z2-r1", "rack-1", "zone-2"),
            tas_node("node5-z2-r1", "rack-1", "zone-2"),
        ],
        [root("zone"), child("pg1", 2, "rack"), child("pg2", 2, "rack")],
        [
            assigned("existing-z1", "node1-z1-r1", "1", group="pg1"),
            low("low-z1-r1", "node1-z1-r1", "1"),
            low("low-z1-r2", "node2-z1-r2", "2"),
        ],
        [member("p1", "pg1"), member("p2", "pg2"), member("p3", "pg2")],
    )
    sc.assert_scheduled("p1", "p2", "p3")
    sc.assert_removed("low-z1-r1", "low-z1-r2")
    assert sc.node_of("p1") == "node1-z1-r1"
    assert {sc.node_of(p) for p in ("p2", "p3")} <= {"node2-z1-r2", "node3-z1-r2"}


EIGHT = {"p1": "pg1", "p2": "pg1", "p3": "pg2", "p4": "pg2"} | {
    "p5": "pg3",
    "p6": "pg3",
    "p7": "pg4",
    "p8": "pg4",
}


def assert_pairs_in_one_rack(sc: Scenario) -> None:
    for pair in (["p1", "p2"], ["p3", "p4"], ["p5", "p6"], ["p7", "p8"]):
        assert len(labels_of(sc, pair, "rack")) == 1, pair


def test_three_levels_all_constrained_with_preemption(strategy: list[str]) -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: all levels have topology constraints (root=zone,
    sub=block, leaf=rack) with preemption (zone-2 has 4 CPUs in one block: too small)."""
    layout = [
        ("node1-z1-g1-r1", "zone-1", "block-1", "rack-1"),
        ("node2-z1-g1-r2", "zone-1", "block-1", "rack-2"),
        ("node3-z1-g2-r1", "zone-1", "block-2", "rack-1"),
        ("node4-z1-g2-r2", "zone-1", "block-2", "rack-2"),
        ("node5-z2-g1-r1", "zone-2", "block-1", "rack-1"),
        ("node6-z2-g1-r1", "zone-2", "block-1", "rack-1"),
    ]
    lows = [low(f"low-z1-{i}", layout[i - 1][0], "2") for i in range(1, 5)]
    sc = settled(
        strategy,
        [*(labelled(n, zone=z, block=b, rack=r) for n, z, b, r in layout), *lows],
        [
            root("zone"),
            sub("cpg-sub1", "cpg-root", "block"),
            sub("cpg-sub2", "cpg-root", "block"),
            child("pg1", 2, "rack", "cpg-sub1"),
            child("pg2", 2, "rack", "cpg-sub1"),
            child("pg3", 2, "rack", "cpg-sub2"),
            child("pg4", 2, "rack", "cpg-sub2"),
            *(member(name, group) for name, group in EIGHT.items()),
        ],
    )
    sc.assert_scheduled(*EIGHT)
    sc.assert_removed("low-z1-1", "low-z1-2", "low-z1-3", "low-z1-4")
    assert len(labels_of(sc, list(EIGHT), "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "block")) == 1
    assert len(labels_of(sc, ["p5", "p6", "p7", "p8"], "block")) == 1
    assert_pairs_in_one_rack(sc)


def test_three_levels_mid_level_unconstrained_with_preemption(strategy: list[str]) -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: mid-level without topology constraints
    (root=zone, sub=none, leaf=rack) with preemption (zone-2 has one node: too small)."""
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1"),
            tas_node("node2-z1-r2", "rack-2", "zone-1"),
            tas_node("node3-z2-r1", "rack-1", "zone-2"),
            low("low-z1-r1", "node1-z1-r1", "2"),
            low("low-z1-r2", "node2-z1-r2", "2"),
        ],
        [
            root("zone"),
            sub("cpg-sub1", "cpg-root", None, None),
            sub("cpg-sub2", "cpg-root", None, None),
            child("pg1", 2, "rack", "cpg-sub1"),
            child("pg2", 2, "rack", "cpg-sub2"),
            member("p1", "pg1"),
            member("p2", "pg1"),
            member("p3", "pg2"),
            member("p4", "pg2"),
        ],
    )
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_removed("low-z1-r1", "low-z1-r2")
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2"], "rack")) == 1
    assert len(labels_of(sc, ["p3", "p4"], "rack")) == 1


def test_three_levels_top_level_unconstrained_with_preemption(strategy: list[str]) -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: top level without topology constraint
    (root=none, sub=zone, leaf=rack) with preemption (every node held at priority 10)."""
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1"),
            tas_node("node2-z1-r2", "rack-2", "zone-1"),
            tas_node("node3-z2-r3", "rack-3", "zone-2"),
            tas_node("node4-z2-r4", "rack-4", "zone-2"),
            low("low-z1-r1", "node1-z1-r1", "2"),
            low("low-z1-r2", "node2-z1-r2", "2"),
            low("low-z2-r3", "node3-z2-r3", "2"),
            low("low-z2-r4", "node4-z2-r4", "2"),
        ],
        [
            root(None, None),
            sub("cpg-sub1", "cpg-root", "zone"),
            sub("cpg-sub2", "cpg-root", "zone"),
            child("pg1", 2, "rack", "cpg-sub1"),
            child("pg2", 2, "rack", "cpg-sub1"),
            child("pg3", 2, "rack", "cpg-sub2"),
            child("pg4", 2, "rack", "cpg-sub2"),
            *(member(name, group) for name, group in EIGHT.items()),
        ],
    )
    sc.assert_scheduled(*EIGHT)
    sc.assert_removed("low-z1-r1", "low-z1-r2", "low-z2-r3", "low-z2-r4")
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "zone")) == 1
    assert len(labels_of(sc, ["p5", "p6", "p7", "p8"], "zone")) == 1
    assert_pairs_in_one_rack(sc)


def test_three_levels_bottom_level_unconstrained_with_preemption(strategy: list[str]) -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: bottom level without topology constraint
    (root=zone, sub=rack, leaf=none) with preemption (zone-2 has one rack of 4 CPUs: too
    small; upstream's step calls the root basic but creates it as a gang of minGroupCount 2,
    which is what is ported)."""
    sc = settled(
        strategy,
        [
            tas_node("node1-z1-r1", "rack-1", "zone-1"),
            tas_node("node2-z1-r1", "rack-1", "zone-1"),
            tas_node("node3-z1-r2", "rack-2", "zone-1"),
            tas_node("node4-z1-r2", "rack-2", "zone-1"),
            tas_node("node5-z2-r3", "rack-3", "zone-2"),
            tas_node("node6-z2-r3", "rack-3", "zone-2"),
            low("low-z1-r1-1", "node1-z1-r1", "2"),
            low("low-z1-r1-2", "node2-z1-r1", "2"),
            low("low-z1-r2-1", "node3-z1-r2", "2"),
            low("low-z1-r2-2", "node4-z1-r2", "2"),
        ],
        [
            root("zone"),
            sub("cpg-sub1", "cpg-root", "rack"),
            sub("cpg-sub2", "cpg-root", "rack"),
            child("pg1", 2, None, "cpg-sub1"),
            child("pg2", 2, None, "cpg-sub1"),
            child("pg3", 2, None, "cpg-sub2"),
            child("pg4", 2, None, "cpg-sub2"),
            *(member(name, group) for name, group in EIGHT.items()),
        ],
    )
    sc.assert_scheduled(*EIGHT)
    sc.assert_removed("low-z1-r1-1", "low-z1-r1-2", "low-z1-r2-1", "low-z1-r2-2")
    assert len(labels_of(sc, list(EIGHT), "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "rack")) == 1
    assert len(labels_of(sc, ["p5", "p6", "p7", "p8"], "rack")) == 1


def test_three_levels_bound_leaf_member_pins_zone_and_rack_with_preemption(
    strategy: list[str],
) -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: preexisting pod in leaf PodGroup determines
    topology for intermediate and root CPGs with preemption."""
    layout = [
        ("node1-z1-r1", "rack-1", "zone-1"),
        ("node2-z1-r1", "rack-1", "zone-1"),
        ("node3-z1-r2", "rack-2", "zone-1"),
        ("node4-z1-r2", "rack-2", "zone-1"),
        ("node5-z2-r1", "rack-1", "zone-2"),
        ("node6-z2-r1", "rack-1", "zone-2"),
        ("node7-z2-r2", "rack-2", "zone-2"),
        ("node8-z2-r2", "rack-2", "zone-2"),
    ]
    groups = {"p1": "pg1", "p2": "pg2", "p3": "pg2", "p4": "pg3"}
    groups |= {"p5": "pg3", "p6": "pg4", "p7": "pg4"}
    sc = settled(
        strategy,
        [tas_node(name, rack, zone) for name, rack, zone in layout],
        [
            root("zone"),
            sub("cpg-sub1", "cpg-root", "rack"),
            sub("cpg-sub2", "cpg-root", "rack"),
            child("pg1", 2, None, "cpg-sub1"),
            child("pg2", 2, None, "cpg-sub1"),
            child("pg3", 2, None, "cpg-sub2"),
            child("pg4", 2, None, "cpg-sub2"),
        ],
        [
            assigned("existing-pg1", "node5-z2-r1", "1", group="pg1"),
            low("low-z2-r1", "node6-z2-r1", "2"),
            low("low-z2-r2", "node7-z2-r2", "2"),
        ],
        [member(name, group) for name, group in groups.items()],
    )
    sc.assert_scheduled(*groups)
    sc.assert_removed("low-z2-r1", "low-z2-r2")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3")} <= {"node5-z2-r1", "node6-z2-r1"}
    assert {sc.node_of(p) for p in ("p4", "p5", "p6", "p7")} <= {"node7-z2-r2", "node8-z2-r2"}
