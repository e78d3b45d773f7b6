"""PodTopologySpread's filter and score against kube-scheduler's algorithm spelled out pod
by pod, on random clusters (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gangsched.core.labels import LabelSelector, Requirement
from gangsched.core.model import Pod, Taint, Toleration, TopologySpreadConstraint
from gangsched.core.plugins.node_affinity import admits
from gangsched.core.plugins.pod_topology_spread import (
    MISSING_LABEL_REASON,
    REASON,
    PodTopologySpread,
    PodTopologySpreadScore,
)
from gangsched.core.plugins.taint_toleration import first_untolerated
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import selector, snapshot

from .probe import assert_matches_reference, context

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
MISSING = (MISSING_LABEL_REASON, Code.UNRESOLVABLE)
SKEW = (REASON, Code.UNSCHEDULABLE)


# ----------------------------------------------------------- property: upstream, spelled out
def _reference_verdicts(pod: Pod, snap: Snapshot) -> list[tuple[str, Code] | None]:
    """calPreFilterState + Filter of kube-scheduler's PodTopologySpread, node by node."""
    hard = [c for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"]
    per_value: list[dict[str, int]] = [{} for _ in hard]
    for i, node in enumerate(snap.nodes):
        if not all(c.topology_key in node.labels for c in hard):
            continue
        for k, c in enumerate(hard):
            if c.honor_node_affinity and not admits(pod.constraints, node):
                continue
            if c.honor_node_taints and first_untolerated(node, pod.constraints.tolerations):
                continue
            count = 0
            if c.selector is not None and not c.selector.is_empty:
                count = sum(
                    1
                    for other in snap.node_pods[i].values()
                    if not other.terminating
                    and other.namespace == pod.namespace
                    and c.selector.matches(other.labels)
                )
            value = node.labels[c.topology_key]
            per_value[k][value] = per_value[k].get(value, 0) + count
    verdicts: list[tuple[str, Code] | None] = []
    for node in snap.nodes:
        verdict = None
        for k, c in enumerate(hard):
            if c.topology_key not in node.labels:
                verdict = MISSING
                break
            self_match = 1 if c.selector is not None and c.selector.matches(pod.labels) else 0
            counts = per_value[k]
            minimum = min(counts.values()) if counts else 2**31 - 1
            if len(counts) < c.min_domains:
                minimum = 0
            match = counts.get(node.labels[c.topology_key], 0)
            if match + self_match - minimum > c.max_skew:
                verdict = SKEW
                break
        verdicts.append(verdict)
    return verdicts


_SELECTORS = st.sampled_from(
    [
        None,
        LabelSelector(),
        selector(app="x"),
        selector(app="y"),
        LabelSelector(match_expressions=(Requirement("app", "In", ("x", "y")),)),
    ]
)
_LABELS = st.sampled_from([{"app": "x"}, {"app": "x"}, {"app": "y"}, {}])
_CONSTRAINTS = st.builds(
    TopologySpreadConstraint,
    max_skew=st.integers(1, 2),
    topology_key=st.sampled_from([ZONE, HOST, "rack"]),
    when_unsatisfiable=st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
    selector=_SELECTORS,
    min_domains=st.integers(1, 4),
    honor_node_affinity=st.booleans(),
    honor_node_taints=st.booleans(),
)


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[Pod, Snapshot]:
    count = draw(st.integers(1, 6))
    nodes = []
    for i in range(count):
        labels = draw(
            st.fixed_dictionaries(
                {}, optional={"rack": st.sampled_from("123"), "pool": st.just("gpu")}
            )
        )
        zone = draw(st.sampled_from(["a", "b", "a", "b", None]))  # mostly labelled
        if zone is not None:
            labels[ZONE] = zone
        taints = [Taint("dedicated", "x", "NoSchedule")] if draw(st.booleans()) else []
        nodes.append(make_node(f"n{i}", labels=labels, taints=taints))
    pods = [
        make_pod(
            f"e{j}",
            namespace=draw(st.sampled_from(["default", "other"])),
            node_name=f"n{draw(st.integers(0, count - 1))}",
            labels=draw(_LABELS),
            terminating=draw(st.booleans()),
        )
        for j in range(draw(st.integers(0, 14)))
    ]
    snap = snapshot(nodes, pods)
    for k, (labels, node) in enumerate(
        draw(st.lists(st.tuples(_LABELS, st.integers(0, count - 1)), max_size=3))
    ):
        snap.assume(make_pod(f"assumed{k}", labels=labels), node)
    pod = make_pod(
        "incoming",
        labels=draw(_LABELS),
        node_selector=draw(st.sampled_from([None, {"pool": "gpu"}])),
        tolerations=draw(st.sampled_from([(), (Toleration("dedicated", "Exists"),)])),
        spread=tuple(draw(st.lists(_CONSTRAINTS, min_size=1, max_size=3))),
    )
    return pod, snap


@settings(max_examples=300, deadline=None)
@given(_scenarios())
def test_filter_matches_upstream_reference(scenario: tuple[Pod, Snapshot]) -> None:
    pod, snap = scenario
    assert_matches_reference(PodTopologySpread(), pod, snap, _reference_verdicts(pod, snap))


def _reference_scores(pod: Pod, snap: Snapshot, candidates: list[int]) -> list[float]:
    """PreScore/Score/NormalizeScore of kube-scheduler's PodTopologySpread (float division
    in the last step, as gangsched scores are floats)."""
    soft = [c for c in pod.spread if c.when_unsatisfiable == "ScheduleAnyway"]

    def has_all(i: int) -> bool:
        return all(c.topology_key in snap.nodes[i].labels for c in soft)

    def count(i: int, c: TopologySpreadConstraint) -> int:
        if c.selector is None or c.selector.is_empty:
            return 0
        return sum(
            1
            for other in snap.node_pods[i].values()
            if not other.terminating
            and other.namespace == pod.namespace
            and c.selector.matches(other.labels)
        )

    ignored = {i for i in candidates if not has_all(i)}
    kept = [i for i in candidates if i not in ignored]
    pairs: dict[tuple[str, str], int] = {}
    sizes = [0] * len(soft)
    for i in kept:
        for k, c in enumerate(soft):
            if c.topology_key == HOST:
                continue
            pair = (c.topology_key, snap.nodes[i].labels[c.topology_key])
            if pair not in pairs:
                pairs[pair] = 0
                sizes[k] += 1
    for i, node in enumerate(snap.nodes):
        if not has_all(i):
            continue
        for c in soft:
            if c.honor_node_affinity and not admits(pod.constraints, node):
                continue
            if c.honor_node_taints and first_untolerated(node, pod.constraints.tolerations):
                continue
            pair = (c.topology_key, node.labels[c.topology_key])
            if pair in pairs:
                pairs[pair] += count(i, c)
    weights = [
        math.log((len(kept) if c.topology_key == HOST else sizes[k]) + 2)
        for k, c in enumerate(soft)
    ]
    raw: dict[int, float] = {}
    for i in kept:
        total = 0.0
        for k, c in enumerate(soft):
            value = snap.nodes[i].labels[c.topology_key]
            cnt = count(i, c) if c.topology_key == HOST else pairs[(c.topology_key, value)]
            total += cnt * weights[k] + (c.max_skew - 1)
        raw[i] = float(round(total))
    if not raw:
        return [0.0] * len(candidates)
    top, bottom = max(raw.values()), min(raw.values())
    return [
        0.0 if i in ignored else (100.0 if top == 0 else 100.0 * (top + bottom - raw[i]) / top)
        for i in candidates
    ]


@settings(max_examples=150, deadline=None)
@given(_scenarios())
def test_score_matches_upstream_reference(scenario: tuple[Pod, Snapshot]) -> None:
    pod, snap = scenario
    keys = [c.topology_key for c in pod.spread if c.when_unsatisfiable == "ScheduleAnyway"]
    assume(len(keys) == len(set(keys)))  # upstream shares domain maps between equal keys
    plugin = PodTopologySpreadScore()
    ctx = context(pod, snap)
    if not plugin.applies(ctx, snap):
        return
    # Score sees the nodes that passed filtering (node affinity and taints among them).
    candidates = [
        i
        for i, node in enumerate(snap.nodes)
        if admits(pod.constraints, node)
        and first_untolerated(node, pod.constraints.tolerations) is None
    ]
    got = plugin.score(ctx, snap, np.array(candidates, dtype=np.intp)).tolist()
    assert got == pytest.approx(_reference_scores(pod, snap, candidates))
