"""kube-scheduler's podgrouppreemption_test.go, the TestPodGroupPreemption rows where the pods'
own constraints shape the preemption: node resources and the reprieval order, pod-level
resources, pod anti-affinity, host ports, topology spreading, binding before preempting, and
victim-aware scoring. Same runner and strategies as test_k8s_podgroup_preemption.py (whose
docstring says how the rows are ported)."""

from __future__ import annotations

from typing import Any

from tests.conformance.harness import (
    HOSTNAME,
    Manifest,
    preemption_case,
)
from tests.conformance.podgroup_preemption import highs, lows, n, p, pg

SOURCE = (
    "kube-scheduler `test/integration/scheduler/preemption/podgroup/podgrouppreemption_test.go`"
    " (TestPodGroupPreemption: resources, affinity, ports, spreading, binding first, victim-aware scoring)"
)


def two_nodes(cpu: str) -> list[Manifest]:
    return [n("node1", cpu, {HOSTNAME: "node1"}), n("node2", cpu, {HOSTNAME: "node2"})]


def test_gang_preemption_with_node_resources(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Gang scheduling: preemption with node resources."""
    preemption_case(
        args=strategy,
        nodes=two_nodes("2"),
        groups=[pg("preemptor-pg", 100, 2)],
        initial=[p("initial-pod", "2", 10, on="node1", labels={"app": "initial"})],
        preemptors=[p(f"preemptor-{i}", "2", 100, "preemptor-pg") for i in (1, 2)],
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
        nominated=["preemptor-1", "preemptor-2"],
    )


def test_gang_preemption_prioritizes_reprieval_of_higher_priority_pods(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Gang scheduling: preemption with node resources, prioritizes reprieval of higher priority pods."""
    preemption_case(
        args=strategy,
        nodes=two_nodes("2"),
        groups=[pg("preemptor-pg", 100, 2)],
        initial=[
            p("initial-pod-1", "1", 5, on="node1", labels={"app": "initial"}),
            p("initial-pod-2", "1", 10, on="node1", labels={"app": "initial"}),
        ],
        preemptors=[
            p(
                f"preemptor-{i}",
                "1",
                100,
                "preemptor-pg",
                spec={"nodeSelector": {HOSTNAME: f"node{i}"}},
            )
            for i in (1, 2)
        ],
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod-1"],
        preempted=1,
        nominated=["preemptor-1", "preemptor-2"],
    )


def anti_affinity_on_app() -> dict[str, Any]:
    """Required anti-affinity against any pod with an "app" label, per hostname."""
    term = {
        "topologyKey": HOSTNAME,
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    }
    return {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    }


def test_gang_preemption_with_pod_level_resources(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Gang scheduling: preemption with pod level resources."""
    preemptors = [
        p(
            f"preemptor-{i}",
            None,
            100,
            "preemptor-pg",
            pod_level={"cpu": "2"},
            spec=anti_affinity_on_app(),
        )
        for i in (1, 2)
    ]
    preemption_case(
        args=strategy,
        nodes=two_nodes("2"),
        groups=[pg("preemptor-pg", 100, 2)],
        initial=[
            p(
                "initial-pod",
                None,
                10,
                on="node1",
                labels={"app": "initial"},
                pod_level={"cpu": "2"},
            )
        ],
        preemptors=preemptors,
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
        nominated=["preemptor-1", "preemptor-2"],
    )


def test_gang_preemption_with_pod_anti_affinity_constraints(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Gang scheduling: preemption with pod anti-affinity constraints."""
    preemptors = [
        p(f"preemptor-{i}", "1.5", 100, "preemptor-pg", spec=anti_affinity_on_app()) for i in (1, 2)
    ]
    preemption_case(
        args=strategy,
        nodes=two_nodes("2"),
        groups=[pg("preemptor-pg", 100, 2)],
        initial=[p("initial-pod", "0.25", 10, on="node1", labels={"app": "initial"})],
        preemptors=preemptors,
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
        nominated=["preemptor-1", "preemptor-2"],
    )


def test_gang_preemption_with_pod_node_port(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Gang scheduling: preemption with pod node port."""
    preemptors = [
        p(f"preemptor-{i}", "1.5", 100, "preemptor-pg", host_ports=[8080]) for i in (1, 2)
    ]
    preemption_case(
        args=strategy,
        nodes=[n("node1", "2"), n("node2", "2")],
        groups=[pg("preemptor-pg", 100, 2)],
        initial=[p("initial-pod", "0.25", 10, on="node1", host_ports=[8080])],
        preemptors=preemptors,
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
        nominated=["preemptor-1", "preemptor-2"],
    )


def spread_on_node1(name: str) -> Manifest:
    """app=foo, pinned to node1, at most skew 2 per hostname with minDomains 10."""
    constraint = {
        "maxSkew": 2,
        "topologyKey": HOSTNAME,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "foo"}},
        "minDomains": 10,
    }
    return p(
        name,
        "1",
        100,
        "preemptor-pg",
        labels={"app": "foo"},
        spec={"nodeSelector": {HOSTNAME: "node1"}, "topologySpreadConstraints": [constraint]},
    )


def test_gang_preemption_with_pod_topology_spread_constraints(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Gang scheduling: preemption with pod topology spread constraints."""
    preemption_case(
        args=strategy,
        nodes=two_nodes("16"),
        groups=[pg("preemptor-pg", 100, 2)],
        initial=[p("initial-pod", "1", 10, on="node1", labels={"app": "foo"})],
        preemptors=[spread_on_node1("preemptor-1"), spread_on_node1("preemptor-2")],
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
        nominated=["preemptor-1", "preemptor-2"],
    )


def test_gang_preemption_with_pod_topology_spread_single_reprieve(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Gang scheduling: preemption with pod topology spread constraints, single reprieve."""
    preemption_case(
        args=strategy,
        nodes=two_nodes("16"),
        groups=[pg("preemptor-pg", 100, 2)],
        initial=[
            p("initial-pod", "1", 10, on="node1", labels={"app": "foo"}),
            p("initial-pod-2", "1", 5, on="node2", labels={"app": "foo"}),
        ],
        preemptors=[spread_on_node1("preemptor-1"), spread_on_node1("preemptor-2")],
        scheduled=["preemptor-1", "preemptor-2"],
        candidates=["initial-pod"],
        preempted=1,
        nominated=["preemptor-1", "preemptor-2"],
    )


def _binding_first(group: Manifest, strategy: list[str]) -> None:
    sc = preemption_case(
        args=strategy,
        nodes=[n("node1", "4")],
        groups=[group],
        initial=[p("pg-pod-1", "1", 100, "pg1"), p("pg-pod-2", "1", 100, "pg1"), *lows(1)],
        preemptors=highs(2),
        scheduled=["pg-pod-1", "pg-pod-2", "high-1", "high-2"],
        candidates=["low-1"],
        preempted=1,
        regroup=True,
    )
    # Upstream's event order: Bind high-1, then the group's PostFilter (preemption), then
    # Bind high-2: what fits binds before anything is preempted for the rest.
    events: list[str] = []
    for outcome in sc.outcomes:
        for step in outcome.raw["timeline"]:
            events += [f"Bind:{key.partition('/')[2]}" for key in step.get("bound", {})]
            if step.get("preempted"):
                events.append(f"Preempt:{step['gang']}")
    order = [
        event
        for event in events
        if event in {"Bind:high-1", "Bind:high-2"} or event.startswith("Preempt:")
    ]
    assert order == ["Bind:high-1", "Preempt:default/pg1", "Bind:high-2"], order


def test_binding_first_before_preemption_for_gang_policy(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Binding first before preemption for gang policy."""
    _binding_first(pg("pg1", 100, 2), strategy)


def test_binding_first_before_preemption_for_basic_policy(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Binding first before preemption for basic policy."""
    _binding_first(pg("pg1", 100), strategy)


def test_victim_aware_scoring_reuses_capacity_freed_across_nodes_by_an_all_mode_group(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Victim-aware scoring: reuse capacity freed across nodes by DisruptionModeAll PodGroup victim."""
    preemption_case(
        args=strategy,
        nodes=[n(f"node{i}", "2") for i in range(1, 4)],
        groups=[pg("pg-preemptor", 100, 2), pg("pg-victim", 10, 2, mode="all")],
        initial=[
            p("v-pg1-1", "2", 10, "pg-victim", on="node1"),
            p("v-pg1-2", "2", 10, "pg-victim", on="node2"),
            p("v-high", "2", 20, on="node3"),
        ],
        preemptors=[p("p1", "2", 100, "pg-preemptor"), p("p2", "2", 100, "pg-preemptor")],
        scheduled=["p1", "p2", "v-high"],
        candidates=["v-pg1-1", "v-pg1-2"],
        preempted=2,
        nominated=["p1", "p2"],
    )


def test_victim_aware_scoring_reuses_leftover_capacity_of_a_large_victim(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Victim-aware scoring: reuse leftover capacity from large victim on same node."""
    preemption_case(
        args=strategy,
        nodes=[n("node1", "4"), n("node2", "4")],
        groups=[pg("pg-preemptor", 100, 2), pg("pg-victim", 10, 2, mode="all")],
        initial=[
            p("v-large", "4", 10, on="node1"),
            p("v-med-1", "2", 10, "pg-victim", on="node2"),
            p("v-med-2", "2", 10, "pg-victim", on="node2"),
        ],
        preemptors=[p("p1", "2", 100, "pg-preemptor"), p("p2", "2", 100, "pg-preemptor")],
        scheduled=["p1", "p2", "v-med-1", "v-med-2"],
        candidates=["v-large"],
        preempted=1,
        nominated=["p1", "p2"],
    )
