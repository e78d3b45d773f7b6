"""InterPodAffinity's filter against kube-scheduler's algorithm spelled out pod by pod, on
random clusters (hypothesis)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.labels import LabelSelector, Requirement
from gangsched.core.model import Pod, PodAffinityTerm
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

from .probe import assert_matches_reference

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


# ----------------------------------------------------------- property: upstream, spelled out
def _reference_term_matches(
    term: PodAffinityTerm, owner_namespace: str, pod: Pod, snap: Snapshot
) -> bool:
    """AffinityTerm.Matches after upstream's namespace defaulting (own namespace when the
    term lists none and has no namespaceSelector; a nil selector matches nothing)."""
    namespaces = set(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces = {owner_namespace}
    in_scope = pod.namespace in namespaces or (
        term.namespace_selector is not None
        and term.namespace_selector.matches(snap.namespace_labels.get(pod.namespace, {}))
    )
    return in_scope and term.selector is not None and term.selector.matches(pod.labels)


def _reference_verdicts(pod: Pod, snap: Snapshot) -> list[tuple[str, Code] | None]:
    """kube-scheduler's PreFilter maps and the three satisfy* checks, node by node."""
    affinity: Counter[tuple[str, str]] = Counter()
    anti: Counter[tuple[str, str]] = Counter()
    existing: Counter[tuple[str, str]] = Counter()
    for i, pods in enumerate(snap.node_pods):
        labels = snap.nodes[i].labels
        for other in pods.values():
            if pod.affinity and all(
                _reference_term_matches(t, pod.namespace, other, snap) for t in pod.affinity
            ):
                for t in pod.affinity:
                    if t.topology_key in labels:
                        affinity[(t.topology_key, labels[t.topology_key])] += 1
            for t in pod.anti_affinity:
                if _reference_term_matches(t, pod.namespace, other, snap) and (
                    t.topology_key in labels
                ):
                    anti[(t.topology_key, labels[t.topology_key])] += 1
            for t in other.anti_affinity:
                if _reference_term_matches(t, other.namespace, pod, snap) and (
                    t.topology_key in labels
                ):
                    existing[(t.topology_key, labels[t.topology_key])] += 1
    verdicts: list[tuple[str, Code] | None] = []
    for node in snap.nodes:
        labels = node.labels
        ok = True
        exist = True
        for t in pod.affinity:
            if t.topology_key not in labels:
                ok = False
            elif affinity[(t.topology_key, labels[t.topology_key])] <= 0:
                exist = False
        if ok and not exist:
            ok = not affinity and all(
                _reference_term_matches(t, pod.namespace, pod, snap) for t in pod.affinity
            )
        if not ok:
            verdicts.append((AFFINITY_REASON, Code.UNRESOLVABLE))
        elif any(
            t.topology_key in labels and anti[(t.topology_key, labels[t.topology_key])] > 0
            for t in pod.anti_affinity
        ):
            verdicts.append((ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE))
        elif any(existing[pair] > 0 for pair in labels.items()):
            verdicts.append((EXISTING_ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE))
        else:
            verdicts.append(None)
    return verdicts


_SELECTORS = st.sampled_from(
    [
        None,
        LabelSelector(),
        selector(app="x"),
        selector(app="y"),
        selector(app="x", tier="t"),
        LabelSelector(match_expressions=(Requirement("app", "In", ("x", "y")),)),
        LabelSelector(match_expressions=(Requirement("tier", "DoesNotExist"),)),
    ]
)
_TERMS = st.builds(
    PodAffinityTerm,
    selector=_SELECTORS,
    topology_key=st.sampled_from([ZONE, HOST, "rack"]),
    namespaces=st.sampled_from([frozenset(), frozenset({"other"}), frozenset({"default"})]),
    namespace_selector=st.sampled_from([None, LabelSelector(), selector(team="x")]),
)
_LABELS = st.fixed_dictionaries(
    {}, optional={"app": st.sampled_from(["x", "y"]), "tier": st.just("t")}
)


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[Pod, Snapshot]:
    count = draw(st.integers(1, 5))
    nodes = []
    for i in range(count):
        labels = draw(
            st.fixed_dictionaries(
                {}, optional={ZONE: st.sampled_from("ab"), "rack": st.sampled_from("12")}
            )
        )
        nodes.append(make_node(f"n{i}", labels=labels))
    pods = []
    for j in range(draw(st.integers(0, 8))):
        pods.append(
            make_pod(
                f"e{j}",
                namespace=draw(st.sampled_from(["default", "other", "third"])),
                node_name=f"n{draw(st.integers(0, count - 1))}",
                labels=draw(_LABELS),
                anti_affinity=tuple(draw(st.lists(_TERMS, max_size=2))),
            )
        )
    snap = snapshot(nodes, pods)
    snap.namespace_labels = {"other": {"team": "x"}}
    assumed = draw(
        st.lists(
            st.tuples(_LABELS, st.integers(0, count - 1), st.lists(_TERMS, max_size=1)),
            max_size=2,
        )
    )
    for k, (labels, node, terms) in enumerate(assumed):
        snap.assume(make_pod(f"assumed{k}", labels=labels, anti_affinity=tuple(terms)), node)
    pod = make_pod(
        "incoming",
        namespace=draw(st.sampled_from(["default", "other"])),
        labels=draw(_LABELS),
        affinity=tuple(draw(st.lists(_TERMS, max_size=2))),
        anti_affinity=tuple(draw(st.lists(_TERMS, max_size=2))),
    )
    return pod, snap


@settings(max_examples=300, deadline=None)
@given(_scenarios())
def test_matches_upstream_reference(scenario: tuple[Pod, Snapshot]) -> None:
    pod, snap = scenario
    assert_matches_reference(InterPodAffinity(), pod, snap, _reference_verdicts(pod, snap))
