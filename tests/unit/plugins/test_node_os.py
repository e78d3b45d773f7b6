"""NodeOS: spec.os.name keeps a pod off nodes whose kubelet would refuse it."""

from __future__ import annotations

import numpy as np

from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE
from gangsched.core.plugins import build_framework
from gangsched.core.plugins.node_os import OS_LABEL, REASON, NodeOS
from gangsched.core.scheduler import Scheduler
from gangsched.core.status import Code
from tests.builders import cluster, gang_pods, group, node, pod


def nodes() -> list:  # type: ignore[type-arg]
    return [
        node("linux", labels={OS_LABEL: "linux"}),
        node("windows", labels={OS_LABEL: "windows"}),
        node("unlabelled"),
    ]


def test_only_nodes_of_another_os_are_filtered() -> None:
    windows = pod("w")
    windows.os_name = "windows"
    state = cluster(nodes(), [windows])
    snap = state.snapshot
    framework = build_framework()
    ctx = framework.context(windows, snap)
    feasible = [snap.nodes[int(i)].name for i in np.flatnonzero(framework.feasible(ctx, snap))]
    assert sorted(feasible) == ["unlabelled", "windows"]
    plugin = NodeOS()
    assert plugin.explain(ctx, snap, snap.index["linux"]) == [(REASON, Code.UNRESOLVABLE)]


def test_a_pod_without_os_is_not_filtered() -> None:
    plain = pod("p")
    state = cluster(nodes(), [plain])
    ctx = build_framework().context(plain, state.snapshot)
    assert not NodeOS().applies(ctx, state.snapshot)


def test_a_windows_gang_waits_rather_than_landing_on_linux() -> None:
    members = gang_pods("g", 2, cpu=1)
    for member in members:
        member.os_name = "windows"
    state = cluster([node("l1", labels={OS_LABEL: "linux"})], members, [group("g", 2)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == UNSCHEDULABLE
    assert f"1 {REASON}" in report.message
    state.upsert_node(node("w1", labels={OS_LABEL: "windows"}))
    sched.queue.cluster_changed(100.0)
    report = sched.step(100.0)
    assert report is not None and report.result == SCHEDULED
    assert {b.node for b in report.bound} == {"w1"}
