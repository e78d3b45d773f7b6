"""Resource scores: LeastAllocated spreads, MostAllocated packs, BalancedAllocation evens
out resources; pods that request nothing are scored as 100m CPU / 200Mi memory."""

from __future__ import annotations

import numpy as np
import pytest

from gangsched.core.framework import ScorePlugin
from gangsched.core.plugins import ScoringConfig, build_framework
from gangsched.core.plugins.allocation import DEFAULT_MEMORY, DEFAULT_MILLI_CPU
from gangsched.core.plugins.balanced_allocation import BalancedAllocation
from gangsched.core.plugins.least_allocated import LeastAllocated
from gangsched.core.plugins.most_allocated import MostAllocated
from gangsched.core.snapshot import Snapshot
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import snapshot

from .probe import context, scores

CPU_MEM = {"cpu": 1.0, "memory": 1.0}


def cluster() -> Snapshot:
    """Three 4-CPU / 8Gi nodes: empty, half used evenly, and CPU-heavy."""
    return snapshot(
        [
            make_node("empty", memory="8Gi"),
            make_node("half", memory="8Gi"),
            make_node("cpu-heavy", memory="8Gi"),
        ],
        [
            make_pod("h", node_name="half", cpu="2", memory="4Gi"),
            make_pod("c", node_name="cpu-heavy", cpu="3", memory="1Gi"),
        ],
    )


POD = make_pod(cpu="1", memory="2Gi")


def test_least_allocated_values_and_order() -> None:
    result = scores(LeastAllocated(CPU_MEM), POD, cluster())
    # empty: 1/4 CPU and 2/8 memory used afterwards -> 75 % free on both.
    assert result["empty"] == pytest.approx(75.0)
    # half: 3/4 and 6/8 -> 25 % free.
    assert result["half"] == pytest.approx(25.0)
    # cpu-heavy: 4/4 CPU and 3/8 memory -> (0 + 62.5) / 2.
    assert result["cpu-heavy"] == pytest.approx(31.25)
    assert sorted(result, key=result.__getitem__, reverse=True) == ["empty", "cpu-heavy", "half"]


def test_most_allocated_is_the_mirror_image() -> None:
    result = scores(MostAllocated(CPU_MEM), POD, cluster())
    assert result["empty"] == pytest.approx(25.0)
    assert result["half"] == pytest.approx(75.0)
    assert result["cpu-heavy"] == pytest.approx(68.75)


def test_balanced_allocation_prefers_even_use() -> None:
    result = scores(BalancedAllocation(CPU_MEM), POD, cluster())
    assert result["empty"] == pytest.approx(100.0)
    assert result["half"] == pytest.approx(100.0)
    # cpu-heavy: fractions 1.0 and 0.375 -> std 0.3125.
    assert result["cpu-heavy"] == pytest.approx(68.75)


def test_resource_weights() -> None:
    weights = {"cpu": 3.0, "memory": 1.0}
    result = scores(LeastAllocated(weights), POD, cluster())
    assert result["cpu-heavy"] == pytest.approx((0.0 * 3 + 62.5) / 4)
    assert result["empty"] == pytest.approx(75.0)


@pytest.mark.parametrize(
    "plugin", [LeastAllocated(CPU_MEM), MostAllocated(CPU_MEM), BalancedAllocation(CPU_MEM)]
)
def test_best_effort_pods_score_as_default_requests(plugin: ScorePlugin) -> None:
    snap = snapshot([make_node("n", cpu="1", memory="1Gi")])
    best_effort = scores(plugin, make_pod(cpu=None, memory=None), snap)
    as_default = scores(plugin, make_pod(cpu=f"{DEFAULT_MILLI_CPU}m", memory=DEFAULT_MEMORY), snap)
    assert best_effort == pytest.approx(as_default)


def test_best_effort_values() -> None:
    snap = snapshot([make_node("n", cpu="1", memory="1Gi")])
    cpu_free, memory_free = 1 - 0.1, 1 - 200 / 1024
    assert scores(LeastAllocated(CPU_MEM), make_pod(cpu=None, memory=None), snap)[
        "n"
    ] == pytest.approx((cpu_free + memory_free) * 50)


def test_best_effort_pods_still_spread() -> None:
    """Without the defaults every node would score 100 for a best-effort pod."""
    snap = snapshot(
        [make_node("a", cpu="1", memory="1Gi"), make_node("b", cpu="1", memory="1Gi")],
        [make_pod("x", node_name="a", cpu="500m", memory="512Mi")],
    )
    result = scores(LeastAllocated(CPU_MEM), make_pod(cpu=None, memory=None), snap)
    assert result["b"] > result["a"]


def test_zero_request_only_in_one_resource_gets_the_default_for_that_one() -> None:
    snap = snapshot([make_node("n", cpu="1", memory="1Gi")])
    result = scores(LeastAllocated(CPU_MEM), make_pod(cpu="500m", memory=None), snap)
    assert result["n"] == pytest.approx((0.5 + (1 - 200 / 1024)) * 50)


@pytest.mark.parametrize(
    ("strategy", "best"),
    [("LeastAllocated", "empty"), ("MostAllocated", "half")],
)
def test_framework_ranks_by_strategy(strategy: str, best: str) -> None:
    snap = cluster()
    framework = build_framework(ScoringConfig(strategy=strategy))
    ctx = context(POD, snap)
    mask = np.ones(len(snap), dtype=np.bool_)
    assert snap.nodes[framework.select(ctx, snap, mask)].name == best
    ranked = [snap.nodes[i].name for i in framework.ranked(ctx, snap, mask)]
    assert ranked[0] == best
    assert sorted(ranked) == sorted(n.name for n in snap.nodes)


def test_unknown_strategy_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown scoring strategy"):
        build_framework(ScoringConfig(strategy="Random"))
