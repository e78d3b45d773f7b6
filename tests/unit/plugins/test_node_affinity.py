"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms score."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import PreferredNodeTerm
from gangsched.core.plugins.node_affinity import REASON, NodeAffinity, PreferredNodeAffinity
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import req, snapshot, term

from .probe import context, passing, rejections, scores


# --------------------------------------------------------------------------- requirements
@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (req("zone", "In", "a", "b"), {"zone": "b"}, True),
        (req("zone", "In", "a", "b"), {"zone": "c"}, False),
        (req("zone", "In", "a"), {}, False),
        (req("zone", "NotIn", "a"), {"zone": "b"}, True),
        (req("zone", "NotIn", "a"), {"zone": "a"}, False),
        (req("zone", "NotIn", "a"), {}, True),  # a missing key is not in the set
        (req("gpu", "Exists"), {"gpu": ""}, True),
        (req("gpu", "Exists"), {}, False),
        (req("gpu", "DoesNotExist"), {}, True),
        (req("gpu", "DoesNotExist"), {"gpu": "x"}, False),
        (req("cores", "Gt", "8"), {"cores": "16"}, True),
        (req("cores", "Gt", "8"), {"cores": "8"}, False),
        (req("cores", "Lt", "8"), {"cores": "4"}, True),
        (req("cores", "Lt", "8"), {"cores": "8"}, False),
        (req("cores", "Gt", "-1"), {"cores": "0"}, True),
        (req("cores", "Gt", "8"), {"cores": "many"}, False),  # not an integer
        (req("cores", "Gt", "8"), {}, False),
        (req("cores", "Gt", "8", "9"), {"cores": "16"}, False),  # exactly one value
        (req("cores", "Lt", "x"), {"cores": "1"}, False),
        (req("cores", "Gt", "+4"), {"cores": "5"}, True),  # ParseInt takes a sign
        (req("cores", "Gt", "5"), {"cores": "1_0"}, False),  # but no underscores
        (req("cores", "Lt", "5"), {"cores": "-" + "9" * 30}, False),  # nor beyond int64
    ],
)
def test_requirement(requirement: Requirement, labels: dict[str, str], expected: bool) -> None:
    assert requirement.matches(labels) is expected


_INT = re.compile(r"[+-]?[0-9]+")


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): ASCII digits, optional sign, int64 range."""
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def reference(requirement: Requirement, labels: dict[str, str]) -> bool:
    """apimachinery's labels.Requirement.Matches, spelled out."""
    op, key, values = requirement.operator, requirement.key, requirement.values
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if key not in labels or len(values) != 1:
        return False
    have, want = _go_parse_int(labels[key]), _go_parse_int(values[0])
    if have is None or want is None:
        return False
    return have > want if op == "Gt" else have < want


_VALUES = st.one_of(
    st.sampled_from(["", "a", "b", "0", "7", "-3", "+4", "1_0", "08", "9" * 20, "1.5"]),
    st.integers(-100, 100).map(str),
    st.text(alphabet="ab019-_.", max_size=4),
)
_KEYS = st.sampled_from(["k1", "k2"])


@given(
    key=_KEYS,
    op=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    values=st.one_of(_VALUES.map(lambda v: [v]), st.lists(_VALUES, max_size=3)),
    labels=st.dictionaries(_KEYS, _VALUES, max_size=2),
)
def test_requirement_matches_reference(
    key: str, op: str, values: list[str], labels: dict[str, str]
) -> None:
    requirement = Requirement(key, op, tuple(values))
    assert requirement.matches(labels) == reference(requirement, labels)


# --------------------------------------------------------------------------------- filter
NODES = [
    make_node("n1", labels={"zone": "a", "disk": "ssd", "cores": "32"}),
    make_node("n2", labels={"zone": "a", "disk": "hdd", "cores": "8"}),
    make_node("n3", labels={"zone": "b", "disk": "ssd"}),
    make_node("n4", labels={"zone": "c"}),
]


@pytest.mark.parametrize(
    ("selector", "terms", "expected"),
    [
        pytest.param({"zone": "a"}, None, ["n1", "n2"], id="nodeSelector"),
        pytest.param({"zone": "a", "disk": "ssd"}, None, ["n1"], id="nodeSelector is ANDed"),
        pytest.param({"zone": "x"}, None, [], id="nodeSelector matching nothing"),
        pytest.param(None, [term(req("zone", "In", "b", "c"))], ["n3", "n4"], id="In"),
        pytest.param(None, [term(req("zone", "NotIn", "a"))], ["n3", "n4"], id="NotIn"),
        pytest.param(None, [term(req("disk", "Exists"))], ["n1", "n2", "n3"], id="Exists"),
        pytest.param(None, [term(req("disk", "DoesNotExist"))], ["n4"], id="DoesNotExist"),
        pytest.param(None, [term(req("cores", "Gt", "16"))], ["n1"], id="Gt"),
        pytest.param(None, [term(req("cores", "Lt", "16"))], ["n2"], id="Lt"),
        pytest.param(
            None,
            [term(req("zone", "In", "a"), req("disk", "In", "ssd"))],
            ["n1"],
            id="expressions in a term are ANDed",
        ),
        pytest.param(
            None,
            [term(req("zone", "In", "c")), term(req("disk", "In", "hdd"))],
            ["n2", "n4"],
            id="terms are ORed",
        ),
        pytest.param(
            None,
            [term(fields=[req("metadata.name", "In", "n2", "n3")])],
            ["n2", "n3"],
            id="matchFields metadata.name",
        ),
        pytest.param(
            None,
            [term(req("zone", "In", "a"), fields=[req("metadata.name", "NotIn", "n1")])],
            ["n2"],
            id="fields and expressions ANDed",
        ),
        pytest.param(None, [NodeSelectorTerm()], [], id="an empty term matches nothing"),
        pytest.param(
            None,
            [NodeSelectorTerm(), term(req("zone", "In", "b"))],
            ["n3"],
            id="an empty term among others",
        ),
        pytest.param(None, [], [], id="required affinity without terms matches nothing"),
        pytest.param(
            {"disk": "ssd"},
            [term(req("zone", "In", "b", "c"))],
            ["n3"],
            id="nodeSelector AND affinity",
        ),
    ],
)
def test_filter(
    selector: dict[str, str] | None, terms: list[NodeSelectorTerm] | None, expected: list[str]
) -> None:
    snap = snapshot(NODES)
    pod = make_pod(node_selector=selector, required_terms=terms)
    assert passing(NodeAffinity(), pod, snap) == expected
    assert rejections(NodeAffinity(), pod, snap) == {
        n.name: [(REASON, Code.UNRESOLVABLE)] for n in NODES if n.name not in expected
    }


def test_does_not_apply_without_constraints() -> None:
    snap = snapshot(NODES)
    assert not NodeAffinity().applies(context(make_pod(), snap), snap)
    assert REASON == "node(s) didn't match Pod's node affinity/selector"


def test_label_change_invalidates_the_cached_mask() -> None:
    snap = snapshot([make_node("n", labels={"zone": "a"})])
    pod = make_pod(node_selector={"zone": "b"})
    assert passing(NodeAffinity(), pod, snap) == []
    snap.update_node(make_node("n", labels={"zone": "b"}))
    assert passing(NodeAffinity(), pod, snap) == ["n"]


# ---------------------------------------------------------------------------------- score
def test_preferred_terms_score_normalised_to_the_best_node() -> None:
    snap = snapshot(NODES)
    pod = make_pod(
        preferred_terms=[
            PreferredNodeTerm(10, term(req("zone", "In", "a"))),
            PreferredNodeTerm(30, term(req("disk", "In", "ssd"))),
        ]
    )
    assert PreferredNodeAffinity().applies(context(pod, snap), snap)
    assert scores(PreferredNodeAffinity(), pod, snap) == {
        "n1": 100.0,  # 40 of 40
        "n2": 25.0,  # 10
        "n3": 75.0,  # 30
        "n4": 0.0,
    }


def test_preferred_terms_matching_nothing_score_zero() -> None:
    snap = snapshot(NODES)
    pod = make_pod(preferred_terms=[PreferredNodeTerm(5, term(req("zone", "In", "z")))])
    assert scores(PreferredNodeAffinity(), pod, snap) == dict.fromkeys(
        ["n1", "n2", "n3", "n4"], 0.0
    )


def test_no_preferred_terms_no_score() -> None:
    snap = snapshot(NODES)
    assert not PreferredNodeAffinity().applies(context(make_pod(), snap), snap)
