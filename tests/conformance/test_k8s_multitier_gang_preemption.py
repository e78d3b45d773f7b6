"""kube-scheduler's test/integration/scheduler/preemption/podgroup/multitier_gang_preemption_test.go.

Preemption across CompositePodGroup hierarchies (nested disruption modes, partial gangs, broken
references; gangsched.core.composite, issue 20). Nodes have 2 CPUs and 4 GiB; each case runs
under both preemption strategies.
"""

from __future__ import annotations

from typing import Any

from tests.conformance.harness import (
    HOSTNAME,
    Manifest,
    Scenario,
    composite_group,
    node,
    pod,
    preemption_case,
    upstream_group,
)

SOURCE = "kube-scheduler `test/integration/scheduler/preemption/podgroup/multitier_gang_preemption_test.go`"


def nodes(count: int) -> list[Manifest]:
    return [
        node(f"node{i}", cpu="2", memory="4Gi", labels={HOSTNAME: f"node{i}"})
        for i in range(1, count + 1)
    ]


def cpg(
    name: str,
    priority: int,
    mode: str | None = None,
    parent: str | None = None,
    *,
    workload: str = "wl-victim",
    min_groups: int | None = None,
) -> Manifest:
    return composite_group(
        name,
        priority=priority,
        disruption_mode=mode,
        parent=parent,
        template=(workload, "t1"),
        min_group_count=min_groups,
    )


def pg(
    name: str,
    priority: int,
    min_count: int,
    parent: str | None = None,
    mode: str | None = None,
    *,
    workload: str = "wl-victim",
) -> Manifest:
    return upstream_group(
        name,
        min_count=min_count,
        priority=priority,
        parent=parent,
        disruption_mode=mode,
        template=(workload, "t1") if parent else None,
    )


def p(
    name: str,
    cpu: str,
    priority: int,
    group: str | None = None,
    on: str | None = None,
    *,
    pin: str | None = None,
) -> Manifest:
    extra: dict[str, Any] = {"spec": {"nodeSelector": {HOSTNAME: pin}}} if pin else {}
    return pod(name, cpu=cpu, priority=priority, pod_group=group, node_name=on, **extra)


def preemptor_groups() -> list[Manifest]:
    return [
        cpg("cpg-preemptor", 100, "single", workload="wl-preemptor"),
        pg("pg-preemptor", 100, 1, "cpg-preemptor", workload="wl-preemptor"),
    ]


def test_three_tier_intermediate_all_mode_evicts_only_its_subtree(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestMultiTierCompositePodGroupPreemption_NestedDisruptionModes: 3-Tier Hierarchy: Intermediate CPG has DisruptionModeAll, Root CPG and Leaf PGs have DisruptionModeSingle - only intermediate subtree is evicted."""
    preemption_case(
        args=strategy,
        nodes=nodes(3),
        groups=[
            cpg("cpg-root", 10, "single"),
            cpg("cpg-mid-a", 10, "all", "cpg-root"),
            cpg("cpg-mid-b", 10, "single", "cpg-root"),
            pg("pg-a1", 10, 1, "cpg-mid-a", "single"),
            pg("pg-a2", 10, 1, "cpg-mid-a", "single"),
            pg("pg-b1", 10, 1, "cpg-mid-b", "single"),
        ],
        initial=[
            p("victim-a1", "2", 10, "pg-a1", "node1"),
            p("victim-a2", "2", 10, "pg-a2", "node2"),
            p("victim-b1", "2", 10, "pg-b1", "node3"),
        ],
        preemptors=[*preemptor_groups(), p("preemptor-1", "2", 100, "pg-preemptor", pin="node1")],
        scheduled=["preemptor-1", "victim-b1"],
        candidates=["victim-a1", "victim-a2"],
        preempted=2,
    )


def test_three_tier_leaf_all_mode_evicts_only_the_leaf_group(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestMultiTierCompositePodGroupPreemption_NestedDisruptionModes: 3-Tier Hierarchy: Leaf PG has DisruptionModeAll, Root CPG and Mid CPG have DisruptionModeSingle - only leaf PG pods are evicted."""
    preemption_case(
        args=strategy,
        nodes=nodes(3),
        groups=[
            cpg("cpg-root", 10, "single"),
            cpg("cpg-mid-a", 10, "single", "cpg-root"),
            cpg("cpg-mid-b", 10, "single", "cpg-root"),
            pg("pg-a1", 10, 2, "cpg-mid-a", "all"),
            pg("pg-a2", 10, 1, "cpg-mid-a", "single"),
            pg("pg-b1", 10, 1, "cpg-mid-b", "single"),
        ],
        initial=[
            p("victim-a1-1", "1", 10, "pg-a1", "node1"),
            p("victim-a1-2", "1", 10, "pg-a1", "node2"),
            p("victim-a2-1", "1", 10, "pg-a2", "node2"),
            p("victim-filler-1", "1", 10, None, "node1"),
            p("victim-b1", "2", 10, "pg-b1", "node3"),
        ],
        preemptors=[*preemptor_groups(), p("preemptor-1", "2", 100, "pg-preemptor", pin="node1")],
        scheduled=["preemptor-1", "victim-a2-1", "victim-b1"],
        candidates=["victim-a1-1", "victim-a1-2", "victim-filler-1"],
        preempted=3,
    )


def test_three_tier_root_all_mode_evicts_the_whole_tree(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestMultiTierCompositePodGroupPreemption_NestedDisruptionModes: 3-Tier Hierarchy: Root CPG has DisruptionModeAll, Mid CPGs and Leaf PGs have DisruptionModeSingle - entire 3-tier tree is evicted atomically."""
    preemption_case(
        args=strategy,
        nodes=nodes(2),
        groups=[
            cpg("cpg-root", 10, "all"),
            cpg("cpg-mid-a", 10, "single", "cpg-root"),
            cpg("cpg-mid-b", 10, "single", "cpg-root"),
            pg("pg-a1", 10, 1, "cpg-mid-a", "single"),
            pg("pg-b1", 10, 1, "cpg-mid-b", "single"),
        ],
        initial=[
            p("victim-a1", "2", 10, "pg-a1", "node1"),
            p("victim-b1", "2", 10, "pg-b1", "node2"),
        ],
        preemptors=[*preemptor_groups(), p("preemptor-1", "2", 100, "pg-preemptor", pin="node1")],
        scheduled=["preemptor-1"],
        candidates=["victim-a1", "victim-b1"],
        preempted=2,
    )


def test_partial_podgroup_gang_preemption_evicts_only_for_min_count(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestPartialGangPreemption_PodGroupAndCompositePodGroup: Partial PodGroup Gang Preemption: MinCount=2 with 3 preemptor pods, 3rd pod cannot fit - only victims for MinCount are evicted."""
    preemption_case(
        args=strategy,
        nodes=nodes(3),
        groups=[pg(f"pg-victim-{i}", 10, 1) for i in (1, 2, 3)],
        initial=[p(f"victim-{i}", "2", 10, f"pg-victim-{i}", f"node{i}") for i in (1, 2, 3)],
        preemptors=[
            pg("pg-preemptor-gang", 100, 2),
            p("preemptor-1", "2", 100, "pg-preemptor-gang", pin="node1"),
            p("preemptor-2", "2", 100, "pg-preemptor-gang", pin="node2"),
            p("preemptor-3", "2", 100, "pg-preemptor-gang", pin="node1"),
        ],
        scheduled=["preemptor-1", "preemptor-2", "victim-3"],
        candidates=["victim-1", "victim-2"],
        preempted=2,
        unschedulable=["preemptor-3"],
    )


def test_partial_compositepodgroup_gang_preemption_evicts_only_for_min_group_count(
    strategy: list[str],
) -> None:
    """multitier_gang_preemption_test.go TestPartialGangPreemption_PodGroupAndCompositePodGroup: Partial CompositePodGroup Gang Preemption: MinGroupCount=1 with 2 child PGs, 2nd child PG cannot fit - only victims for MinGroupCount are evicted."""
    preemption_case(
        args=strategy,
        nodes=nodes(2),
        groups=[pg("pg-victim-1", 10, 1), pg("pg-victim-2", 10, 1)],
        initial=[
            p("victim-1", "2", 10, "pg-victim-1", "node1"),
            p("victim-2", "2", 10, "pg-victim-2", "node2"),
        ],
        preemptors=[
            cpg("cpg-preemptor-cgang", 100, workload="wl-preemptor-cg", min_groups=1),
            pg("pg-child-1", 100, 1, "cpg-preemptor-cgang", workload="wl-preemptor-cg"),
            pg("pg-child-2", 100, 2, "cpg-preemptor-cgang", workload="wl-preemptor-cg"),
            p("c-preemptor-1", "2", 100, "pg-child-1", pin="node1"),
            p("c-preemptor-2a", "2", 100, "pg-child-2", pin="node2"),
            p("c-preemptor-2b", "2", 100, "pg-child-2", pin="node2"),
        ],
        scheduled=["c-preemptor-1", "victim-2"],
        candidates=["victim-1"],
        preempted=1,
    )


def _broken_hierarchy(
    groups: list[Manifest], group: str, suffix: str, strategy: list[str]
) -> Scenario:
    sc = Scenario(args=strategy)
    sc.create(nodes(1), groups, p(f"victim-{suffix}", "2", 10, group, "node1"))
    sc.settle()
    sc.assert_scheduled(f"victim-{suffix}")
    sc.create(p(f"preemptor-{suffix}-test", "2", 100))
    sc.settle()
    sc.assert_scheduled(f"preemptor-{suffix}-test")
    sc.assert_removed(f"victim-{suffix}")
    return sc


def test_cyclic_compositepodgroup_references_during_preemption(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestCompositePodGroupPreemption_CyclicReferencesAndEdgeCases: Cyclic CompositePodGroup references during preemption dry-run ancestor traversal."""
    groups = [
        cpg("cpg-cycle-a", 10, parent="cpg-cycle-b", workload="wl-cycle"),
        cpg("cpg-cycle-b", 10, parent="cpg-cycle-a", workload="wl-cycle"),
        pg("pg-cyclic", 10, 1, "cpg-cycle-a", workload="wl-cycle"),
    ]
    sc = _broken_hierarchy(groups, "pg-cyclic", "cyclic", strategy)
    sc.create(p("independent-pod-1", "0", 50))
    sc.settle()
    sc.assert_scheduled("independent-pod-1")


def test_multi_level_loop_in_compositepodgroup_hierarchy(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestCompositePodGroupPreemption_CyclicReferencesAndEdgeCases: Multi-level loop reference in CompositePodGroup hierarchy."""
    groups = [
        cpg("cpg-loop-1", 10, parent="cpg-loop-2", workload="wl-loop"),
        cpg("cpg-loop-2", 10, parent="cpg-loop-3", workload="wl-loop"),
        cpg("cpg-loop-3", 10, parent="cpg-loop-1", workload="wl-loop"),
        pg("pg-loop", 10, 1, "cpg-loop-1", workload="wl-loop"),
    ]
    _broken_hierarchy(groups, "pg-loop", "loop", strategy)


def test_self_referencing_compositepodgroup(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestCompositePodGroupPreemption_CyclicReferencesAndEdgeCases: Self-referencing CompositePodGroup handling."""
    groups = [
        cpg("cpg-self", 10, parent="cpg-self", workload="wl-self"),
        pg("pg-self", 10, 1, "cpg-self", workload="wl-self"),
    ]
    _broken_hierarchy(groups, "pg-self", "self", strategy)


def test_dangling_parent_reference_during_preemption(strategy: list[str]) -> None:
    """multitier_gang_preemption_test.go TestCompositePodGroupPreemption_CyclicReferencesAndEdgeCases: Dangling non-existent parent reference during preemption dry-run."""
    groups = [pg("pg-dangling", 10, 1, "cpg-nonexistent", workload="wl-dangling")]
    _broken_hierarchy(groups, "pg-dangling", "dangling", strategy)
