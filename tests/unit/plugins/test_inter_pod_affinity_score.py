"""InterPodAffinity's score: preferred pod (anti-)affinity both ways, normalised as
kube-scheduler's NormalizeScore (min-max over the candidates, truncated)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.api import pod_from_raw
from gangsched.core.api.errors import InvalidObject
from gangsched.core.api.priority import PriorityResolver
from gangsched.core.model import Pod, PodAffinityTerm, WeightedPodAffinityTerm
from gangsched.core.plugins.inter_pod_affinity import term_matches
from gangsched.core.plugins.inter_pod_affinity_score import InterPodAffinityScore, raw_scores
from gangsched.core.pod_counts import HARD_POD_AFFINITY_WEIGHT
from gangsched.core.snapshot import Snapshot
from tests.builders import node, pod, raw_pod, selector, snapshot

from .probe import context, scores

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def term(app: str, key: str = ZONE) -> PodAffinityTerm:
    return PodAffinityTerm(selector=selector(app=app), topology_key=key)


def weighted(weight: int, app: str, key: str = ZONE) -> WeightedPodAffinityTerm:
    return WeightedPodAffinityTerm(weight, term(app, key))


def zones() -> list:  # type: ignore[type-arg]
    return [node(f"n{i}", labels={ZONE: f"z{i // 2}"}) for i in range(4)] + [node("bare")]


def test_preferred_affinity_prefers_the_zone_of_matching_pods() -> None:
    snap = snapshot(zones(), [pod("db", node_name="n2", labels={"app": "db"})])
    incoming = pod(preferred_affinity=(weighted(10, "db"),))
    # n2 and n3 share zone z1; "bare" has no zone label and counts nothing.
    assert scores(InterPodAffinityScore(), incoming, snap) == {
        "n0": 0.0, "n1": 0.0, "n2": 100.0, "n3": 100.0, "bare": 0.0,
    }  # fmt: skip


def test_preferred_anti_affinity_avoids_it() -> None:
    snap = snapshot(zones(), [pod("web", node_name="n0", labels={"app": "web"})])
    incoming = pod(preferred_anti_affinity=(weighted(5, "web"),))
    assert scores(InterPodAffinityScore(), incoming, snap) == {
        "n0": 0.0, "n1": 0.0, "n2": 100.0, "n3": 100.0, "bare": 100.0,
    }  # fmt: skip


def test_existing_pods_terms_count_for_the_incoming_pod() -> None:
    """Symmetry: a placed pod's preferred affinity, required affinity (hard weight 1) and
    preferred anti-affinity terms that select the incoming pod score in its domain."""
    placed = [
        pod("likes", node_name="n0", preferred_affinity=(weighted(8, "new"),)),
        pod("needs", node_name="n2", affinity=(term("new"),)),
        pod("hates", node_name="bare", preferred_anti_affinity=(weighted(3, "new", HOST),)),
    ]
    snap = snapshot(zones(), placed)
    incoming = pod(labels={"app": "new"})
    raw = raw_scores(context(incoming, snap), snap)
    assert raw is not None
    hard = HARD_POD_AFFINITY_WEIGHT
    assert raw.tolist() == [-3, 8, 8, hard, hard]  # bare, n0 .. n3 (sorted by name)
    # min -3, max 8: (s + 3) / 11 * 100, truncated
    assert scores(InterPodAffinityScore(), incoming, snap) == {
        "n0": 100.0, "n1": 100.0, "n2": 36.0, "n3": 36.0, "bare": 0.0,
    }  # fmt: skip


def test_normalised_over_the_candidates_only() -> None:
    snap = snapshot(zones(), [pod("db", node_name="n2", labels={"app": "db"})])
    incoming = pod(preferred_affinity=(weighted(10, "db"),))
    ctx = context(incoming, snap)
    same = InterPodAffinityScore().score(ctx, snap, np.array([3, 4], dtype=np.intp))  # n2, n3
    assert same.tolist() == [0.0, 0.0]  # equal candidates: no preference among them


def test_does_not_apply_without_any_term() -> None:
    snap = snapshot(zones(), [pod("x", node_name="n0", labels={"app": "db"})])
    assert not InterPodAffinityScore().applies(context(pod(), snap), snap)


def test_the_scores_follow_assumed_members_and_rollback() -> None:
    """A gang whose members prefer each other's zone: the second member follows the first."""
    snap = snapshot(zones())
    members = [
        pod(f"m{i}", labels={"app": "g"}, preferred_affinity=(weighted(1, "g"),)) for i in range(2)
    ]
    mark = snap.checkpoint()
    snap.assume(members[0], 3)
    assert scores(InterPodAffinityScore(), members[1], snap)["n2"] == 100.0
    snap.rollback(mark)
    assert set(scores(InterPodAffinityScore(), members[1], snap).values()) == {0.0}


# -------------------------------------------------------------------------------- reading
def read(**affinity: object) -> Pod:
    return pod_from_raw(raw_pod("p", affinity=affinity), priorities=PriorityResolver([]))


def test_preferred_terms_are_read_with_their_weights() -> None:
    entry = {
        "weight": 7,
        "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE},
    }
    preferred = {"preferredDuringSchedulingIgnoredDuringExecution": [entry]}
    p = read(podAffinity=preferred, podAntiAffinity=preferred)
    assert p.preferred_affinity == (weighted(7, "db"),)
    assert p.preferred_anti_affinity == (weighted(7, "db"),)
    assert p.affinity == () and p.anti_affinity == ()


@pytest.mark.parametrize("weight", [0, 101, "10"])
def test_a_weight_outside_1_to_100_is_refused_naming_the_field(weight: object) -> None:
    entry = {"weight": weight, "podAffinityTerm": {"topologyKey": ZONE}}
    with pytest.raises(
        InvalidObject, match=r"preferredDuringSchedulingIgnoredDuringExecution\[0\]\.weight"
    ):
        read(podAffinity={"preferredDuringSchedulingIgnoredDuringExecution": [entry]})


# --------------------------------------------------------------------- upstream reference
def reference(incoming: Pod, snap: Snapshot, candidates: list[int]) -> list[float]:
    """kube-scheduler's PreScore/Score/NormalizeScore written out pod by pod."""
    topology: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def process(t: PodAffinityTerm, owner: str, target: Pod, where: int, weight: int) -> None:
        labels = snap.namespace_labels.get(target.namespace, {})
        value = snap.nodes[where].labels.get(t.topology_key)
        if value is not None and term_matches(t, owner, target, labels):
            topology[t.topology_key][value] += weight

    for i, placed in enumerate(snap.node_pods):
        for existing in placed.values():
            for w in incoming.preferred_affinity:
                process(w.term, incoming.namespace, existing, i, w.weight)
            for w in incoming.preferred_anti_affinity:
                process(w.term, incoming.namespace, existing, i, -w.weight)
            for t in existing.affinity:
                process(t, existing.namespace, incoming, i, HARD_POD_AFFINITY_WEIGHT)
            for w in existing.preferred_affinity:
                process(w.term, existing.namespace, incoming, i, w.weight)
            for w in existing.preferred_anti_affinity:
                process(w.term, existing.namespace, incoming, i, -w.weight)
    raw = []
    for i in candidates:
        labels = snap.nodes[i].labels
        raw.append(sum(values.get(labels[k], 0) for k, values in topology.items() if k in labels))
    if not topology or not raw:
        return [0.0] * len(candidates)
    low, high = min(raw), max(raw)
    return [float(math.floor(100 * (s - low) / (high - low))) if high > low else 0.0 for s in raw]


APPS = ("a", "b")


@st.composite
def weighted_terms(draw: st.DrawFn) -> tuple[WeightedPodAffinityTerm, ...]:
    keys = st.sampled_from([ZONE, HOST])
    return tuple(
        weighted(draw(st.integers(1, 100)), draw(st.sampled_from(APPS)), draw(keys))
        for _ in range(draw(st.integers(0, 2)))
    )


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, Pod, list[int]]:
    size = draw(st.integers(1, 5))
    nodes = [
        node(f"n{i}", labels={ZONE: f"z{i % 2}"} if draw(st.booleans()) else {})
        for i in range(size)
    ]
    placed = []
    for j in range(draw(st.integers(0, 6))):
        placed.append(
            pod(
                f"e{j}",
                node_name=f"n{draw(st.integers(0, size - 1))}",
                namespace=draw(st.sampled_from(["default", "other"])),
                labels={"app": draw(st.sampled_from(APPS))},
                affinity=(term(draw(st.sampled_from(APPS))),)
                if draw(st.integers(0, 3)) == 0
                else (),
                preferred_affinity=draw(weighted_terms()),
                preferred_anti_affinity=draw(weighted_terms()),
            )
        )
    snap = snapshot(nodes, placed)
    incoming = pod(
        "incoming",
        labels={"app": draw(st.sampled_from(APPS))},
        preferred_affinity=draw(weighted_terms()),
        preferred_anti_affinity=draw(weighted_terms()),
    )
    candidates = sorted(draw(st.sets(st.integers(0, size - 1), min_size=1)))
    return snap, incoming, candidates


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_matches_the_upstream_reference(case: tuple[Snapshot, Pod, list[int]]) -> None:
    snap, incoming, candidates = case
    plugin = InterPodAffinityScore()
    ctx = context(incoming, snap)
    got = (
        plugin.score(ctx, snap, np.array(candidates, dtype=np.intp)).tolist()
        if plugin.applies(ctx, snap)
        else [0.0] * len(candidates)
    )
    assert got == reference(incoming, snap, candidates)
