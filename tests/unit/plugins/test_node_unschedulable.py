"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint."""

from __future__ import annotations

import pytest

from gangsched.core.model import Toleration
from gangsched.core.plugins.node_unschedulable import REASON, NodeUnschedulable
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import snapshot

from .probe import passing, rejections

KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param((), ["open"], id="no toleration"),
        pytest.param(
            (Toleration(KEY, "Exists", "", "NoSchedule"),), ["cordoned", "open"], id="exact"
        ),
        pytest.param((Toleration(KEY, "Exists"),), ["cordoned", "open"], id="any effect"),
        pytest.param((Toleration(operator="Exists"),), ["cordoned", "open"], id="tolerate all"),
        pytest.param((Toleration(KEY, "Exists", "", "NoExecute"),), ["open"], id="wrong effect"),
        pytest.param((Toleration(KEY, "Equal", "true"),), ["open"], id="wrong value"),
        pytest.param((Toleration("other", "Exists"),), ["open"], id="other key"),
    ],
)
def test_cordoned_nodes(tolerations: tuple[Toleration, ...], expected: list[str]) -> None:
    snap = snapshot([make_node("cordoned", unschedulable=True), make_node("open")])
    pod = make_pod(tolerations=tolerations)
    assert passing(NodeUnschedulable(), pod, snap) == expected
    if "cordoned" not in expected:
        assert rejections(NodeUnschedulable(), pod, snap) == {
            "cordoned": [(REASON, Code.UNRESOLVABLE)]
        }
    assert REASON == "node(s) were unschedulable"


def test_uncordon_is_seen_after_update_node() -> None:
    snap = snapshot([make_node("n", unschedulable=True)])
    assert passing(NodeUnschedulable(), make_pod(), snap) == []
    snap.update_node(make_node("n"))
    assert passing(NodeUnschedulable(), make_pod(), snap) == ["n"]
