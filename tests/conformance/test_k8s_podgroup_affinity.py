"""kube-scheduler's test/integration/scheduler/podgroup/podgroup_affinity_test.go, ported.

Upstream cluster: nodes of 2 CPUs; the gang pg (minCount 2, priority 200); "anti-pod" (app=foo,
pinned to node-1 by nodeSelector, required anti-affinity against app=foo on the hostname) is
created before "plain-pod" (app=foo, no affinity of its own). Both request 1 CPU. Upstream runs
each case with and without the CompositePodGroup gates; the outcome is the same, so one case each.
"""

from __future__ import annotations

from tests.conformance.harness import (
    HOSTNAME,
    Manifest,
    Scenario,
    node,
    pod,
    upstream_group,
    workload,
)

SOURCE = "kube-scheduler `test/integration/scheduler/podgroup/podgroup_affinity_test.go`"


def group_and_pods() -> list[Manifest]:
    anti = pod(
        "anti-pod",
        cpu="1",
        priority=200,
        pod_group="pg",
        labels={"app": "foo"},
        spec={
            "nodeSelector": {HOSTNAME: "node-1"},
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "foo"}}}
                    ]
                }
            },
        },
    )
    plain = pod("plain-pod", cpu="1", priority=200, pod_group="pg", labels={"app": "foo"})
    return [
        upstream_group("pg", min_count=2, priority=200, template=("workload", "t")),
        anti,
        plain,
    ]


def test_anti_affinity_honored_across_the_cycle_on_a_multi_topology_cluster() -> None:
    """podgroup_affinity_test.go TestPodGroupSchedulingWithPodAntiAffinity: anti-affinity honored across the cycle on a multi-topology cluster."""
    sc = Scenario()
    sc.create(node("node-1", cpu="2"), node("node-2", cpu="2"), workload("workload", ("t", 2)))
    sc.create(group_and_pods())
    sc.settle()
    sc.assert_scheduled("anti-pod", "plain-pod")
    sc.assert_nodes({"anti-pod": "node-1", "plain-pod": "node-2"})


def test_anti_affinity_keeps_the_group_unschedulable_on_a_single_topology_cluster() -> None:
    """podgroup_affinity_test.go TestPodGroupSchedulingWithPodAntiAffinity: anti-affinity keeps the group unschedulable on a single-topology cluster."""
    sc = Scenario()
    sc.create(node("node-1", cpu="2"), workload("workload", ("t", 2)))
    sc.create(group_and_pods())
    sc.settle()
    sc.assert_unschedulable("anti-pod", "plain-pod")
    sc.assert_group_unschedulable("pg")
