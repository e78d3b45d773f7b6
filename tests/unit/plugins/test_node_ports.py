"""NodePorts: host ports must be free on the node (protocol and host IP aware)."""

from __future__ import annotations

import pytest

from gangsched.core.model import HostPort
from gangsched.core.plugins.node_ports import REASON, NodePorts
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import snapshot

from .probe import context, passing, rejections


def port(number: int, protocol: str = "TCP", ip: str = "") -> HostPort:
    return HostPort(protocol=protocol, host_ip=ip, port=number)


@pytest.mark.parametrize(
    ("held", "wanted", "conflict"),
    [
        pytest.param(port(80), port(80), True, id="same port"),
        pytest.param(port(80), port(81), False, id="other port"),
        pytest.param(port(53, "UDP"), port(53, "TCP"), False, id="other protocol"),
        pytest.param(port(53, "UDP"), port(53, "UDP"), True, id="same protocol UDP"),
        pytest.param(port(80, ip="10.0.0.1"), port(80, ip="10.0.0.2"), False, id="other IPs"),
        pytest.param(port(80, ip="10.0.0.1"), port(80, ip="10.0.0.1"), True, id="same IP"),
        pytest.param(port(80, ip="0.0.0.0"), port(80, ip="10.0.0.1"), True, id="held wildcard"),
        pytest.param(port(80, ip="10.0.0.1"), port(80, ip="0.0.0.0"), True, id="wanted wildcard"),
        pytest.param(port(80), port(80, ip="10.0.0.1"), True, id="empty IP is a wildcard"),
    ],
)
def test_conflicts(held: HostPort, wanted: HostPort, conflict: bool) -> None:
    snap = snapshot(
        [make_node("busy"), make_node("free")],
        [make_pod("holder", node_name="busy", host_ports=(held,))],
    )
    pod = make_pod(host_ports=(wanted,))
    assert passing(NodePorts(), pod, snap) == (["free"] if conflict else ["busy", "free"])
    assert rejections(NodePorts(), pod, snap) == (
        {"busy": [(REASON, Code.UNSCHEDULABLE)]} if conflict else {}
    )


def test_any_of_several_ports_conflicting_rejects() -> None:
    snap = snapshot([make_node("n")], [make_pod("holder", node_name="n", host_ports=(port(443),))])
    pod = make_pod(host_ports=(port(80), port(443)))
    assert passing(NodePorts(), pod, snap) == []


def test_ports_of_pods_assumed_in_the_cycle_are_taken() -> None:
    """Assumed pods have no node_name yet; the snapshot's node index is what counts."""
    snap = snapshot([make_node("a"), make_node("b")])
    first = make_pod("first", host_ports=(port(8080),))
    snap.assume(first, snap.index["a"])
    assert first.node_name is None
    assert passing(NodePorts(), make_pod("second", host_ports=(port(8080),)), snap) == ["b"]


def test_does_not_apply_without_host_ports() -> None:
    snap = snapshot([make_node("n")], [make_pod("holder", node_name="n", host_ports=(port(80),))])
    assert not NodePorts().applies(context(make_pod(), snap), snap)
    assert REASON == "node(s) didn't have free ports for the requested pod ports"
