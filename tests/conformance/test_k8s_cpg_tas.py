"""kube-scheduler's test/integration/scheduler/podgroup/topology_aware_scheduling/cpg_tas_test.go
(TestCPGTopologyAwareScheduling), the first five cases.

Topology per level of a CompositePodGroup tree (KEP-6012 with KEP-5732; issue 20): the root's
`schedulingConstraints.topology` keeps every child in one domain, a child's own constraint
picks a smaller domain inside it, and members already bound pin the domain. Nodes of 2 CPUs
labelled `rack` and `zone`; pods of 1 CPU at priority 100, as upstream's helpers. The later
cases of the file (a longer table) are not ported here.
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


def root(key: str, min_groups: int = 2) -> Manifest:
    return composite_group(
        "cpg-root",
        min_group_count=min_groups,
        priority=100,
        template=("cpg", "workload"),
        topology_key=key,
    )


def child(name: str, min_count: int | None, key: str | None = None) -> Manifest:
    return upstream_group(
        name,
        min_count=min_count,
        priority=100,
        parent="cpg-root",
        template=("pg", "workload"),
        topology_key=key,
    )


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
