"""The static PV index, updated PV by PV and claim by claim, is the index a rebuild makes.

The VolumeBook keeps one StaticIndex per node set and brings it up to date with each PV
change and each PV given to or taken back from a claim (static_index.py, book.py). Random
sequences of PV upserts and deletions (local and zonal affinity, pre-bound, released, being
deleted, two classes, labels, sizes that tie) and of PVs given and given back, looked at
between steps, must leave exactly what StaticIndex.build makes of the final state: the same
shapes in the same order, counts, free counts, PVs per node in order, pre-bound PVs.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.volumes.book import VolumeBook
from gangsched.core.volumes.model import ClaimRef, PersistentVolume
from gangsched.core.volumes.static_index import StaticIndex
from tests.builders import node, storage_class, volume_book, volume_cluster

GIB = 1024**3
NODES = [node(f"n{i}", labels={"zone": "a" if i < 2 else "b"}) for i in range(4)]
AFFINITIES: list[tuple[NodeSelectorTerm, ...] | None] = [
    None,
    *(
        (NodeSelectorTerm(match_expressions=(Requirement("kubernetes.io/hostname", "In", (n,)),)),)
        for n in ("n0", "n1", "n3", "gone")
    ),
    (NodeSelectorTerm(match_expressions=(Requirement("zone", "In", ("a",)),)),),
]

volumes = st.builds(
    PersistentVolume,
    name=st.sampled_from([f"v{i}" for i in range(6)]),
    storage_class=st.sampled_from(["local", "other"]),
    capacity=st.sampled_from([5 * GIB, 10 * GIB]),
    access_modes=st.just(frozenset({"ReadWriteOnce"})),
    labels=st.sampled_from([(), (("tier", "fast"),)]),
    node_affinity=st.sampled_from(AFFINITIES),
    claim_ref=st.sampled_from([None, None, None, ClaimRef("ns", "c0")]),
    phase=st.sampled_from(["Available", "Available", "Available", "Released"]),
    deleting=st.sampled_from([False, False, False, True]),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), volumes),
        st.tuples(st.just("delete"), st.sampled_from([f"v{i}" for i in range(6)])),
        st.tuples(st.just("take"), st.sampled_from([f"v{i}" for i in range(6)])),
        st.tuples(st.just("forget"), st.sampled_from([f"ns/c{i}" for i in range(3)])),
        st.tuples(st.just("look"), st.none()),
    ),
    max_size=40,
)


def dump(index: StaticIndex) -> dict[str, Any]:
    return {
        "shapes": index.shapes,
        "counts": {shape: counts.tolist() for shape, counts in index.counts.items()},
        "free": {shape: counts.tolist() for shape, counts in index.free.items()},
        "by_node": {
            shape: {n: [v.name for v in held] for n, held in sorted(nodes.items())}
            for shape, nodes in index.by_node.items()
        },
        "shape": index.shape,
        "affinity": index.affinity,
        "nodes_of": index.nodes_of,
        "prebound": {key: [v.name for v in held] for key, held in index.prebound.items()},
        "held": index.held,
    }


def take(book: VolumeBook, volume: str) -> None:
    """Give the PV to a claim that has none, as the book's Reserve does."""
    claim = next((f"ns/c{i}" for i in range(3) if f"ns/c{i}" not in book.assumed_volume), None)
    if claim is not None and volume not in book.taken:
        book._assume_volume([], claim, volume)


def local(name: str, *, labels: tuple[tuple[str, str], ...] = ()) -> PersistentVolume:
    return PersistentVolume(
        name=name,
        storage_class="local",
        capacity=5 * GIB,
        access_modes=frozenset({"ReadWriteOnce"}),
        labels=labels,
        node_affinity=AFFINITIES[1],
    )


@settings(max_examples=300, deadline=None)
@given(operations=operations)
# Two shapes of one size: the one whose smallest PV goes comes second.
@example(
    operations=[
        ("upsert", local("v1")),
        ("upsert", local("v2", labels=(("tier", "fast"),))),
        ("upsert", local("v3")),
        ("look", None),
        ("delete", "v1"),
    ]
)
def test_an_updated_index_is_the_rebuilt_one(operations: list[tuple[str, Any]]) -> None:
    book = volume_book(classes=[storage_class("local"), storage_class("other")])
    snap = volume_cluster(NODES, [], book=book).snapshot
    book.static_index(snap)
    for operation, argument in operations:
        if operation == "upsert":
            book.upsert_volume(argument)
        elif operation == "delete":
            book.delete_volume(argument)
        elif operation == "take":
            take(book, argument)
        elif operation == "forget":
            book.forget(argument)
        else:
            book.static_index(snap)
    updated = dump(book.static_index(snap))
    rebuilt = dump(StaticIndex.build(book.volumes.values(), snap, book.taken))
    assert updated == rebuilt


def test_a_gang_binding_local_pvs_does_not_rebuild_the_index() -> None:
    """After the first build, PVs bound by the watch are taken out one by one."""
    disks = [
        PersistentVolume(
            name=f"v{i}",
            storage_class="local",
            capacity=5 * GIB,
            access_modes=frozenset({"ReadWriteOnce"}),
            node_affinity=AFFINITIES[1 + i % 3],
        )
        for i in range(30)
    ]
    book = volume_book(volumes=disks)
    snap = volume_cluster(NODES, [], book=book).snapshot
    index = book.static_index(snap)
    for disk in disks[:10]:
        book.upsert_volume(
            PersistentVolume(
                name=disk.name,
                storage_class="local",
                capacity=5 * GIB,
                access_modes=disk.access_modes,
                node_affinity=disk.node_affinity,
                claim_ref=ClaimRef("ns", f"c-{disk.name}"),
                phase="Bound",
            )
        )
    assert book.static_index(snap) is index
    assert len(index.shape) == 20
