"""InterPodAffinity against kube-scheduler's required (anti-)affinity semantics.

Topology used throughout: n1 and n2 in zone a, n3 in zone b, n4 without a zone label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from gangsched.core.labels import LabelSelector
from gangsched.core.model import Pod, PodAffinityTerm
from gangsched.core.plugins import build_framework
from gangsched.core.plugins.inter_pod_affinity import (
    AFFINITY_REASON,
    ANTI_AFFINITY_REASON,
    EXISTING_ANTI_AFFINITY_REASON,
    InterPodAffinity,
)
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import selector, snapshot

from .probe import context, passing, rejections

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ALL = ["n1", "n2", "n3", "n4"]


def cluster(
    pods: Sequence[Pod] = (), namespaces: dict[str, dict[str, str]] | None = None
) -> Snapshot:
    nodes = [
        make_node("n1", labels={ZONE: "a"}),
        make_node("n2", labels={ZONE: "a"}),
        make_node("n3", labels={ZONE: "b"}),
        make_node("n4"),
    ]
    snap = snapshot(nodes, pods)
    snap.namespace_labels = namespaces or {"default": {}, "other": {"team": "x"}}
    return snap


def on(node: str, name: str, namespace: str = "default", **labels: str) -> Pod:
    return make_pod(name, namespace=namespace, node_name=node, labels=labels)


def aff(
    key: str,
    sel: LabelSelector | None,
    namespaces: frozenset[str] = frozenset(),
    namespace_selector: LabelSelector | None = None,
) -> PodAffinityTerm:
    return PodAffinityTerm(sel, key, namespaces, namespace_selector)


@dataclass
class Case:
    id: str
    pod: Pod
    existing: list[Pod] = field(default_factory=list)
    passing: list[str] = field(default_factory=list)
    reason: tuple[str, Code] | None = None  # expected for every rejected node


DB = selector(app="db")
WEB = selector(app="web")

CASES = [
    Case(
        "affinity: zone of the matching pod",
        make_pod(affinity=(aff(ZONE, DB),)),
        [on("n1", "db", app="db")],
        ["n1", "n2"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: same host as the matching pod",
        make_pod(affinity=(aff(HOST, DB),)),
        [on("n3", "db", app="db")],
        ["n3"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: no match anywhere and the pod does not match itself",
        make_pod(labels={"app": "web"}, affinity=(aff(ZONE, DB),)),
        [on("n1", "web", app="web")],
        [],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: first pod of a self-affine group goes anywhere with the key",
        make_pod(labels={"app": "web"}, affinity=(aff(ZONE, WEB),)),
        [on("n1", "db", app="db")],
        ["n1", "n2", "n3"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: later pods of a self-affine group follow the first",
        make_pod(labels={"app": "web"}, affinity=(aff(ZONE, WEB),)),
        [on("n3", "web-0", app="web")],
        ["n3"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: a match on a node without the key does not count, self-affinity applies",
        make_pod(labels={"app": "web"}, affinity=(aff(ZONE, WEB),)),
        [on("n4", "web-0", app="web")],
        ["n1", "n2", "n3"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: pods in other namespaces are not selected by default",
        make_pod(affinity=(aff(ZONE, DB),)),
        [on("n1", "db", namespace="other", app="db")],
        [],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: namespaces list",
        make_pod(affinity=(aff(ZONE, DB, namespaces=frozenset({"other"})),)),
        [on("n1", "db", namespace="other", app="db")],
        ["n1", "n2"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: namespaceSelector over namespace labels",
        make_pod(affinity=(aff(ZONE, DB, namespace_selector=selector(team="x")),)),
        [on("n3", "db", namespace="other", app="db")],
        ["n3"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: empty namespaceSelector selects every namespace",
        make_pod(affinity=(aff(ZONE, DB, namespace_selector=LabelSelector()),)),
        [on("n3", "db", namespace="unlabelled", app="db")],
        ["n3"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: a term without a label selector selects nothing",
        make_pod(labels={"app": "db"}, affinity=(aff(ZONE, None),)),
        [on("n1", "db", app="db")],
        [],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: one pod must match all terms (upstream), two half-matches do not",
        make_pod(affinity=(aff(ZONE, DB), aff(ZONE, selector(tier="cache")))),
        [on("n1", "db", app="db"), on("n2", "cache", tier="cache")],
        [],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "affinity: a pod matching all terms satisfies each term's topology",
        make_pod(affinity=(aff(ZONE, DB), aff(HOST, selector(tier="cache")))),
        [on("n1", "db", app="db"), on("n2", "both", app="db", tier="cache")],
        ["n2"],
        (AFFINITY_REASON, Code.UNRESOLVABLE),
    ),
    Case(
        "anti-affinity: not on the host of a matching pod",
        make_pod(anti_affinity=(aff(HOST, WEB),)),
        [on("n1", "web", app="web")],
        ["n2", "n3", "n4"],
        (ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
    ),
    Case(
        "anti-affinity: not in the zone of a matching pod; no key means no shared zone",
        make_pod(anti_affinity=(aff(ZONE, WEB),)),
        [on("n2", "web", app="web")],
        ["n3", "n4"],
        (ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
    ),
    Case(
        "anti-affinity: pods of other namespaces do not repel",
        make_pod(anti_affinity=(aff(HOST, WEB),)),
        [on("n1", "web", namespace="other", app="web")],
        ALL,
    ),
    Case(
        "anti-affinity: any of several terms repels",
        make_pod(anti_affinity=(aff(HOST, WEB), aff(ZONE, DB))),
        [on("n1", "web", app="web"), on("n3", "db", app="db")],
        ["n2", "n4"],
        (ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
    ),
    Case(
        "symmetry: an existing pod's zone anti-affinity keeps matching pods out of its zone",
        make_pod(labels={"app": "web"}),
        [make_pod("guard", node_name="n1", anti_affinity=(aff(ZONE, WEB),))],
        ["n3", "n4"],
        (EXISTING_ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
    ),
    Case(
        "symmetry: host anti-affinity blocks only the host",
        make_pod(labels={"app": "web"}),
        [make_pod("guard", node_name="n3", anti_affinity=(aff(HOST, WEB),))],
        ["n1", "n2", "n4"],
        (EXISTING_ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
    ),
    Case(
        "symmetry: terms that do not select the incoming pod do nothing",
        make_pod(labels={"app": "db"}),
        [make_pod("guard", node_name="n1", anti_affinity=(aff(ZONE, WEB),))],
        ALL,
    ),
    Case(
        "symmetry: the existing pod's own namespace is the default scope",
        make_pod(namespace="other", labels={"app": "web"}),
        [make_pod("guard", node_name="n1", anti_affinity=(aff(ZONE, WEB),))],
        ALL,
    ),
    Case(
        "symmetry: a guard on a node without the key has no domain to protect",
        make_pod(labels={"app": "web"}),
        [make_pod("guard", node_name="n4", anti_affinity=(aff(ZONE, WEB),))],
        ALL,
    ),
    Case(
        "symmetry: namespaceSelector of the existing pod's term sees the incoming namespace",
        make_pod(namespace="other", labels={"app": "web"}),
        [
            make_pod(
                "guard",
                node_name="n1",
                anti_affinity=(aff(HOST, WEB, namespace_selector=selector(team="x")),),
            )
        ],
        ["n2", "n3", "n4"],
        (EXISTING_ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_filter_and_explain(case: Case) -> None:
    snap = cluster(case.existing)
    assert passing(InterPodAffinity(), case.pod, snap) == case.passing
    rejected = rejections(InterPodAffinity(), case.pod, snap)
    assert sorted(rejected) == sorted(set(ALL) - set(case.passing))
    for reasons in rejected.values():
        assert reasons == [case.reason]


def test_does_not_apply_without_terms_anywhere() -> None:
    snap = cluster([on("n1", "web", app="web")])
    assert not InterPodAffinity().applies(context(make_pod(), snap), snap)


def test_applies_for_symmetry_alone() -> None:
    snap = cluster([make_pod("guard", node_name="n1", anti_affinity=(aff(HOST, WEB),))])
    assert InterPodAffinity().applies(context(make_pod(), snap), snap)


def test_affinity_failure_is_reported_before_anti_affinity() -> None:
    pod = make_pod(affinity=(aff(HOST, DB),), anti_affinity=(aff(ZONE, WEB),))
    snap = cluster([on("n1", "db", app="db"), on("n3", "web", app="web")])
    rejected = rejections(InterPodAffinity(), pod, snap)
    assert rejected["n3"] == [(AFFINITY_REASON, Code.UNRESOLVABLE)]
    assert passing(InterPodAffinity(), pod, snap) == ["n1"]


def test_anti_affinity_reported_before_existing_pods_rules() -> None:
    pod = make_pod(labels={"app": "web"}, anti_affinity=(aff(HOST, DB),))
    guard = make_pod("guard", node_name="n1", labels={"app": "db"}, anti_affinity=(aff(HOST, WEB),))
    snap = cluster([guard])
    assert rejections(InterPodAffinity(), pod, snap) == {
        "n1": [(ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE)]
    }


def test_pods_assumed_in_the_cycle_count_though_not_yet_bound() -> None:
    snap = cluster()
    earlier = make_pod("web-0", labels={"app": "web"}, anti_affinity=(aff(HOST, WEB),))
    assert earlier.node_name is None
    snap.assume(earlier, snap.index["n2"])
    later = make_pod("web-1", labels={"app": "web"}, anti_affinity=(aff(HOST, WEB),))
    # Both directions: the later pod's own term and the earlier pod's term reject n2.
    assert passing(InterPodAffinity(), later, snap) == ["n1", "n3", "n4"]
    plain = make_pod("web-2", labels={"app": "web"})
    assert rejections(InterPodAffinity(), plain, snap) == {
        "n2": [(EXISTING_ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE)]
    }


def test_rollback_forgets_assumed_pods() -> None:
    snap = cluster()
    mark = snap.checkpoint()
    snap.assume(make_pod("web-0", labels={"app": "web"}, anti_affinity=(aff(HOST, WEB),)), 0)
    snap.rollback(mark)
    assert not snap.anti_affinity_pods
    assert passing(InterPodAffinity(), make_pod(anti_affinity=(aff(HOST, WEB),)), snap) == ALL


def test_gang_with_host_anti_affinity_spreads_over_hosts() -> None:
    """Each member repels the others: four members take the four nodes, a fifth fits nowhere."""
    snap = cluster()
    framework = build_framework()
    chosen = []
    for i in range(4):
        pod = make_pod(
            f"m{i}", cpu="1", labels={"gang": "g"}, anti_affinity=(aff(HOST, selector(gang="g")),)
        )
        ctx = framework.context(pod, snap)
        mask = framework.feasible(ctx, snap)
        node = framework.select(ctx, snap, mask)
        snap.assume(pod, node)
        chosen.append(snap.nodes[node].name)
    assert sorted(chosen) == ALL
    fifth = make_pod("m4", labels={"gang": "g"}, anti_affinity=(aff(HOST, selector(gang="g")),))
    ctx = framework.context(fifth, snap)
    assert not framework.feasible(ctx, snap).any()
    assert framework.diagnose(ctx, snap).fit.message() == (
        "0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules."
    )


def test_gang_with_zone_affinity_follows_its_first_member() -> None:
    snap = cluster()
    framework = build_framework()
    chosen = []
    for i in range(4):
        pod = make_pod(
            f"m{i}", cpu="1", labels={"gang": "g"}, affinity=(aff(ZONE, selector(gang="g")),)
        )
        ctx = framework.context(pod, snap)
        node = framework.select(ctx, snap, framework.feasible(ctx, snap))
        snap.assume(pod, node)
        chosen.append(snap.nodes[node].name)
    # The first member may go to any zone (self-affinity); the rest follow it, and the
    # least-allocated score spreads them over that zone's nodes.
    assert chosen[0] == "n1"
    assert sorted(set(chosen)) == ["n1", "n2"]


def test_explain_recomputes_after_the_snapshot_moved() -> None:
    snap = cluster()
    pod = make_pod(anti_affinity=(aff(HOST, WEB),))
    ctx = context(pod, snap)
    plugin = InterPodAffinity()
    assert plugin.filter(ctx, snap, np.ones(len(snap), dtype=np.bool_)).all()
    snap.assume(make_pod("web", labels={"app": "web"}), snap.index["n1"])
    assert plugin.explain(ctx, snap, snap.index["n1"]) == [
        (ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE)
    ]
    assert plugin.explain(ctx, snap, snap.index["n2"]) == []


def test_filter_respects_candidates() -> None:
    snap = cluster([on("n1", "db", app="db")])
    pod = make_pod(affinity=(aff(ZONE, DB),))
    ctx = context(pod, snap)
    candidates = np.array([False, True, True, True])
    result = InterPodAffinity().filter(ctx, snap, candidates)
    assert result.tolist() == [False, True, False, False]
