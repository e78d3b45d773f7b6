"""The snapshot's incremental pod counts equal a full recount after any sequence of changes.

InterPodAffinity and PodTopologySpread read per-node counts the snapshot keeps current as
pods are assumed, removed, rolled back and marked terminating; a count that drifted would
let a gang break a spread or anti-affinity rule. The properties drive a long-lived snapshot
through random changes and compare, after every step, (1) each registered count with a full
pass over the placed pods and (2) the plugins' verdicts with those on a snapshot built afresh
from the same placements.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.framework import Framework
from gangsched.core.labels import LabelSelector
from gangsched.core.model import (
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from gangsched.core.plugins.inter_pod_affinity import InterPodAffinity
from gangsched.core.plugins.inter_pod_affinity_score import InterPodAffinityScore
from gangsched.core.plugins.pod_topology_spread import (
    PodTopologySpread,
    PodTopologySpreadScore,
)
from gangsched.core.pod_counts import MAX_QUERIES, PodCounts, count_matching, scoring_terms
from gangsched.core.snapshot import Snapshot
from tests.builders import cluster, node, pod, selector

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
APPS = ("a", "b", "c")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def repel(app: str, key: str) -> PodAffinityTerm:
    return PodAffinityTerm(selector=selector(app=app), topology_key=key)


@st.composite
def pods(draw: st.DrawFn, prefix: str, count: int) -> list[Pod]:
    out = []
    for i in range(count):
        app = draw(st.sampled_from(APPS))
        out.append(
            pod(
                f"{prefix}{i}",
                "100m",
                namespace=draw(st.sampled_from(["default", "other"])),
                labels={"app": app},
                anti_affinity=(repel(app, draw(st.sampled_from([ZONE, HOST]))),)
                if draw(st.booleans())
                else (),
                affinity=(repel(draw(st.sampled_from(APPS)), ZONE),)
                if draw(st.integers(0, 3)) == 0
                else (),
                preferred_affinity=(
                    WeightedPodAffinityTerm(draw(st.integers(1, 9)), repel(app, ZONE)),
                )
                if draw(st.booleans())
                else (),
                preferred_anti_affinity=(
                    WeightedPodAffinityTerm(draw(st.integers(1, 9)), repel(app, HOST)),
                )
                if draw(st.booleans())
                else (),
                spread=(
                    TopologySpreadConstraint(
                        max_skew=draw(st.integers(1, 2)),
                        topology_key=draw(st.sampled_from([ZONE, HOST])),
                        when_unsatisfiable=draw(
                            st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])
                        ),
                        selector=selector(app=app),
                    ),
                )
                if draw(st.booleans())
                else (),
            )
        )
    return out


Step = tuple[str, int, int]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[ClusterState, list[Pod], list[Step]]:
    size = draw(st.integers(1, 5))
    nodes = [node(f"n{i}", 8, labels={ZONE: f"z{i % 2}"}) for i in range(size)]
    running = draw(pods("run", draw(st.integers(0, 6))))
    for i, p in enumerate(running):
        p.node_name = f"n{draw(st.integers(0, size - 1))}"
        p.phase = "Running"
        p.created = float(i)
    pending = draw(pods("new", draw(st.integers(1, 6))))
    ops = st.sampled_from(["assume", "remove", "mark", "rollback", "terminate", "ask"])
    steps = draw(
        st.lists(
            st.tuples(ops, st.integers(0, 20), st.integers(0, size - 1)), min_size=1, max_size=25
        )
    )
    return cluster(nodes, running), pending, steps


def recount_terms(snap: Snapshot) -> dict[tuple[str, PodAffinityTerm], list[int]]:
    expected: dict[tuple[str, PodAffinityTerm], list[int]] = {}
    for i, placed in enumerate(snap.node_pods):
        for p in placed.values():
            for term in p.anti_affinity:
                expected.setdefault((p.namespace, term), [0] * len(snap))[i] += 1
    return expected


def recount_scoring_terms(
    snap: Snapshot,
) -> dict[tuple[str, tuple[int, PodAffinityTerm]], list[int]]:
    expected: dict[tuple[str, tuple[int, PodAffinityTerm]], list[int]] = {}
    for i, placed in enumerate(snap.node_pods):
        for p in placed.values():
            for weighted in scoring_terms(p):
                expected.setdefault((p.namespace, weighted), [0] * len(snap))[i] += 1
    return expected


def verdicts(snap: Snapshot, incoming: Pod) -> tuple[list[bool], list[bool], list[float]]:
    ctx = Framework(filters=[], scores=[]).context(incoming, snap)
    every = np.ones(len(snap), dtype=np.bool_)
    affinity = InterPodAffinity().filter(ctx, snap, every).tolist()
    spread = PodTopologySpread().filter(ctx, snap, every).tolist()
    scored = PodTopologySpreadScore()
    every_index = np.arange(len(snap), dtype=np.intp)
    scores = scored.score(ctx, snap, every_index).tolist() if scored.applies(ctx, snap) else []
    preferred = InterPodAffinityScore()
    if preferred.applies(ctx, snap):
        scores += preferred.score(ctx, snap, every_index).tolist()
    return affinity, spread, scores


def fresh(snap: Snapshot) -> Snapshot:
    """A snapshot built from scratch with the same placements (every pod bound as it is)."""
    placed = []
    for i, pods_on_node in enumerate(snap.node_pods):
        for p in pods_on_node.values():
            placed.append(dataclasses.replace(p, node_name=snap.nodes[i].name, phase="Running"))
    rebuilt = Snapshot.build(snap.nodes, placed)
    rebuilt.namespace_labels = snap.namespace_labels
    return rebuilt


@SETTINGS
@given(scenarios())
def test_incremental_counts_equal_a_full_recount(
    scenario: tuple[ClusterState, list[Pod], list[Step]],
) -> None:
    state, pending, steps = scenario
    snap = state.snapshot
    assumed: list[Pod] = []
    marks: list[int] = []
    for incoming in pending:  # the questions are registered first, then kept current
        verdicts(snap, incoming)
    for op, which, where in steps:
        if op == "assume":
            candidate = pending[which % len(pending)]
            if snap.placed_at(candidate) is None:
                snap.assume(candidate, where)
                assumed.append(candidate)
        elif op == "remove":
            placed = [p for p in snap.pods()]
            if placed:
                snap.remove(placed[which % len(placed)])
        elif op == "mark":
            marks.append(snap.checkpoint())
        elif op == "rollback" and marks:
            snap.rollback(marks.pop())
        elif op == "terminate":
            bound = [p for p in state.pods.values() if snap.placed_at(p) is not None]
            if bound:
                target = bound[which % len(bound)]
                state.set_terminating(target, not target.terminating)
        else:  # ask: register the questions the plugins would ask for this pod
            verdicts(snap, pending[which % len(pending)])
        assert len(snap.pod_counts) <= MAX_QUERIES
        for key, query in snap.pod_counts._queries.items():
            assert (
                query.counts.tolist() == count_matching(query.matches, snap.node_pods).tolist()
            ), key
        live = {k: v.tolist() for k, v in snap.anti_affinity_terms.items()}
        assert live == recount_terms(snap)
        scoring = {k: v.tolist() for k, v in snap.scoring_terms.items()}
        assert scoring == recount_scoring_terms(snap)
    for incoming in pending:
        if snap.placed_at(incoming) is None:
            assert verdicts(snap, incoming) == verdicts(fresh(snap), incoming)


def test_queries_beyond_the_bound_are_dropped_least_recent_first() -> None:
    counts = PodCounts()
    counts.reset(1)
    placed: list[dict[str, Pod]] = [{"default/x": pod("x", labels={"app": "a"})}]
    for i in range(MAX_QUERIES + 1):
        counts.per_node(("q", i), lambda p: True, placed)
    assert len(counts) == MAX_QUERIES
    assert ("q", 0) not in counts._queries and ("q", MAX_QUERIES) in counts._queries


def test_a_rolled_back_gang_leaves_the_counts_as_before() -> None:
    state = cluster([node(f"n{i}", labels={ZONE: f"z{i % 2}"}) for i in range(4)])
    snap = state.snapshot
    spread = TopologySpreadConstraint(
        1, ZONE, "DoNotSchedule", LabelSelector(match_labels=(("app", "g"),))
    )
    members = [pod(f"g-{i}", labels={"app": "g"}, spread=(spread,)) for i in range(4)]
    before = verdicts(snap, members[0])
    mark = snap.checkpoint()
    for i, member in enumerate(members[:3]):
        snap.assume(member, i)
    after_assume = verdicts(snap, members[3])
    assert after_assume[1] != before[1], "three members placed must change the spread verdict"
    snap.rollback(mark)
    assert verdicts(snap, members[0]) == before
    assert all(q.counts.sum() == 0 for q in snap.pod_counts._queries.values())
