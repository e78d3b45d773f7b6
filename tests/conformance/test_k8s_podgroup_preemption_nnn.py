"""kube-scheduler's test/integration/scheduler/preemption/podgroup/podgrouppreemption_nominatednodename_test.go.

TestPodGroupPreemption_ClearingNominatedNodeNameAfterBinding: a preemptor is nominated to the
node its victims free, and the nomination is cleared when it binds. Upstream runs each row with
the ClearingNominatedNodeNameAfterBinding gate on and off and with async preemption on and off;
gangsched always clears the nomination with the bind, which is the gate-on variant, and
preemption timing does not change the outcome, so one case per row.
"""

from __future__ import annotations

from tests.conformance.harness import (
    Manifest,
    Scenario,
    composite_group,
    node,
    pod,
    preemption_case,
    upstream_group,
)

SOURCE = "kube-scheduler `test/integration/scheduler/preemption/podgroup/podgrouppreemption_nominatednodename_test.go`"
HIGHS = ["high-1", "high-2", "high-3"]
LOWS = ["low-1", "low-2", "low-3"]


def lows() -> list[Manifest]:
    return [pod(name, cpu="1", priority=10) for name in LOWS]


def assert_nomination_cleared_on_bind(sc: Scenario, names: list[str]) -> None:
    """Each pod got a nominated node, and the step that bound it cleared the nomination."""
    cleared: set[str] = set()
    for outcome in sc.outcomes:
        for step in outcome.raw["timeline"]:
            bound = {key.partition("/")[2] for key in step.get("bound", {})}
            nominations = step.get("nominated", {})
            for key, value in nominations.items():
                name = key.partition("/")[2]
                if name in bound and value is None:
                    cleared.add(name)
    assert sorted(cleared & set(names)) == sorted(names), (
        f"nomination kept after binding: {sorted(set(names) - cleared)}"
    )


def _full(group: Manifest, strategy: list[str], groups: list[Manifest] | None = None) -> None:
    sc = preemption_case(
        args=strategy,
        nodes=[node("node1", cpu="3", memory="4Gi")],
        groups=groups or [group],
        initial=lows(),
        preemptors=[
            pod(
                name,
                cpu="1",
                priority=100,
                pod_group=group["metadata"]["name"] if i < 2 or not groups else "pg2",
            )
            for i, name in enumerate(HIGHS)
        ],
        scheduled=HIGHS,
        candidates=LOWS,
        preempted=3,
        nominated=HIGHS,
    )
    assert_nomination_cleared_on_bind(sc, HIGHS)


def test_full_podgroup_preemption_clears_nominated_node_name_after_binding(
    strategy: list[str],
) -> None:
    """podgrouppreemption_nominatednodename_test.go TestPodGroupPreemption_ClearingNominatedNodeNameAfterBinding: Full PodGroup Preemption."""
    _full(upstream_group("pg1", min_count=3, priority=100), strategy)


def test_full_basic_podgroup_preemption_clears_nominated_node_name_after_binding(
    strategy: list[str],
) -> None:
    """podgrouppreemption_nominatednodename_test.go TestPodGroupPreemption_ClearingNominatedNodeNameAfterBinding: Full PodGroup Preemption for basic policy."""
    _full(upstream_group("pg1", priority=100), strategy)


def test_cpg_preempt_lower_priority_clears_nominated_node_name_after_binding(
    strategy: list[str],
) -> None:
    """podgrouppreemption_nominatednodename_test.go TestPodGroupPreemption_ClearingNominatedNodeNameAfterBinding: CPG with PreemptLowerPriority Policy."""
    root = composite_group("cpg1", priority=100, template=("wl1", "t1"))
    root["spec"]["preemptionPolicy"] = "PreemptLowerPriority"
    leaves = [
        upstream_group(
            name,
            min_count=count,
            priority=100,
            parent="cpg1",
            template=("wl1", "t1"),
            preemption_policy="PreemptLowerPriority",
        )
        for name, count in (("pg1", 2), ("pg2", 1))
    ]
    _full(leaves[0], strategy, groups=[root, *leaves])
