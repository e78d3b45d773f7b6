"""kube-scheduler's test/integration/scheduler/podgroup/cpg_test.go (TestCPGScheduling).

CompositePodGroup trees (KEP-6012; gangsched.core.composite, issue 20): readiness and
feasibility across levels, Gang and Basic policies at every level, children added to a tree
that already runs, and the `CompositePodGroupInitiallyScheduled` / `PodGroupInitiallyScheduled`
conditions with kube-scheduler's reasons and, where upstream checks them, its messages. One
node of 20 (or 8, 4) CPUs; every pod and group at priority 100, as upstream's.
Not ported: TestPodGroupDependentRequiredValidation (API server validation, no scheduler).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.conformance.harness import Manifest, Scenario, composite_group, node, pod, upstream_group

SOURCE = "kube-scheduler `test/integration/scheduler/podgroup/cpg_test.go` (TestCPGScheduling)"
CPG_CONDITION = "CompositePodGroupInitiallyScheduled"
PG_CONDITION = "PodGroupInitiallyScheduled"


def cpg(name: str, min_groups: int | None, parent: str | None = None) -> Manifest:
    return composite_group(
        name, min_group_count=min_groups, priority=100, template=("wl", name), parent=parent
    )


def pg(name: str, min_count: int | None, parent: str) -> Manifest:
    return upstream_group(
        name, min_count=min_count, priority=100, parent=parent, template=("wl", name)
    )


def pods(group: str, *cpus: str) -> list[Manifest]:
    return [
        pod(f"{group}-pod-{i}", cpu=cpu, priority=100, pod_group=group)
        for i, cpu in enumerate(cpus)
    ]


def names(group: str, count: int) -> list[str]:
    return [f"{group}-pod-{i}" for i in range(count)]


def condition(sc: Scenario, name: str, type_: str) -> dict[str, Any]:
    entry = sc.outcomes[-1].group(name)
    found = [c for c in entry.get("conditions", []) if c.get("type") == type_]
    assert found, f"no {type_} on {name}: {entry}"
    return dict(found[0])


def assert_conditions(sc: Scenario, expected: dict[str, str], *, composites: Iterable[str]) -> None:
    """name -> "Scheduled" (True) or "Unschedulable" (False), on the right condition type."""
    composite = set(composites)
    for name, reason in expected.items():
        found = condition(sc, name, CPG_CONDITION if name in composite else PG_CONDITION)
        status = "True" if reason == "Scheduled" else "False"
        assert (found["status"], found["reason"]) == (status, reason), (name, found)


def test_cpg_hierarchical_scheduling() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGHierarchicalScheduling (3 levels, mixed Gang and
    Basic; pg6 fails because its parent cpg-sub3 needs pg7, which fits nowhere)."""
    sc = Scenario()
    sc.create(
        node("node1", cpu="20"),
        cpg("cpg-root", 2),
        cpg("cpg-sub1", 2, "cpg-root"),
        cpg("cpg-sub2", None, "cpg-root"),
        cpg("cpg-sub3", 2, "cpg-root"),
        [pg(f"pg{i}", 3, "cpg-sub1") for i in (1, 2, 3)],
        pg("pg4", None, "cpg-sub2"),
        pg("pg5", 3, "cpg-sub2"),
        pg("pg6", 3, "cpg-sub3"),
        pg("pg7", 3, "cpg-sub3"),
    )
    sc.create(
        pods("pg1", "1", "1", "1"),
        pods("pg2", "1", "1", "1"),
        pods("pg3", "100", "100", "100"),
        pods("pg4", "1", "1", "1"),
        pods("pg5", "1", "1", "1"),
        pods("pg6", "1", "1", "1"),
        pods("pg7", "100", "100", "100"),
    )
    sc.settle()
    sc.assert_scheduled(*(n for g in ("pg1", "pg2", "pg4", "pg5") for n in names(g, 3)))
    sc.assert_unschedulable(*(n for g in ("pg3", "pg6", "pg7") for n in names(g, 3)))
    assert_conditions(
        sc,
        {
            "cpg-root": "Scheduled",
            "cpg-sub1": "Scheduled",
            "cpg-sub2": "Scheduled",
            "cpg-sub3": "Unschedulable",
            "pg1": "Scheduled",
            "pg2": "Scheduled",
            "pg3": "Unschedulable",
            "pg4": "Scheduled",
            "pg5": "Scheduled",
            "pg6": "Unschedulable",
            "pg7": "Unschedulable",
        },
        composites=["cpg-root", "cpg-sub1", "cpg-sub2", "cpg-sub3"],
    )


def test_cpg_min_group_count() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGMinGroupCount."""
    sc = Scenario()
    sc.create(node("node1", cpu="20"), cpg("cpg-root", 2))
    sc.create([pg(f"pg{i}", 3, "cpg-root") for i in (1, 2, 3)])
    sc.create(pods("pg1", "1", "1", "1"), pods("pg2", "1", "1", "1"), pods("pg3", "100", "1", "1"))
    sc.settle()
    sc.assert_scheduled(*names("pg1", 3), *names("pg2", 3))
    sc.assert_unschedulable(*names("pg3", 3))
    assert_conditions(
        sc,
        {"cpg-root": "Scheduled", "pg1": "Scheduled", "pg2": "Scheduled", "pg3": "Unschedulable"},
        composites=["cpg-root"],
    )


def test_cpg_basic_with_gang_children() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGBasicWithGangChildren."""
    sc = Scenario()
    sc.create(node("node1", cpu="20"), cpg("cpg-root", None))
    sc.create(pg("pg1", 3, "cpg-root"), pg("pg2", 3, "cpg-root"))
    sc.create(pods("pg1", "1", "1", "1"), pods("pg2", "100", "1", "1"))
    sc.settle()
    sc.assert_scheduled(*names("pg1", 3))
    sc.assert_unschedulable(*names("pg2", 3))
    assert_conditions(
        sc,
        {"cpg-root": "Scheduled", "pg1": "Scheduled", "pg2": "Unschedulable"},
        composites=["cpg-root"],
    )


def test_cpg_basic_with_basic_children() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGBasicWithBasicChildren."""
    sc = Scenario()
    sc.create(node("node1", cpu="20"), cpg("cpg-root", None))
    sc.create(pg("pg1", None, "cpg-root"), pg("pg2", None, "cpg-root"))
    sc.create(pods("pg1", "1", "1"), pods("pg2", "1", "1"))
    sc.settle()
    sc.assert_scheduled(*names("pg1", 2), *names("pg2", 2))
    assert_conditions(
        sc,
        {"cpg-root": "Scheduled", "pg1": "Scheduled", "pg2": "Scheduled"},
        composites=["cpg-root"],
    )


def test_cpg_gang_with_basic_children() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGGangWithBasicChildren (8 CPUs; pg3's 10-CPU pods
    fit nowhere)."""
    sc = Scenario()
    sc.create(node("node1", cpu="8"), cpg("cpg-root", 2))
    sc.create([pg(f"pg{i}", None, "cpg-root") for i in (1, 2, 3)])
    sc.create(pods("pg1", "1", "1", "1"), pods("pg2", "1", "1", "1"), pods("pg3", "10", "10", "10"))
    sc.settle()
    sc.assert_scheduled(*names("pg1", 3), *names("pg2", 3))
    sc.assert_unschedulable(*names("pg3", 3))
    assert_conditions(
        sc,
        {"cpg-root": "Scheduled", "pg1": "Scheduled", "pg2": "Scheduled", "pg3": "Unschedulable"},
        composites=["cpg-root"],
    )


def test_cpg_basic_with_unschedulable_basic_children() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGBasicWithUnschedulableBasicChildren."""
    sc = Scenario()
    sc.create(node("node1", cpu="20"), cpg("cpg-root", None))
    sc.create(pg("pg1", None, "cpg-root"), pg("pg2", None, "cpg-root"))
    sc.create(pods("pg1", "50", "50"), pods("pg2", "50", "50"))
    sc.settle()
    sc.assert_unschedulable(*names("pg1", 2), *names("pg2", 2))
    assert_conditions(
        sc,
        {"cpg-root": "Unschedulable", "pg1": "Unschedulable", "pg2": "Unschedulable"},
        composites=["cpg-root"],
    )


def test_cpg_dynamic_child_addition() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGDynamicChildAddition (children and a sub-tree
    added to a tree that already runs; the sub-tree waits for its second child)."""
    sc = Scenario()
    sc.create(node("node1", cpu="20"), cpg("cpg-root", None), pg("pg1", None, "cpg-root"))
    sc.create(pods("pg1", "1", "1"))
    sc.settle()
    sc.assert_scheduled(*names("pg1", 2))
    assert_conditions(sc, {"cpg-root": "Scheduled", "pg1": "Scheduled"}, composites=["cpg-root"])

    sc.create(pg("pg2", None, "cpg-root"), pods("pg2", "1", "1"))
    sc.settle()
    sc.assert_scheduled(*names("pg2", 2))
    assert_conditions(sc, {"pg2": "Scheduled"}, composites=[])

    sc.create(cpg("cpg-sub", 2, "cpg-root"), pg("sub-pg1", None, "cpg-sub"))
    sc.create(pods("sub-pg1", "1", "1"))
    sc.settle()
    sc.assert_unschedulable(*names("sub-pg1", 2))
    assert_conditions(
        sc, {"cpg-sub": "Unschedulable", "sub-pg1": "Unschedulable"}, composites=["cpg-sub"]
    )

    sc.create(pg("sub-pg2", None, "cpg-sub"), pods("sub-pg2", "1", "1"))
    sc.settle()
    sc.assert_scheduled(*names("sub-pg1", 2), *names("sub-pg2", 2))
    assert_conditions(
        sc,
        {"cpg-sub": "Scheduled", "sub-pg1": "Scheduled", "sub-pg2": "Scheduled"},
        composites=["cpg-sub"],
    )


def test_cpg_status_conditions_resource_blocked_then_scheduled() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGStatusConditions_ResourceBlockedThenScheduled."""
    sc = Scenario()
    sc.create(node("node1", cpu="4"), pod("blocker", cpu="3", priority=100))
    sc.settle()
    sc.assert_scheduled("blocker")
    sc.create(cpg("cpg-root", 2), pg("pg1", 2, "cpg-root"), pg("pg2", 2, "cpg-root"))
    sc.create(pods("pg1", "1", "1"), pods("pg2", "1", "1"))
    sc.settle()
    sc.assert_unschedulable(*names("pg1", 2), *names("pg2", 2))
    assert_conditions(
        sc,
        {"cpg-root": "Unschedulable", "pg1": "Unschedulable", "pg2": "Unschedulable"},
        composites=["cpg-root"],
    )
    sc.delete("blocker")
    sc.settle()
    sc.assert_scheduled(*names("pg1", 2), *names("pg2", 2))
    assert_conditions(
        sc,
        {"cpg-root": "Scheduled", "pg1": "Scheduled", "pg2": "Scheduled"},
        composites=["cpg-root"],
    )


def test_cpg_status_conditions_hierarchical_diagnostics() -> None:
    """cpg_test.go TestCPGScheduling: TestCPGStatusConditions_HierarchicalDiagnostics: each
    level says why, with kube-scheduler's words: its own minGroupCount or minCount failure, or
    its parent's ("parent composite pod group ...") or a higher ancestor's ("ancestor ...")."""
    sc = Scenario()
    sc.create(
        node("node1", cpu="4"),
        cpg("cpg-root", 2),
        cpg("cpg-sub1", 2, "cpg-root"),
        cpg("cpg-sub2", 2, "cpg-root"),
        pg("pg1", 2, "cpg-sub1"),
        pg("pg2", 2, "cpg-sub1"),
        pg("pg3", 2, "cpg-sub2"),
        pg("pg4", 2, "cpg-sub2"),
    )
    sc.create(
        pods("pg1", "1", "1"),
        pods("pg2", "100", "100"),
        pods("pg3", "1", "1"),
        pods("pg4", "1", "1"),
    )
    sc.settle()
    sc.assert_unschedulable(*(n for g in ("pg1", "pg2", "pg3", "pg4") for n in names(g, 2)))
    root_why = "minGroupCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    sub1_why = "minGroupCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
    expected = {
        ("cpg-root", CPG_CONDITION): root_why,
        ("cpg-sub1", CPG_CONDITION): sub1_why,
        (
            "pg1",
            PG_CONDITION,
        ): f'parent composite pod group "cpg-sub1" is unschedulable: {sub1_why}',
        ("pg2", PG_CONDITION): "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining",
        ("cpg-sub2", CPG_CONDITION): (
            'parent composite pod group "cpg-root" is unschedulable: cpg-root'
        ),
        ("pg3", PG_CONDITION): 'ancestor composite pod group "cpg-root" is unschedulable',
        ("pg4", PG_CONDITION): 'ancestor composite pod group "cpg-root" is unschedulable',
    }
    for (name, type_), text in expected.items():
        found = condition(sc, name, type_)
        assert (found["status"], found["reason"]) == ("False", "Unschedulable"), (name, found)
        if name == "cpg-sub2":
            assert 'parent composite pod group "cpg-root" is unschedulable' in found["message"]
            assert root_why in found["message"], found
            continue
        assert text in found["message"], (name, found["message"])
    for name in ("pg3", "pg4"):
        assert root_why in condition(sc, name, PG_CONDITION)["message"]
