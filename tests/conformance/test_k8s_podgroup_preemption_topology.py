"""kube-scheduler's podgrouppreemption_test.go, the TestPodGroupPreemption rows of topology-aware
preemption: a gang with a topology key preempts within one domain (core/topology/). Same
runner and strategies as test_k8s_podgroup_preemption.py."""

from __future__ import annotations

from tests.conformance.harness import (
    HOSTNAME,
    Manifest,
    Scenario,
    preemption_case,
)
from tests.conformance.podgroup_preemption import highs, n, names, p, pg

SOURCE = (
    "kube-scheduler `test/integration/scheduler/preemption/podgroup/podgrouppreemption_test.go`"
    " (TestPodGroupPreemption: topology-aware preemption)"
)


def zones(*zone_of_node: str) -> list[Manifest]:
    return [n(f"node{i}", "1", {"topology-key": zone}) for i, zone in enumerate(zone_of_node, 1)]


def tas_group() -> Manifest:
    return pg("pg1", 100, 2, topology_key="topology-key")


def test_topology_aware_preemption_single_topology_domain(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Topology-Aware Preemption: single topology domain."""
    sc = preemption_case(
        args=strategy,
        nodes=zones("zone1", "zone1"),
        groups=[tas_group()],
        initial=[p("low-1", "1", 10, on="node1"), p("low-2", "1", 10, on="node2")],
        preemptors=highs(2),
        scheduled=names("high", 2),
        candidates=names("low", 2),
        preempted=2,
        nominated=names("high", 2),
        regroup=True,
    )
    _assert_topology_understood(sc)


def test_topology_aware_preemption_two_topologies_only_one_eligible(strategy: list[str]) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Topology-Aware Preemption: two topologies, only one eligible."""
    sc = preemption_case(
        args=strategy,
        nodes=zones("zone1", "zone1", "zone2", "zone2"),
        groups=[tas_group()],
        initial=[
            p("low-1", "1", 10, on="node1"),
            p("low-2", "1", 10, on="node2"),
            p("high-priority-initial-1", "1", 200, on="node3"),
            p("high-priority-initial-2", "1", 200, on="node4"),
        ],
        preemptors=highs(2),
        scheduled=[*names("high", 2), "high-priority-initial-1", "high-priority-initial-2"],
        candidates=names("low", 2),
        preempted=2,
        nominated=names("high", 2),
        regroup=True,
    )
    _assert_topology_understood(sc)


def test_topology_aware_preemption_two_topologies_selects_higher_scored(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Topology-Aware Preemption: two topologies, both eligible, selects higher scored topology (upstream's preset score favours node3 and node4; here a preferred node affinity on the preemptors)."""
    prefer = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {"key": HOSTNAME, "operator": "In", "values": ["node3", "node4"]}
                            ]
                        },
                    }
                ]
            }
        }
    }
    sc = preemption_case(
        args=strategy,
        nodes=zones("zone1", "zone1", "zone2", "zone2"),
        groups=[tas_group()],
        initial=[p(f"low-{i}", "1", 10, on=f"node{i}") for i in range(1, 5)],
        preemptors=highs(2, spec=prefer),
        scheduled=[*names("high", 2), "low-1", "low-2"],
        candidates=["low-3", "low-4"],
        preempted=2,
        nominated=names("high", 2),
        regroup=True,
    )
    _assert_topology_understood(sc)


def test_topology_aware_preemption_insufficient_capacity_in_every_topology(
    strategy: list[str],
) -> None:
    """podgrouppreemption_test.go TestPodGroupPreemption: Topology-Aware Preemption: insufficient capacity across all topologies, no preemption performed."""
    preemption_case(
        args=strategy,
        nodes=zones("zone1", "zone1", "zone2", "zone2"),
        groups=[tas_group()],
        initial=[
            p("low-1", "1", 10, on="node1"),
            p("high-priority-initial-1", "1", 200, on="node2"),
            p("low-2", "1", 10, on="node3"),
            p("high-priority-initial-2", "1", 200, on="node4"),
        ],
        preemptors=highs(2),
        scheduled=["low-1", "low-2", "high-priority-initial-1", "high-priority-initial-2"],
        regroup=True,
    )


def _assert_topology_understood(sc: Scenario) -> None:
    """The group's two pods share one topology-key value."""
    zone_of = {
        raw["metadata"]["name"]: raw["metadata"]["labels"].get("topology-key")
        for (_, kind, _, _), raw in sc.objects.items()
        if kind == "Node"
    }
    placed = {zone_of[str(sc.node_of(name))] for name in ("high-1", "high-2")}
    assert len(placed) == 1, placed
