"""kube-scheduler's podgrouppreemption_test.go, TestCompositePodGroupPreemption.

Preemption where preemptors or victims sit under scheduling.k8s.io/v1alpha3 CompositePodGroups
(KEP-6012; gangsched.core.composite, issue 20). Each runs under both preemption strategies.
Where upstream registers a preset score plugin the case says so; as in TestPodGroupPreemption, the victims are forced by capacity.
Not ported: "Reserve plugins are called during preemption simulation, so second pod fails"
(a mock Reserve plugin; see tests/conformance/README.md).
"""

from __future__ import annotations

from typing import Any

from tests.conformance.harness import (
    HOSTNAME,
    Manifest,
    composite_group,
    node,
    pdb,
    pod,
    preemption_case,
    upstream_group,
)

SOURCE = "kube-scheduler `test/integration/scheduler/preemption/podgroup/podgrouppreemption_test.go` (TestCompositePodGroupPreemption)"


def n(name: str, cpu: str, *, hostname_label: bool = False) -> Manifest:
    return node(
        name, cpu=cpu, memory="4Gi", pods="32", labels={HOSTNAME: name} if hostname_label else None
    )


def cpg(
    name: str,
    priority: int,
    workload: str = "wl1",
    *,
    mode: str | None = None,
    parent: str | None = None,
    min_groups: int | None = None,
    policy: str | None = None,
    template: str = "t1",
) -> Manifest:
    raw = composite_group(
        name,
        min_group_count=min_groups,
        priority=priority,
        disruption_mode=mode,
        template=(workload, template),
        parent=parent,
    )
    if policy is not None:
        raw["spec"]["preemptionPolicy"] = policy
    return raw


def pg(
    name: str,
    priority: int,
    min_count: int | None,
    parent: str | None,
    workload: str = "wl1",
    *,
    mode: str | None = None,
    policy: str | None = None,
    template: str = "t1",
) -> Manifest:
    return upstream_group(
        name,
        min_count=min_count,
        priority=priority,
        parent=parent,
        template=(workload, template),
        disruption_mode=mode,
        preemption_policy=policy,
    )


def p(
    name: str,
    cpu: str,
    priority: int,
    group: str | None = None,
    on: str | None = None,
    **extra: Any,
) -> Manifest:
    return pod(name, cpu=cpu, priority=priority, pod_group=group, node_name=on, **extra)


def on_node1(name: str, cpu: str = "2") -> Manifest:
    return p(name, cpu, 100, spec={"nodeSelector": {HOSTNAME: "node1"}})


def lows(count: int, on: str | None = None) -> list[Manifest]:
    return [p(f"low-{i}", "1", 10, on=on) for i in range(1, count + 1)]


def test_cpg_partial_preemption(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Partial Preemption (upstream adds a preset score preferring node1; only low-1's node can make room anyway)."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2"), n("node2", "2")],
        groups=[cpg("cpg1", 100), pg("pg1", 100, 3, "cpg1")],
        initial=[p("low-1", "2", 10, on="node1"), p("low-2", "1", 10, on="node2")],
        preemptors=[p(f"high-{i}", "1", 100, "pg1") for i in (1, 2, 3)],
        scheduled=["high-1", "high-2", "high-3", "low-2"],
        candidates=["low-1"],
        preempted=1,
    )


def _victim_across_nodes(mode: str, strategy: list[str], *, preempted: list[str]) -> None:
    leaf_mode = None if mode == "all" else "single"
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2", hostname_label=True), n("node2", "2", hostname_label=True)],
        groups=[
            cpg("cpg1", 10, mode=mode),
            pg("pg1", 10, 2, "cpg1", mode=leaf_mode),
            pg("pg2", 10, 1, "cpg1", mode=leaf_mode),
        ],
        initial=[
            p("low-1", "1", 10, "pg1", on="node1"),
            p("low-2", "1", 10, "pg1", on="node2"),
            p("low-3", "1", 10, "pg2", on="node2"),
        ],
        preemptors=[on_node1("high-1")],
        scheduled=["high-1", *(name for name in ("low-2", "low-3") if name not in preempted)],
        candidates=preempted,
        preempted=len(preempted),
    )


def test_cpg_victim_across_multiple_nodes_disruption_mode_all(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Victim Across Multiple Nodes, CPG DisruptionModeAll."""
    _victim_across_nodes("all", strategy, preempted=["low-1", "low-2", "low-3"])


def test_cpg_victim_across_multiple_nodes_disruption_mode_single(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Victim Across Multiple Nodes, CPG DisruptionModeSingle."""
    _victim_across_nodes("single", strategy, preempted=["low-1"])


def test_cpg_preemption_aborted_if_victim_yields_insufficient_resources(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Preemption aborted if victim yields insufficient resources."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2")],
        groups=[cpg("cpg-victim", 10), pg("pg-victim", 10, 1, "cpg-victim")],
        initial=[p("low-pod", "1", 10, "pg-victim", on="node1")],
        preemptors=[p("high-preemptor", "3", 100)],
        scheduled=[],
        unschedulable=["high-preemptor"],
    )


def test_cpg_tie_breaking_podgroup_chosen_over_compositepodgroup(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Tie-Breaking: PodGroup chosen over CompositePodGroup."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2")],
        groups=[
            cpg("cpg-victim", 10, mode="all"),
            pg("pg-victim-standalone", 10, 1, None, "wl2"),
            pg("pg-victim-child", 10, 1, "cpg-victim"),
            pg("pg-preemptor", 100, 1, None, "wl3"),
        ],
        initial=[
            p("low-pg", "1", 10, "pg-victim-standalone", on="node1"),
            p("low-cpg", "1", 10, "pg-victim-child", on="node1"),
        ],
        preemptors=[p("high-preemptor", "1", 100, "pg-preemptor")],
        scheduled=["high-preemptor"],
        candidates=["low-pg"],
        preempted=1,
    )


def test_scheduler_targets_lower_priority_cpg_over_higher_priority_cpg(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: Scheduler targets lower-priority CPG over higher-priority CPG."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "3")],
        groups=[
            cpg("cpg-lower", 10),
            cpg("cpg-higher", 20, "wl2"),
            pg("pg-lower", 10, 1, "cpg-lower"),
            pg("pg-higher", 20, 1, "cpg-higher", "wl2"),
        ],
        initial=[
            p("lower-pod", "1", 10, "pg-lower", on="node1"),
            p("higher-pod", "1", 20, "pg-higher", on="node1"),
        ],
        preemptors=[p("high-preemptor", "2", 100)],
        scheduled=["high-preemptor", "higher-pod"],
        candidates=["lower-pod"],
        preempted=1,
    )


def _pdb_case(mode: str, strategy: list[str]) -> None:
    leaf_mode = "single" if mode == "single" else None
    if mode == "all":
        groups = [
            cpg("cpg-pdb", 10, mode="all"),
            cpg("cpg-no-pdb", 10, "wl2", mode="all"),
            pg("pg-pdb", 10, 2, "cpg-pdb"),
            pg("pg-no-pdb", 10, 1, "cpg-no-pdb", "wl2"),
        ]
    else:
        groups = [
            cpg("cpg-single", 10, mode="single"),
            pg("pg-pdb", 10, 2, "cpg-single", mode=leaf_mode),
            pg("pg-no-pdb", 10, 1, "cpg-single", mode=leaf_mode),
        ]
    preemption_case(
        args=strategy,
        nodes=[n("node1", "3")],
        groups=groups,
        pdbs=[pdb("pdb", match_labels={"app": "foo"}, min_available=2)],
        initial=[
            p("pod-pdb-1", "1", 10, "pg-pdb", on="node1", labels={"app": "foo"}),
            p("pod-pdb-2", "1", 10, "pg-pdb", on="node1", labels={"app": "foo"}),
            p("pod-no-pdb-1", "1", 10, "pg-no-pdb", on="node1"),
        ],
        preemptors=[p("high-preemptor", "1", 100)],
        scheduled=["high-preemptor", "pod-pdb-1", "pod-pdb-2"],
        candidates=["pod-no-pdb-1"],
        preempted=1,
    )


def test_pdb_violation_reprieves_the_entire_cpg_victim_all_mode(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: PDB Violation reprieves the entire CPG victim (DisruptionModeAll)."""
    _pdb_case("all", strategy)


def test_pdb_violation_reprieves_only_the_child_pg_single_mode(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: PDB Violation reprieves only the child PG (DisruptionModeSingle)."""
    _pdb_case("single", strategy)


def _nested(
    grandparent: str, parent_mode: str, pg2_parent: str, strategy: list[str], preempted: list[str]
) -> None:
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2", hostname_label=True), n("node2", "2", hostname_label=True)],
        groups=[
            cpg("cpg-grandparent", 10, mode=grandparent),
            cpg("cpg-parent", 10, mode=parent_mode, parent="cpg-grandparent"),
            pg("pg1", 10, 2, "cpg-parent", mode="single"),
            pg("pg2", 10, 1, pg2_parent, mode="single"),
        ],
        initial=[
            p("low-1", "1", 10, "pg1", on="node1"),
            p("low-2", "1", 10, "pg1", on="node2"),
            p("low-3", "1", 10, "pg2", on="node2"),
        ],
        preemptors=[on_node1("high-1")],
        scheduled=["high-1", *(name for name in ("low-3",) if name not in preempted)],
        candidates=preempted,
        preempted=len(preempted),
    )


def test_three_level_nested_cpg_resolves_disruption_mode_up_to_the_grandparent(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: 3-Level Nested CPG resolves DisruptionMode up to the grandparent."""
    _nested("all", "single", "cpg-parent", strategy, ["low-1", "low-2", "low-3"])


def test_hierarchical_disruption_mode_grandparent_single_parent_all(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: Hierarchical DisruptionMode - Grandparent Single, Parent All."""
    _nested("single", "all", "cpg-grandparent", strategy, ["low-1", "low-2"])


def test_cpg_default_preemption_policy_preempts(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG with default preemption policy performs preemption, with PodGroupPreemptionPolicy enabled."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "3")],
        groups=[cpg("cpg1", 100), pg("pg1", 100, 3, "cpg1")],
        initial=lows(3),
        preemptors=[p(f"high-{i}", "1", 100, "pg1") for i in (1, 2, 3)],
        scheduled=["high-1", "high-2", "high-3"],
        candidates=["low-1", "low-2", "low-3"],
        preempted=3,
    )


def _two_leaf_policy(policy: str, strategy: list[str], *, preempts: bool) -> None:
    preemptors = [
        p(name, "1", 100, group, preemption_policy=policy)
        for name, group in (("high-1", "pg1"), ("high-2", "pg1"), ("high-3", "pg2"))
    ]
    preemption_case(
        args=strategy,
        nodes=[n("node1", "3")],
        groups=[
            cpg("cpg1", 100, policy=policy),
            pg("pg1", 100, 2, "cpg1", policy=policy),
            pg("pg2", 100, 1, "cpg1", policy=policy),
        ],
        initial=lows(3),
        preemptors=preemptors,
        scheduled=["high-1", "high-2", "high-3"] if preempts else ["low-1", "low-2", "low-3"],
        candidates=["low-1", "low-2", "low-3"] if preempts else (),
        preempted=3 if preempts else 0,
        unschedulable=() if preempts else ["high-1", "high-2", "high-3"],
        nominated=["high-1", "high-2", "high-3"] if preempts else (),
    )


def test_cpg_with_preempt_never_policy(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG with PreemptNever Policy."""
    _two_leaf_policy("Never", strategy, preempts=False)


def test_cpg_with_preempt_lower_priority_policy(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG with PreemptLowerPriority Policy."""
    _two_leaf_policy("PreemptLowerPriority", strategy, preempts=True)


def _one_leaf_policy(policy: str, strategy: list[str], *, preempts: bool) -> None:
    name = "preempt-never" if policy == "Never" else "preempt-lower"
    preemptors = [
        p("high-1", "2", 100, f"pg-{name}", preemption_policy=policy),
        p("high-2", "1", 100, f"pg-{name}", preemption_policy=policy),
    ]
    preemption_case(
        args=strategy,
        nodes=[n("node1", "3")],
        groups=[
            cpg(f"cpg-{name}", 100, policy=policy),
            pg(f"pg-{name}", 100, 2, f"cpg-{name}", policy=policy),
        ],
        initial=lows(3, on="node1"),
        preemptors=preemptors,
        scheduled=["high-1", "high-2"] if preempts else ["low-1", "low-2", "low-3"],
        candidates=["low-1", "low-2", "low-3"] if preempts else (),
        preempted=3 if preempts else 0,
        unschedulable=() if preempts else ["high-1", "high-2"],
        nominated=["high-1", "high-2"] if preempts else (),
    )


def test_cpg_preemption_policy_preempt_never_prevents_preemption(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG PreemptionPolicy PreemptNever prevents preemption."""
    _one_leaf_policy("Never", strategy, preempts=False)


def test_cpg_preemption_policy_preempt_lower_priority_allows_preemption(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG PreemptionPolicy PreemptLowerPriority allows preemption."""
    _one_leaf_policy("PreemptLowerPriority", strategy, preempts=True)


def test_cpg_preempt_never_in_all_pods_does_not_preempt(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG with PreemptNever preemption policy in all pods does not perform preemption, with PodGroupPreemptionPolicy disabled."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "3")],
        groups=[cpg("cpg1", 100), pg("pg1", 100, 3, "cpg1")],
        initial=lows(3),
        preemptors=[p(f"high-{i}", "1", 100, "pg1", preemption_policy="Never") for i in (1, 2, 3)],
        scheduled=["low-1", "low-2", "low-3"],
        unschedulable=["high-1", "high-2", "high-3"],
    )


def _anti_affinity() -> dict[str, Any]:
    term = {
        "topologyKey": HOSTNAME,
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    }
    return {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    }


def test_cpg_gang_preemption_with_pod_anti_affinity_constraints(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Gang scheduling: preemption with pod anti-affinity constraints."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2", hostname_label=True), n("node2", "2", hostname_label=True)],
        groups=[cpg("preemptor-cpg", 100), pg("preemptor-pg", 100, 2, "preemptor-cpg")],
        initial=[p("initial-pod", "0.25", 10, on="node1", labels={"app": "initial"})],
        preemptors=[
            p(f"preemptor-{i}", "1.5", 100, "preemptor-pg", spec=_anti_affinity()) for i in (1, 2)
        ],
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
    )


def test_cpg_gang_preemption_with_pod_node_port(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Gang scheduling: preemption with pod node port."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2"), n("node2", "2")],
        groups=[cpg("preemptor-cpg", 100), pg("preemptor-pg", 100, 2, "preemptor-cpg")],
        initial=[p("initial-pod", "0.25", 10, on="node1", host_ports=[8080])],
        preemptors=[
            p(f"preemptor-{i}", "1.5", 100, "preemptor-pg", host_ports=[8080]) for i in (1, 2)
        ],
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
    )


def _binding_first(min_groups: int | None, strategy: list[str], *, regroup: bool) -> None:
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2"), n("node2", "2")],
        groups=[
            cpg("cpg-victim", 10, min_groups=min_groups),
            cpg("cpg-preemptor", 100, "wl2", min_groups=min_groups, template="t2"),
            pg("pg-victim", 10, 4, "cpg-victim"),
            pg("pg-preemptor", 100, 4, "cpg-preemptor", "wl2", template="t2"),
        ],
        initial=[
            p("low-1", "1", 10, "pg-victim", on="node1"),
            p("low-2", "1", 10, "pg-victim", on="node2"),
        ],
        preemptors=[p(f"high-{i}", "1", 100, "pg-preemptor") for i in (1, 2, 3, 4)],
        scheduled=["high-1", "high-2", "high-3", "high-4"],
        candidates=["low-1", "low-2"],
        preempted=2,
        regroup=regroup,
    )


def test_cpg_binding_first_before_preemption_for_gang_policy(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: Binding first before preemption for gang policy."""
    _binding_first(1, strategy, regroup=True)


def test_binding_first_before_preemption_for_cpg(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: Binding first before preemption for CPG."""
    _binding_first(None, strategy, regroup=False)


def test_cpg_missing_parent_reference_fallback(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestCompositePodGroupPreemption: CPG Missing Parent Reference Fallback."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2")],
        groups=[
            cpg("cpg-victim", 10),
            cpg("cpg-preemptor", 100, "wl2"),
            pg("pg-victim", 10, 2, "cpg-victim"),
            pg("pg-preemptor", 100, 2, "cpg-preemptor", "wl2"),
        ],
        initial=[
            p("low-1", "1", 10, "pg-victim", on="node1"),
            p("low-2", "1", 10, "pg-victim", on="node1"),
        ],
        preemptors=[p("high-1", "1", 100, "pg-preemptor"), p("high-2", "1", 100, "pg-preemptor")],
        scheduled=["high-1", "high-2"],
        candidates=["low-1", "low-2"],
        preempted=2,
        remove=[("CompositePodGroup", "cpg-victim")],
    )
