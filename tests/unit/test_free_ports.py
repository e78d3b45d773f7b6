"""devtools.processes.free_ports: ports for the test servers, taken below the kernel's
ephemeral range so no outgoing connection can be given one between the pick and the bind."""

from __future__ import annotations

import socket

import pytest

from devtools import processes
from devtools.processes import ephemeral_port_range, free_ports


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low, _ = ephemeral_port_range()
    ports = free_ports(8)
    assert len(set(ports)) == 8
    assert all(processes._LOWEST <= p < low for p in ports), (ports, low)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ten candidate ports, the first held by a listener: it must be skipped.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(processes, "_LOWEST", taken)
        monkeypatch.setattr(processes, "ephemeral_port_range", lambda: (taken + 10, 60999))
        ports = free_ports(1)
    assert ports[0] != taken and taken < ports[0] < taken + 10


def test_without_room_below_the_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "ephemeral_port_range", lambda: (processes._LOWEST + 1, 60999))
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(p > 0 for p in ports)
