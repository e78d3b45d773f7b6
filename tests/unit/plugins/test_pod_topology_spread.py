"""PodTopologySpread filter and score against kube-scheduler's semantics.

Default topology: n1 and n2 in zone a, n3 in zone b, n4 without a zone label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from gangsched.core.labels import LabelSelector, NodeSelectorTerm
from gangsched.core.model import Node, Pod, Taint, Toleration, TopologySpreadConstraint
from gangsched.core.plugins import ScoringConfig, build_framework
from gangsched.core.plugins.pod_topology_spread import (
    MISSING_LABEL_REASON,
    REASON,
    PodTopologySpread,
    PodTopologySpreadScore,
)
from gangsched.core.snapshot import Snapshot
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import req, selector, snapshot, term

from .probe import context, passing, rejections, scores

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
WEB = selector(app="web")
MISSING = (MISSING_LABEL_REASON, Code.UNRESOLVABLE)
SKEW = (REASON, Code.UNSCHEDULABLE)


def default_nodes() -> list[Node]:
    return [
        make_node("n1", labels={ZONE: "a", "pool": "gpu"}),
        make_node("n2", labels={ZONE: "a", "pool": "gpu"}),
        make_node("n3", labels={ZONE: "b"}, taints=[Taint("dedicated", "x", "NoSchedule")]),
        make_node("n4"),
    ]


def spread(
    key: str = ZONE,
    *,
    max_skew: int = 1,
    sel: LabelSelector | None = WEB,
    when: str = "DoNotSchedule",
    min_domains: int = 1,
    honor_node_affinity: bool = True,
    honor_node_taints: bool = False,
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew, key, when, sel, min_domains, honor_node_affinity, honor_node_taints
    )


def web(node: str, name: str, namespace: str = "default", terminating: bool = False) -> Pod:
    return make_pod(
        name, namespace=namespace, node_name=node, labels={"app": "web"}, terminating=terminating
    )


@dataclass
class Case:
    id: str
    pod: Pod
    existing: list[Pod] = field(default_factory=list)
    rejected: dict[str, tuple[str, Code]] = field(default_factory=dict)
    nodes: Sequence[Node] | None = None


def incoming(
    *constraints: TopologySpreadConstraint,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    required_terms: list[NodeSelectorTerm] | None = None,
    tolerations: Sequence[Toleration] = (),
) -> Pod:
    return make_pod(
        labels={"app": "web"} if labels is None else labels,
        spread=constraints,
        node_selector=node_selector,
        required_terms=required_terms,
        tolerations=tolerations,
    )


CASES = [
    Case("empty cluster: every zone is at 0", incoming(spread()), [], {"n4": MISSING}),
    Case(
        "one pod in zone a: zone a would be 2 against 0",
        incoming(spread()),
        [web("n1", "w1")],
        {"n1": SKEW, "n2": SKEW, "n4": MISSING},
    ),
    Case(
        "maxSkew 2 tolerates it", incoming(spread(max_skew=2)), [web("n1", "w1")], {"n4": MISSING}
    ),
    Case(
        "balanced zones accept the next pod anywhere",
        incoming(spread()),
        [web("n1", "w1"), web("n3", "w3")],
        {"n4": MISSING},
    ),
    Case(
        "a pod not matching its own selector does not count itself",
        incoming(spread(), labels={"app": "db"}),
        [web("n1", "w1")],
        {"n4": MISSING},
    ),
    Case(
        "pods of other namespaces do not count",
        incoming(spread()),
        [web("n1", "w1", namespace="other")],
        {"n4": MISSING},
    ),
    Case(
        "terminating pods do not count",
        incoming(spread()),
        [web("n1", "w1", terminating=True)],
        {"n4": MISSING},
    ),
    Case(
        "pods on nodes without the key do not count",
        incoming(spread()),
        [web("n4", "w4"), web("n4", "w5")],
        {"n4": MISSING},
    ),
    Case(
        "minDomains above the number of domains makes the minimum 0",
        incoming(spread(min_domains=3)),
        [web("n1", "w1"), web("n3", "w3")],
        {"n1": SKEW, "n2": SKEW, "n3": SKEW, "n4": MISSING},
    ),
    Case(
        "minDomains met: the real minimum applies",
        incoming(spread(min_domains=2)),
        [web("n1", "w1"), web("n3", "w3")],
        {"n4": MISSING},
    ),
    Case(
        "nodeAffinityPolicy Honor: zone b is not a domain for a pod bound to pool=gpu",
        incoming(spread(), node_selector={"pool": "gpu"}),
        [web("n1", "w1")],
        {"n4": MISSING},
    ),
    Case(
        "nodeAffinityPolicy Honor with required terms",
        incoming(spread(), required_terms=[term(req("pool", "In", "gpu"))]),
        [web("n1", "w1")],
        {"n4": MISSING},
    ),
    Case(
        "nodeAffinityPolicy Ignore: zone b counts though the pod cannot go there",
        incoming(spread(honor_node_affinity=False), node_selector={"pool": "gpu"}),
        [web("n1", "w1")],
        {"n1": SKEW, "n2": SKEW, "n4": MISSING},
    ),
    Case(
        "nodeTaintsPolicy Ignore (default): the tainted zone b still counts",
        incoming(spread()),
        [web("n1", "w1")],
        {"n1": SKEW, "n2": SKEW, "n4": MISSING},
    ),
    Case(
        "nodeTaintsPolicy Honor: untolerated tainted nodes are no domain",
        incoming(spread(honor_node_taints=True)),
        [web("n1", "w1")],
        {"n4": MISSING},
    ),
    Case(
        "nodeTaintsPolicy Honor: tolerated taints keep the domain",
        incoming(
            spread(honor_node_taints=True),
            tolerations=[
                __import__("gangsched.core.model").core.model.Toleration("dedicated", "Exists")
            ],
        ),
        [web("n1", "w1")],
        {"n1": SKEW, "n2": SKEW, "n4": MISSING},
    ),
    Case(
        "empty selector counts nothing (upstream countPodsMatchSelector)",
        incoming(spread(sel=LabelSelector())),
        [web("n1", "w1"), web("n1", "w2")],
        {"n4": MISSING},
    ),
    Case(
        "missing selector counts nothing",
        incoming(spread(sel=None)),
        [web("n1", "w1"), web("n1", "w2")],
        {"n4": MISSING},
    ),
    Case(
        "only nodes with every constraint's key form domains",
        # n4 (no zone) holds no pod; counting it as a hostname domain would make the
        # hostname minimum 0 and reject n1..n3.
        incoming(spread(max_skew=2), spread(key=HOST)),
        [web("n1", "w1"), web("n2", "w2"), web("n3", "w3")],
        {"n4": MISSING},
    ),
    Case(
        "hostname spreading",
        incoming(spread(key=HOST)),
        [web("n1", "w1"), web("n2", "w2"), web("n4", "w4")],
        {"n1": SKEW, "n2": SKEW, "n4": SKEW},
    ),
    Case(
        "ScheduleAnyway constraints never filter",
        incoming(spread(when="ScheduleAnyway")),
        [web("n1", "w1"), web("n1", "w2")],
        {},
    ),
    Case(
        "no domains at all: nothing to compare against",
        incoming(spread(key="rack")),
        [web("n1", "w1")],
        {"n1": MISSING, "n2": MISSING, "n3": MISSING, "n4": MISSING},
    ),
    Case(
        "another key: racks",
        incoming(spread(key="rack")),
        [web("r1", "w1")],
        {"r1": SKEW},
        nodes=[make_node("r1", labels={"rack": "1"}), make_node("r2", labels={"rack": "2"})],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_filter_and_explain(case: Case) -> None:
    nodes = list(case.nodes) if case.nodes is not None else default_nodes()
    snap = snapshot(nodes, case.existing)
    names = [n.name for n in snap.nodes]
    plugin = PodTopologySpread()
    assert passing(plugin, case.pod, snap) == [n for n in names if n not in case.rejected]
    explained = rejections(plugin, case.pod, snap)
    assert explained == {name: [reason] for name, reason in case.rejected.items()}


def test_filter_respects_candidates() -> None:
    snap = snapshot(default_nodes(), [web("n1", "w1")])
    pod = incoming(spread())
    ctx = context(pod, snap)
    result = PodTopologySpread().filter(ctx, snap, np.array([True, True, False, False]))
    assert result.tolist() == [False, False, False, False]


def test_applies_only_to_do_not_schedule() -> None:
    snap = snapshot(default_nodes())
    assert not PodTopologySpread().applies(context(make_pod(), snap), snap)
    soft = incoming(spread(when="ScheduleAnyway"))
    assert not PodTopologySpread().applies(context(soft, snap), snap)
    assert PodTopologySpreadScore().applies(context(soft, snap), snap)
    assert not PodTopologySpreadScore().applies(context(incoming(spread()), snap), snap)


def _place_gang(snap: Snapshot, pods: list[Pod], strategy: str) -> list[str]:
    framework = build_framework(ScoringConfig(strategy=strategy))
    chosen = []
    for pod in pods:
        ctx = framework.context(pod, snap)
        mask = framework.feasible(ctx, snap)
        assert mask.any(), framework.diagnose(ctx, snap).fit.message()
        node = framework.select(ctx, snap, mask)
        snap.assume(pod, node)
        chosen.append(snap.nodes[node].labels[ZONE])
    return chosen


def _two_zones() -> Snapshot:
    return snapshot(
        [
            make_node("a1", cpu="32", labels={ZONE: "a"}),
            make_node("a2", cpu="32", labels={ZONE: "a"}),
            make_node("b1", cpu="32", labels={ZONE: "b"}),
            make_node("b2", cpu="32", labels={ZONE: "b"}),
        ]
    )


def test_gang_members_assumed_one_by_one_spread_two_and_two() -> None:
    """Bin packing alone would stack the gang in one zone; the constraint sees the members
    assumed earlier in the cycle and alternates zones."""
    gang = [make_pod(f"m{i}", cpu="1", labels={"job": "j"}) for i in range(4)]
    assert Counter(_place_gang(_two_zones(), gang, "MostAllocated")) == {"a": 4}

    constraint = spread(sel=selector(job="j"))
    gang = [make_pod(f"m{i}", cpu="1", labels={"job": "j"}, spread=(constraint,)) for i in range(4)]
    snap = _two_zones()
    mark = snap.checkpoint()
    assert Counter(_place_gang(snap, gang, "MostAllocated")) == {"a": 2, "b": 2}
    snap.rollback(mark)
    assert not any(snap.node_pods)


def test_soft_spread_steers_the_gang_without_filtering() -> None:
    constraint = spread(sel=selector(job="j"), when="ScheduleAnyway")
    gang = [make_pod(f"m{i}", cpu="1", labels={"job": "j"}, spread=(constraint,)) for i in range(4)]
    assert Counter(_place_gang(_two_zones(), gang, "LeastAllocated")) == {"a": 2, "b": 2}


# ------------------------------------------------------------------------------------ score
def test_score_prefers_the_emptier_domain_and_zeroes_nodes_without_the_key() -> None:
    snap = snapshot(default_nodes(), [web("n1", "w1"), web("n2", "w2")])
    result = scores(PodTopologySpreadScore(), incoming(spread(when="ScheduleAnyway")), snap)
    assert result == {"n1": 0.0, "n2": 0.0, "n3": 100.0, "n4": 0.0}


def test_score_is_even_when_domains_are_balanced() -> None:
    snap = snapshot(default_nodes(), [web("n1", "w1"), web("n3", "w3")])
    result = scores(PodTopologySpreadScore(), incoming(spread(when="ScheduleAnyway")), snap)
    assert result["n1"] == result["n2"] == result["n3"] == 100.0


def test_score_with_no_matching_pods_is_full_everywhere() -> None:
    snap = snapshot(default_nodes())
    result = scores(PodTopologySpreadScore(), incoming(spread(when="ScheduleAnyway")), snap)
    assert result == {"n1": 100.0, "n2": 100.0, "n3": 100.0, "n4": 0.0}


def test_score_ranks_by_domain_counts() -> None:
    nodes = [make_node(f"n{z}", labels={ZONE: z}) for z in "abc"]
    pods = [web("na", "w1"), web("na", "w2"), web("na", "w3"), web("nb", "w4")]
    snap = snapshot(nodes, pods)
    result = scores(PodTopologySpreadScore(), incoming(spread(when="ScheduleAnyway")), snap)
    assert result["nc"] == 100.0
    assert result["na"] < result["nb"] < result["nc"]


def test_score_only_over_the_given_nodes() -> None:
    snap = snapshot(default_nodes(), [web("n1", "w1")])
    pod = incoming(spread(when="ScheduleAnyway"))
    ctx = context(pod, snap)
    values = PodTopologySpreadScore().score(ctx, snap, np.array([0, 1], dtype=np.intp))
    # Both candidates are in zone a: equal raw scores normalise to the same value.
    assert values[0] == values[1] > 0


def test_explain_follows_the_snapshot_not_a_stale_filter() -> None:
    snap = snapshot(default_nodes())
    pod = incoming(spread())
    plugin = PodTopologySpread()
    ctx = context(pod, snap)
    assert plugin.filter(ctx, snap, np.ones(len(snap), dtype=np.bool_)).tolist() == [
        True,
        True,
        True,
        False,
    ]
    snap.assume(make_pod("w", labels={"app": "web"}), snap.index["n3"])
    assert plugin.explain(ctx, snap, snap.index["n3"]) == [SKEW]
    # A fresh context (no filter before) explains on its own too.
    assert plugin.explain(context(pod, snap), snap, snap.index["n1"]) == []


def test_explain_after_a_rollback_and_another_assume_at_the_same_journal_length() -> None:
    """The filter's verdicts are kept for the explanations that follow it; a rollback followed
    by a different assume brings the journal back to the same length with other pods placed,
    and the kept verdicts must not be taken for the new state's."""
    snap = snapshot(default_nodes())
    pod = incoming(spread())
    plugin = PodTopologySpread()
    ctx = context(pod, snap)
    mark = snap.checkpoint()
    snap.assume(make_pod("w", labels={"app": "web"}), snap.index["n1"])
    everywhere = np.ones(len(snap), dtype=np.bool_)
    assert plugin.filter(ctx, snap, everywhere).tolist() == [False, False, True, False]
    snap.rollback(mark)
    snap.assume(make_pod("w", labels={"app": "web"}), snap.index["n3"])
    assert plugin.explain(ctx, snap, snap.index["n1"]) == []
    assert plugin.explain(ctx, snap, snap.index["n3"]) == [SKEW]
    # The same holds across a commit, which empties the journal.
    snap.commit()
    assert plugin.filter(ctx, snap, everywhere).tolist() == [True, True, False, False]
    snap.assume(make_pod("w2", labels={"app": "web"}), snap.index["n1"])
    snap.rollback(0)
    snap.assume(make_pod("w2", labels={"app": "web"}), snap.index["n4"])
    assert plugin.explain(ctx, snap, snap.index["n3"]) == [SKEW]
