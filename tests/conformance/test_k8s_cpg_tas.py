"""kube-scheduler's test/integration/scheduler/podgroup/topology_aware_scheduling/cpg_tas_test.go
(TestCPGTopologyAwareScheduling), every case.

Topology per level of a CompositePodGroup tree (KEP-6012 with KEP-5732; issue 20): the root's
`schedulingConstraints.topology` keeps every child in one domain, a child's own constraint
picks a smaller domain inside it, and members already bound pin the domain. Nodes of 2 CPUs
labelled `rack` and `zone`; pods of 1 CPU at priority 100, as upstream's helpers.
"""

from __future__ import annotations

from typing import Any

from tests.conformance.harness import (
    Manifest,
    Scenario,
    composite_group,
    node,
    pod,
    upstream_group,
)

SOURCE = (
    "kube-scheduler `test/integration/scheduler/podgroup/topology_aware_scheduling/"
    "cpg_tas_test.go` (TestCPGTopologyAwareScheduling)"
)


def tas_node(name: str, rack: str, zone: str, *, taint: str | None = None) -> Manifest:
    raw = node(name, cpu="2", labels={"rack": rack, "zone": zone})
    if taint is not None:
        raw["spec"] = {"taints": [{"key": taint, "effect": "NoSchedule"}]}
    return raw


def root(key: str | None, min_groups: int | None = 2, name: str = "cpg-root") -> Manifest:
    return sub(name, None, key, min_groups)


def sub(name: str, parent: str | None, key: str | None, min_groups: int | None = 2) -> Manifest:
    return composite_group(
        name,
        min_group_count=min_groups,
        priority=100,
        template=("cpg", "workload"),
        topology_key=key,
        parent=parent,
    )


def child(
    name: str, min_count: int | None, key: str | None = None, parent: str = "cpg-root"
) -> Manifest:
    return upstream_group(
        name,
        min_count=min_count,
        priority=100,
        parent=parent,
        template=("pg", "workload"),
        topology_key=key,
    )


def labelled(name: str, **labels: str) -> Manifest:
    return node(name, cpu="2", labels=labels)


def member(name: str, group: str, **spec: Any) -> Manifest:
    return pod(name, cpu="1", priority=100, pod_group=group, spec=spec or None)


def assigned(name: str, on: str, cpu: str, group: str | None = None) -> Manifest:
    return pod(name, cpu=cpu, priority=100, pod_group=group, node_name=on)


def labels_of(sc: Scenario, names: list[str], key: str) -> set[str]:
    nodes = {n["metadata"]["name"]: n for k, n in sc.objects.items() if k[1] == "Node"}
    out = set()
    for name in names:
        placed = sc.node_of(name)
        assert placed is not None, name
        out.add(nodes[placed]["metadata"]["labels"][key])
    return out


def test_parent_topology_children_none_schedules_on_a_single_rack() -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; schedules on a
    single rack."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        assigned("existing", "node4-z1-r2", "2"),
    )
    sc.create(root("rack"), child("pg1", 2), child("pg2", 2))
    sc.create(member("p1", "pg1"), member("p2", "pg1"), member("p3", "pg2"), member("p4", "pg2"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3", "p4")} <= {"node1-z1-r1", "node2-z1-r1"}


def test_preexisting_pod_of_the_hierarchy_determines_the_topology() -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; preexisting pod
    belonging to the hierarchy determines the topology."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        assigned("existing", "node4-z1-r2", "1", group="pg1"),
    )
    sc.create(root("rack"), child("pg1", 2), child("pg2", 2))
    sc.create(member("p1", "pg1"), member("p2", "pg2"), member("p3", "pg2"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3")} <= {"node3-z1-r2", "node4-z1-r2"}


def test_pending_when_no_single_rack_fits_all_children() -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, children do not; remains pending
    when no single rack can fit all children."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r2", "rack-2", "zone-1"),
        assigned("existing1", "node1-z1-r1", "1"),
        assigned("existing2", "node2-z1-r2", "1"),
    )
    sc.create(root("rack"), child("pg1", None), child("pg2", None))
    sc.create(member("p1", "pg1"), member("p2", "pg2"))
    sc.settle()
    sc.assert_unschedulable("p1", "p2")


def test_multi_level_constraints_zone_and_rack() -> None:
    """cpg_tas_test.go: parent CPG and child PGs both have topology constraints (multi-level
    constraints: zone and rack)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r2", "rack-2", "zone-1"),
        tas_node("node3-z2-r1", "rack-1", "zone-2"),
        tas_node("node4-z2-r1", "rack-1", "zone-2"),
        assigned("existing-z2", "node3-z2-r1", "1"),
    )
    sc.create(root("zone"), child("pg1", 2, "rack"), child("pg2", 2, "rack"))
    sc.create(member("p1", "pg1"), member("p2", "pg1"), member("p3", "pg2"), member("p4", "pg2"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3", "p4")} <= {"node1-z1-r1", "node2-z1-r2"}
    assert len(labels_of(sc, ["p1", "p2"], "rack")) == 1
    assert len(labels_of(sc, ["p3", "p4"], "rack")) == 1


def test_one_child_constrained_the_other_uses_the_parents_domain() -> None:
    """cpg_tas_test.go: parent CPG and only one child PG has topology constraints; the other
    child uses parent's topology (pg1 must take the tainted node1 it alone tolerates; pg2's
    preferred node is in zone-2, which cannot hold both children)."""
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
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1", taint="taint"),
        tas_node("node2-z1-r2", "rack-2", "zone-1"),
        tas_node("node3-z1-r3", "rack-3", "zone-1"),
        tas_node("node4-z2-r1", "rack-1", "zone-2"),
        tas_node("node5-z2-r2", "rack-2", "zone-2"),
        assigned("existing-z2", "node5-z2-r2", "1"),
        assigned("existing-z1-r2", "node2-z1-r2", "1"),
        assigned("existing-z1-r3", "node3-z1-r3", "1"),
    )
    sc.create(root("zone"), child("pg1", 2, "rack"), child("pg2", 2))
    sc.create(
        member("p1", "pg1", **tolerate),
        member("p2", "pg1", **tolerate),
        member("p3", "pg2", **preferred),
        member("p4", "pg2", **preferred),
    )
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2"], "rack")) == 1


def test_preexisting_pods_of_the_children_constrain_the_domains() -> None:
    """cpg_tas_test.go: parent CPG and all child PGs have topology constraints, preexisting pod
    group pods constrain the available topology domains."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r2", "rack-2", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z2-r1", "rack-1", "zone-2"),
        tas_node("node5-z2-r1", "rack-1", "zone-2"),
    )
    sc.create(root("zone"), child("pg1", 2, "rack"), child("pg2", 2, "rack"))
    sc.create(assigned("existing-z1", "node1-z1-r1", "1", group="pg1"))
    sc.create(member("p1", "pg1"), member("p2", "pg2"), member("p3", "pg2"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")
    assert sc.node_of("p1") == "node1-z1-r1"
    assert {sc.node_of(p) for p in ("p2", "p3")} <= {"node2-z1-r2", "node3-z1-r2"}


def test_bound_members_in_conflicting_domains_fail_the_tree() -> None:
    """cpg_tas_test.go: parent CPG has topology constraints, preexisting pod group pods are in
    conflicting domains across pod groups, fails to schedule any pod (upstream: a scheduling
    error)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z2-r1", "rack-1", "zone-2"),
        tas_node("node4-z2-r1", "rack-1", "zone-2"),
    )
    sc.create(root("zone"), child("pg1", 2, "rack"), child("pg2", 2, "rack"))
    sc.create(
        assigned("existing-z1", "node1-z1-r1", "1", group="pg1"),
        assigned("existing-z2", "node3-z2-r1", "1", group="pg2"),
    )
    sc.create(member("p1", "pg1"), member("p2", "pg2"))
    sc.settle()
    sc.assert_unschedulable("p1", "p2")
    message = sc.outcomes[-1].unschedulable["default/p1"]
    assert "bound in more than one zone domain" in message, message


def test_three_levels_all_constrained_zone_block_rack() -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: all levels have topology constraints (root=zone,
    sub=block, leaf=rack)."""
    sc = Scenario()
    layout = [
        ("node1-z1-g1-r1", "zone-1", "block-1", "rack-1"),
        ("node2-z1-g1-r2", "zone-1", "block-1", "rack-2"),
        ("node3-z1-g2-r1", "zone-1", "block-2", "rack-1"),
        ("node4-z1-g2-r2", "zone-1", "block-2", "rack-2"),
        ("node5-z2-g1-r1", "zone-2", "block-1", "rack-1"),
        ("node6-z2-g1-r1", "zone-2", "block-1", "rack-1"),
    ]
    sc.create([labelled(n, zone=z, block=b, rack=r) for n, z, b, r in layout])
    sc.create(
        root("zone"),
        sub("cpg-sub1", "cpg-root", "block"),
        sub("cpg-sub2", "cpg-root", "block"),
        child("pg1", 2, "rack", "cpg-sub1"),
        child("pg2", 2, "rack", "cpg-sub1"),
        child("pg3", 2, "rack", "cpg-sub2"),
        child("pg4", 2, "rack", "cpg-sub2"),
    )
    groups = {"p1": "pg1", "p2": "pg1", "p3": "pg2", "p4": "pg2"}
    groups |= {"p5": "pg3", "p6": "pg3", "p7": "pg4", "p8": "pg4"}
    sc.create([member(name, group) for name, group in groups.items()])
    sc.settle()
    sc.assert_scheduled(*groups)
    assert len(labels_of(sc, list(groups), "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "block")) == 1
    assert len(labels_of(sc, ["p5", "p6", "p7", "p8"], "block")) == 1
    for pair in (["p1", "p2"], ["p3", "p4"], ["p5", "p6"], ["p7", "p8"]):
        assert len(labels_of(sc, pair, "rack")) == 1, pair


def test_three_levels_mid_level_unconstrained() -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: mid-level without topology constraints
    (root=zone, sub=none, leaf=rack)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r2", "rack-2", "zone-1"),
        tas_node("node3-z2-r1", "rack-1", "zone-2"),
    )
    sc.create(
        root("zone"),
        sub("cpg-sub1", "cpg-root", None, None),
        sub("cpg-sub2", "cpg-root", None, None),
        child("pg1", 2, "rack", "cpg-sub1"),
        child("pg2", 2, "rack", "cpg-sub2"),
    )
    sc.create(member("p1", "pg1"), member("p2", "pg1"), member("p3", "pg2"), member("p4", "pg2"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2"], "rack")) == 1
    assert len(labels_of(sc, ["p3", "p4"], "rack")) == 1


def test_three_levels_top_level_unconstrained() -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: top level without topology constraint
    (root=none, sub=zone, leaf=rack)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r2", "rack-2", "zone-1"),
        tas_node("node3-z2-r3", "rack-3", "zone-2"),
        tas_node("node4-z2-r4", "rack-4", "zone-2"),
        tas_node("node5-z2-r5", "rack-5", "zone-2"),
    )
    sc.create(
        root(None, None),
        sub("cpg-sub1", "cpg-root", "zone"),
        sub("cpg-sub2", "cpg-root", "zone"),
        child("pg1", 2, "rack", "cpg-sub1"),
        child("pg2", 2, "rack", "cpg-sub1"),
        child("pg3", 2, "rack", "cpg-sub2"),
        child("pg4", 2, "rack", "cpg-sub2"),
    )
    groups = {"p1": "pg1", "p2": "pg1", "p3": "pg2", "p4": "pg2"}
    groups |= {"p5": "pg3", "p6": "pg3", "p7": "pg4", "p8": "pg4"}
    sc.create([member(name, group) for name, group in groups.items()])
    sc.settle()
    sc.assert_scheduled(*groups)
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "zone")) == 1
    assert len(labels_of(sc, ["p5", "p6", "p7", "p8"], "zone")) == 1
    for pair in (["p1", "p2"], ["p3", "p4"], ["p5", "p6"], ["p7", "p8"]):
        assert len(labels_of(sc, pair, "rack")) == 1, pair


def test_three_levels_preexisting_leaf_pod_anchors_the_rack_and_the_zone() -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: preexisting pod in leaf PodGroup determines
    topology for intermediate and root CPGs."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        tas_node("node5-z2-r1", "rack-1", "zone-2"),
        tas_node("node6-z2-r1", "rack-1", "zone-2"),
        tas_node("node7-z2-r2", "rack-2", "zone-2"),
        tas_node("node8-z2-r2", "rack-2", "zone-2"),
    )
    sc.create(
        root("zone"),
        sub("cpg-sub1", "cpg-root", "rack"),
        sub("cpg-sub2", "cpg-root", "rack"),
        child("pg1", 2, None, "cpg-sub1"),
        child("pg2", 2, None, "cpg-sub1"),
        child("pg3", 2, None, "cpg-sub2"),
        child("pg4", 2, None, "cpg-sub2"),
    )
    sc.create(assigned("existing-pg1", "node5-z2-r1", "1", group="pg1"))
    groups = {"p1": "pg1", "p2": "pg2", "p3": "pg2", "p4": "pg3"}
    groups |= {"p5": "pg3", "p6": "pg4", "p7": "pg4"}
    sc.create([member(name, group) for name, group in groups.items()])
    sc.settle()
    sc.assert_scheduled(*groups)
    assert {sc.node_of(p) for p in ("p1", "p2", "p3")} <= {"node5-z2-r1", "node6-z2-r1"}
    assert {sc.node_of(p) for p in ("p4", "p5", "p6", "p7")} <= {"node7-z2-r2", "node8-z2-r2"}


def test_the_rack_with_the_highest_allocation_is_chosen() -> None:
    """cpg_tas_test.go: CPG schedules on a single rack, choosing placement with highest
    allocation percentage (NodeResourcesFit placement scoring)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        assigned("existing", "node1-z1-r1", "1"),
    )
    sc.create(root("rack"), child("pg1", 1), child("pg2", 2))
    sc.create(member("p1", "pg1"), member("p2", "pg2"), member("p3", "pg2"))
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3")} <= {"node1-z1-r1", "node2-z1-r1"}


def test_min_group_count_below_the_children_schedules_a_subset_on_one_rack() -> None:
    """cpg_tas_test.go: CPG with minGroupCount < total children schedules satisfying subset
    on a single rack."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        assigned("existing1", "node3-z1-r2", "2"),
        assigned("existing2", "node4-z1-r2", "2"),
    )
    sc.create(root("rack"), child("pg1", 2), child("pg2", 2), child("pg3", 2))
    groups = {"p1": "pg1", "p2": "pg1", "p3": "pg2", "p4": "pg2", "p5": "pg3", "p6": "pg3"}
    sc.create([member(name, group) for name, group in groups.items()])
    sc.settle()
    sc.assert_scheduled("p1", "p2", "p3", "p4")
    sc.assert_unschedulable("p5", "p6")
    assert {sc.node_of(p) for p in ("p1", "p2", "p3", "p4")} <= {"node1-z1-r1", "node2-z1-r1"}


def test_the_rack_that_holds_more_of_the_tree_is_chosen() -> None:
    """cpg_tas_test.go: CPG schedules on a single rack, choosing placement that accommodates
    more descendant pods (PodGroupPodsCount placement scoring)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        assigned("existing", "node1-z1-r1", "1"),
    )
    sc.create(child("pg1", 2), child("pg2", 2))
    pods = ("p1", "p2", "p3", "p4")
    sc.create([member(name, "pg1" if name in ("p1", "p2") else "pg2") for name in pods])
    sc.create(root("rack", 1))
    sc.settle()
    sc.assert_scheduled(*pods)
    assert {sc.node_of(p) for p in pods} <= {"node3-z1-r2", "node4-z1-r2"}


def test_three_levels_bottom_level_unconstrained() -> None:
    """cpg_tas_test.go: 3-level CPG hierarchy: bottom level without topology constraint
    (root=zone, sub=rack, leaf=none)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        tas_node("node5-z2-r3", "rack-3", "zone-2"),
        tas_node("node6-z2-r3", "rack-3", "zone-2"),
    )
    sc.create(
        root("zone"),
        sub("cpg-sub1", "cpg-root", "rack"),
        sub("cpg-sub2", "cpg-root", "rack"),
        child("pg1", 2, None, "cpg-sub1"),
        child("pg2", 2, None, "cpg-sub1"),
        child("pg3", 2, None, "cpg-sub2"),
        child("pg4", 2, None, "cpg-sub2"),
    )
    groups = {"p1": "pg1", "p2": "pg1", "p3": "pg2", "p4": "pg2"}
    groups |= {"p5": "pg3", "p6": "pg3", "p7": "pg4", "p8": "pg4"}
    sc.create([member(name, group) for name, group in groups.items()])
    sc.settle()
    sc.assert_scheduled(*groups)
    assert len(labels_of(sc, list(groups), "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "rack")) == 1
    assert len(labels_of(sc, ["p5", "p6", "p7", "p8"], "rack")) == 1


def test_basic_tree_stays_on_its_rack_instead_of_spilling() -> None:
    """cpg_tas_test.go: basic CPG picks the higher-scoring rack and stays there instead of
    spilling to a rack that fits."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        assigned("existing", "node1-z1-r1", "2"),
    )
    sc.create(root("rack", None), child("pg1", None), child("pg2", None))
    sc.create(member("p1", "pg1"))
    sc.settle()
    sc.assert_scheduled("p1")
    assert sc.node_of("p1") in {"node1-z1-r1", "node2-z1-r1"}
    sc.create(member("p2", "pg1"))
    sc.settle()
    sc.assert_scheduled("p2")
    sc.create(member("p3", "pg2"), member("p4", "pg2"))
    sc.settle()
    sc.assert_unschedulable("p3", "p4")
    sc.delete("existing")
    sc.settle()
    sc.assert_scheduled("p3", "p4")
    rack_1 = {"node1-z1-r1", "node2-z1-r1"}
    assert {sc.node_of(p) for p in ("p1", "p2", "p3", "p4")} <= rack_1


def test_two_trees_in_turn_share_the_fuller_rack() -> None:
    """cpg_tas_test.go: two CPG hierarchies schedule consecutively on the same rack although
    another rack fits (rack-1 of two nodes is fuller by MostAllocated than rack-2 of three:
    2/4 against 2/6 for the first tree, 4/4 against 2/6 for the second)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        tas_node("node5-z1-r2", "rack-2", "zone-1"),
    )
    rack_1 = {"node1-z1-r1", "node2-z1-r1"}
    sc.create(root("rack", name="cpg-root1"))
    sc.create(child("pg1-1", 1, parent="cpg-root1"), child("pg1-2", 1, parent="cpg-root1"))
    sc.create(member("p1", "pg1-1"), member("p2", "pg1-2"))
    sc.settle()
    sc.assert_scheduled("p1", "p2")
    assert {sc.node_of(p) for p in ("p1", "p2")} <= rack_1
    sc.create(root("rack", name="cpg-root2"))
    sc.create(child("pg2-1", 1, parent="cpg-root2"), child("pg2-2", 1, parent="cpg-root2"))
    sc.create(member("p3", "pg2-1"), member("p4", "pg2-2"))
    sc.settle()
    sc.assert_scheduled("p3", "p4")
    assert {sc.node_of(p) for p in ("p3", "p4")} <= rack_1


def test_two_trees_in_turn_each_on_its_own_rack() -> None:
    """cpg_tas_test.go: two CPG hierarchies schedule consecutively, each on a separate rack."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
    )
    first = ["p1-1", "p1-2", "p1-3", "p1-4"]
    sc.create(root("rack", name="cpg-root1"))
    sc.create(child("pg1-1", 2, parent="cpg-root1"), child("pg1-2", 2, parent="cpg-root1"))
    sc.create([member(name, "pg1-1" if name in first[:2] else "pg1-2") for name in first])
    sc.settle()
    sc.assert_scheduled(*first)
    assert len(labels_of(sc, first, "rack")) == 1
    second = ["p2-1", "p2-2", "p2-3", "p2-4"]
    sc.create(root("rack", name="cpg-root2"))
    sc.create(child("pg2-1", 2, parent="cpg-root2"), child("pg2-2", 2, parent="cpg-root2"))
    sc.create([member(name, "pg2-1" if name in second[:2] else "pg2-2") for name in second])
    sc.settle()
    sc.assert_scheduled(*second)
    assert len(labels_of(sc, second, "rack")) == 1
    assert labels_of(sc, first, "rack") != labels_of(sc, second, "rack")


def test_two_trees_in_turn_the_second_waits_without_a_free_rack() -> None:
    """cpg_tas_test.go: two CPG hierarchies schedule consecutively, second remains pending when
    no additional rack is available."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
    )
    first = ["p1-1", "p1-2", "p1-3", "p1-4"]
    sc.create(root("rack", name="cpg-root1"))
    sc.create(child("pg1-1", 2, parent="cpg-root1"), child("pg1-2", 2, parent="cpg-root1"))
    sc.create([member(name, "pg1-1" if name in first[:2] else "pg1-2") for name in first])
    sc.settle()
    sc.assert_scheduled(*first)
    second = ["p2-1", "p2-2", "p2-3", "p2-4"]
    sc.create(root("rack", name="cpg-root2"))
    sc.create(child("pg2-1", 2, parent="cpg-root2"), child("pg2-2", 2, parent="cpg-root2"))
    sc.create([member(name, "pg2-1" if name in second[:2] else "pg2-2") for name in second])
    sc.settle()
    sc.assert_unschedulable(*second)
    sc.assert_scheduled(*first)


def test_mixed_sub_tree_and_direct_children_with_their_own_constraints() -> None:
    """cpg_tas_test.go: CPG hierarchy with mixed sub-CPG and direct child PGs and different
    topology constraints (root=zone with minGroupCount 3; cpg-sub1=rack over two unconstrained
    leaves; pg3=rack and pg4 unconstrained directly under the root)."""
    sc = Scenario()
    sc.create(
        tas_node("node1-z1-r1", "rack-1", "zone-1"),
        tas_node("node2-z1-r1", "rack-1", "zone-1"),
        tas_node("node3-z1-r2", "rack-2", "zone-1"),
        tas_node("node4-z1-r2", "rack-2", "zone-1"),
        tas_node("node5-z2-r1", "rack-1", "zone-2"),
        tas_node("node6-z2-r2", "rack-2", "zone-2"),
    )
    sc.create(
        root("zone", 3),
        sub("cpg-sub1", "cpg-root", "rack"),
        child("pg1", 2, None, "cpg-sub1"),
        child("pg2", 2, None, "cpg-sub1"),
        child("pg3", 2, "rack"),
        child("pg4", 2),
    )
    groups = {"p1": "pg1", "p2": "pg1", "p3": "pg2", "p4": "pg2"}
    groups |= {"p5": "pg3", "p6": "pg3", "p7": "pg4", "p8": "pg4"}
    sc.create([member(name, group) for name, group in groups.items()])
    sc.settle()
    sc.assert_scheduled(*groups)
    assert len(labels_of(sc, list(groups), "zone")) == 1
    assert len(labels_of(sc, ["p1", "p2", "p3", "p4"], "rack")) == 1
    assert len(labels_of(sc, ["p5", "p6"], "rack")) == 1
