"""Probing one plugin the way the framework and `diagnose` do, on snapshots built with
tests.builders: which nodes pass, why the others were rejected, and the raw scores."""

from __future__ import annotations

import numpy as np
from hypothesis import event

from gangsched.core.framework import FilterPlugin, Framework, PodContext, ScorePlugin
from gangsched.core.model import Pod
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code


def context(pod: Pod, snap: Snapshot) -> PodContext:
    return Framework(filters=[], scores=[]).context(pod, snap)


def passing(plugin: FilterPlugin, pod: Pod, snap: Snapshot) -> list[str]:
    """Names of the nodes the filter lets through (all of them when it does not apply)."""
    ctx = context(pod, snap)
    if not plugin.applies(ctx, snap):
        return [node.name for node in snap.nodes]
    mask = plugin.filter(ctx, snap, np.ones(len(snap), dtype=np.bool_))
    return [snap.nodes[i].name for i in np.flatnonzero(mask)]


def rejections(plugin: FilterPlugin, pod: Pod, snap: Snapshot) -> dict[str, list[tuple[str, Code]]]:
    """Per rejected node, the plugin's explanation, obtained the way `diagnose` does."""
    ctx = context(pod, snap)
    if not plugin.applies(ctx, snap):
        return {}
    passed = plugin.filter(ctx, snap, np.ones(len(snap), dtype=np.bool_))
    return {snap.nodes[i].name: plugin.explain(ctx, snap, int(i)) for i in np.flatnonzero(~passed)}


def scores(plugin: ScorePlugin, pod: Pod, snap: Snapshot) -> dict[str, float]:
    """Scores over every node of the snapshot (as if all were feasible)."""
    ctx = context(pod, snap)
    nodes = np.arange(len(snap), dtype=np.intp)
    values = plugin.score(ctx, snap, nodes)
    return {snap.nodes[i].name: float(values[i]) for i in range(len(snap))}


def assert_matches_reference(
    plugin: FilterPlugin, pod: Pod, snap: Snapshot, expected: list[tuple[str, Code] | None]
) -> None:
    """The filter passes exactly the nodes a reference implementation passes (None) and
    explains each rejected one with the reference's (reason, code)."""
    ctx = context(pod, snap)
    if not plugin.applies(ctx, snap):
        assert expected == [None] * len(snap)
        return
    passed = plugin.filter(ctx, snap, np.ones(len(snap), dtype=np.bool_))
    for verdict in expected:
        event(verdict[0] if verdict else "pass")
    assert passed.tolist() == [v is None for v in expected]
    for i, verdict in enumerate(expected):
        assert plugin.explain(ctx, snap, i) == ([] if verdict is None else [verdict])
