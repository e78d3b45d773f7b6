"""The snapshot's registry of cycle extensions (core/reservations.py): one per type, looked up
by type, registered on first use by the caches that need one."""

from __future__ import annotations

from gangsched.core.dra.state import DraState
from gangsched.core.reservations import Extensions
from gangsched.core.snapshot import Snapshot
from gangsched.core.volumes.book import VolumeBook


def test_one_extension_per_type_looked_up_by_type() -> None:
    first, second = VolumeBook(), VolumeBook()
    extensions: Extensions[Snapshot] = Extensions([first])
    assert extensions.get(VolumeBook) is first
    assert extensions.get(DraState) is None
    extensions.add(second)  # replaces the first, in its place
    assert extensions.get(VolumeBook) is second
    assert list(extensions) == [second]


def test_setdefault_registers_once_and_keeps_what_is_there() -> None:
    made: list[DraState] = []

    def make() -> DraState:
        made.append(DraState())
        return made[-1]

    book = VolumeBook()
    extensions: Extensions[Snapshot] = Extensions([book])
    dra = extensions.setdefault(DraState, make)
    assert extensions.setdefault(DraState, make) is dra
    assert made == [dra]
    assert extensions.setdefault(VolumeBook, VolumeBook) is book
    assert list(extensions) == [book, dra]
