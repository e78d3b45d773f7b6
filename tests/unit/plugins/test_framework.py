"""Framework: feasibility, diagnosis wording (kube-scheduler's FitError) and node choice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gangsched.core.framework import FloatVector, Framework, IndexVector, PodContext
from gangsched.core.model import Taint
from gangsched.core.plugins import build_framework
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import snapshot

from .probe import context


def diagnose_message(snap: Snapshot, **pod: Any) -> str:
    framework = build_framework()
    ctx = framework.context(make_pod(**pod), snap)
    assert not framework.feasible(ctx, snap).any()
    return framework.diagnose(ctx, snap).fit.message()


def test_message_counts_reasons_most_common_first() -> None:
    snap = snapshot(
        [
            make_node("a", cpu="1"),
            make_node("b", cpu="1"),
            make_node("c", cpu="8", taints=[Taint("k", "v", "NoSchedule")]),
        ]
    )
    assert diagnose_message(snap, cpu="2") == (
        "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {k: v}."
    )


def test_equal_counts_are_ordered_by_text() -> None:
    snap = snapshot([make_node("a", unschedulable=True), make_node("b", cpu="1")])
    assert diagnose_message(snap, cpu="2") == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable."
    )


def test_first_rejecting_plugin_explains_the_node() -> None:
    """A tainted node short of CPU is reported for the taint only (filter order)."""
    snap = snapshot([make_node("a", cpu="1", taints=[Taint("k", "v", "NoExecute")])])
    assert diagnose_message(snap, cpu="2") == (
        "0/1 nodes are available: 1 node(s) had untolerated taint {k: v}."
    )


def test_one_node_may_contribute_several_reasons() -> None:
    snap = snapshot([make_node("a", cpu="1", memory="1Gi")])
    assert diagnose_message(snap, cpu="2", memory="2Gi") == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    )


def test_resolvable_mask_marks_preemption_candidates() -> None:
    snap = snapshot(
        [
            make_node("busy", cpu="4"),  # full of running pods: eviction helps
            make_node("small", cpu="1"),  # too small even when empty
            make_node("tainted", cpu="8", taints=[Taint("k", "v", "NoSchedule")]),
            make_node("cordoned", cpu="8", unschedulable=True),
        ],
        [make_pod("x", node_name="busy", cpu="4")],
    )
    framework = build_framework()
    ctx = framework.context(make_pod(cpu="2"), snap)
    diagnosis = framework.diagnose(ctx, snap)
    assert dict(zip([n.name for n in snap.nodes], diagnosis.resolvable.tolist(), strict=True)) == {
        "busy": True,
        "cordoned": False,
        "small": False,
        "tainted": False,
    }
    assert diagnosis.fit.unresolvable_nodes == 3
    assert diagnosis.fit.num_nodes == 4


def test_message_without_reasons() -> None:
    framework = Framework(filters=[], scores=[])
    snap = snapshot([])
    ctx = framework.context(make_pod(), snap)
    assert framework.diagnose(ctx, snap).fit.message() == "0/0 nodes are available."


# ------------------------------------------------------------------ stub plugins for control
@dataclass
class Stub:
    name: str
    allowed: list[bool]
    apply: bool = True
    reasons: list[tuple[str, Code]] = field(default_factory=list)
    calls: int = 0

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return self.apply

    def filter(self, ctx: PodContext, snap: Snapshot, candidates: BoolVector) -> BoolVector:
        self.calls += 1
        result: BoolVector = candidates & np.array(self.allowed, dtype=np.bool_)
        return result

    def explain(self, ctx: PodContext, snap: Snapshot, node: int) -> list[tuple[str, Code]]:
        return list(self.reasons)


@dataclass
class FixedScore:
    name: str
    values: list[float]

    def applies(self, ctx: PodContext, snap: Snapshot) -> bool:
        return True

    def score(self, ctx: PodContext, snap: Snapshot, nodes: IndexVector) -> FloatVector:
        return np.array(self.values, dtype=np.float64)[nodes]


def three() -> Snapshot:
    return snapshot([make_node("a"), make_node("b"), make_node("c")])


def test_feasible_stops_at_the_first_plugin_rejecting_everything() -> None:
    first, second = Stub("first", [False] * 3), Stub("second", [True] * 3)
    framework = Framework(filters=[first, second], scores=[])
    snap = three()
    assert not framework.feasible(context(make_pod(), snap), snap).any()
    assert (first.calls, second.calls) == (1, 0)


def test_plugins_that_do_not_apply_are_skipped() -> None:
    skipped = Stub("skipped", [False] * 3, apply=False)
    framework = Framework(filters=[skipped], scores=[])
    snap = three()
    ctx = context(make_pod(), snap)
    assert framework.feasible(ctx, snap).all()
    assert framework.diagnose(ctx, snap).fit.reasons == {}
    assert skipped.calls == 0


def test_missing_explanation_falls_back_to_the_plugin_name() -> None:
    framework = Framework(filters=[Stub("Mystery", [False, True, True])], scores=[])
    snap = three()
    diagnosis = framework.diagnose(context(make_pod(), snap), snap)
    assert diagnosis.fit.reasons == {"Mystery": 1}
    assert diagnosis.resolvable.tolist() == [True, False, False]


def test_diagnose_feeds_each_plugin_only_the_survivors() -> None:
    framework = Framework(
        filters=[
            Stub("A", [False, True, True], reasons=[("a", Code.UNRESOLVABLE)]),
            Stub("B", [False, False, True], reasons=[("b", Code.UNSCHEDULABLE)]),
        ],
        scores=[],
    )
    snap = three()
    diagnosis = framework.diagnose(context(make_pod(), snap), snap)
    assert diagnosis.fit.reasons == {"a": 1, "b": 1}
    assert diagnosis.resolvable.tolist() == [False, True, False]


def test_select_takes_the_best_and_breaks_ties_by_name() -> None:
    snap = three()
    ctx = context(make_pod(), snap)
    mask = np.ones(3, dtype=np.bool_)
    tie = Framework(filters=[], scores=[(FixedScore("s", [50.0, 80.0, 80.0]), 1.0)])
    assert tie.select(ctx, snap, mask) == 1
    assert tie.ranked(ctx, snap, mask).tolist() == [1, 2, 0]
    assert tie.select(ctx, snap, np.array([True, False, True])) == 2


def test_weights_combine_scores_and_zero_weight_is_ignored() -> None:
    snap = three()
    ctx = context(make_pod(), snap)
    framework = Framework(
        filters=[],
        scores=[
            (FixedScore("x", [100.0, 0.0, 50.0]), 1.0),
            (FixedScore("y", [0.0, 100.0, 50.0]), 2.0),
            (FixedScore("ignored", [1000.0, 0.0, 0.0]), 0.0),
        ],
    )
    nodes = np.arange(3, dtype=np.intp)
    assert framework.total_scores(ctx, snap, nodes).tolist() == [100.0, 200.0, 150.0]
    assert framework.select(ctx, snap, np.ones(3, dtype=np.bool_)) == 1
