"""NodeName: a pod that names its node may only go there."""

from __future__ import annotations

import pytest

from gangsched.core.plugins.node_name import REASON, NodeName
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import snapshot

from .probe import context, passing, rejections

NODES = ["a", "b", "c"]


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        pytest.param("b", ["b"], id="named node only"),
        pytest.param("missing", [], id="unknown node: nowhere"),
    ],
)
def test_named_node(wanted: str, expected: list[str]) -> None:
    snap = snapshot([make_node(n) for n in NODES])
    pod = make_pod(spec_node_name=wanted)
    assert passing(NodeName(), pod, snap) == expected
    assert rejections(NodeName(), pod, snap) == {
        n: [(REASON, Code.UNRESOLVABLE)] for n in NODES if n not in expected
    }


def test_does_not_apply_without_a_name() -> None:
    snap = snapshot([make_node(n) for n in NODES])
    assert not NodeName().applies(context(make_pod(), snap), snap)
    assert REASON == "node(s) didn't match the requested node name"
