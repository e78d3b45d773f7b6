"""Snapshot: exact rollback, nominations reserve capacity, incremental node changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.model import Node, Pod
from gangsched.core.snapshot import Snapshot
from tests.builders import node, pod


def test_rollback_restores_usage_and_pod_maps_exactly() -> None:
    running = pod("run", node_name="n1", cpu=1)
    snap = Snapshot.build([node("n1"), node("n2")], [running])
    before = snap.requested.copy()
    mark = snap.checkpoint()
    snap.assume(pod("a", cpu=2), 0)
    snap.assume(pod("b", cpu=1), 1)
    snap.remove(running)
    snap.rollback(mark)
    assert (snap.requested == before).all()
    assert set(snap.node_pods[0]) == {"default/run"} and not snap.node_pods[1]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["assume", "remove", "mark", "rollback"]),
            st.integers(0, 2),
            st.integers(1, 3),
        ),
        max_size=30,
    )
)
def test_any_sequence_rolls_back_to_its_checkpoint(ops: list[tuple[str, int, int]]) -> None:
    snap = Snapshot.build([node("n0"), node("n1"), node("n2")])
    marks: list[tuple[int, bytes, int]] = []
    placed: list[Pod] = []
    counter = 0
    for op, where, cpu in ops:
        if op == "assume":
            counter += 1
            p = pod(f"p{counter}", cpu=cpu)
            snap.assume(p, where)
            placed.append(p)
        elif op == "remove" and placed:
            p = placed.pop()
            snap.remove(p)
        elif op == "mark":
            marks.append((snap.checkpoint(), snap.requested.tobytes(), len(placed)))
        elif op == "rollback" and marks:
            mark, usage, _ = marks.pop()
            snap.rollback(mark)
            assert snap.requested.tobytes() == usage
            placed = [p for p in placed if any(p.key in m for m in snap.node_pods)]
    snap.rollback(0)
    assert not snap.requested.any()


def test_nominated_pods_reserve_capacity_for_lower_priority_pods_only() -> None:
    snap = Snapshot.build([node("n1", cpu=4)])
    nominee = pod("nominee", cpu=3, priority=100)
    nominee.nominated_node_name = "n1"
    snap.nominate(nominee, 0)
    low = snap.reserved(10, None)
    assert low is not None and int(low[0, 0]) == 3000
    assert snap.reserved(100, None) is not None
    assert snap.reserved(1000, None) is None
    assert snap.reserved(10, None, exclude=nominee.key) is None


def test_node_update_keeps_pods_and_new_resource_adds_a_column() -> None:
    snap = Snapshot.build([node("n1")], [pod("run", node_name="n1", cpu=1)])
    gen = snap.node_generation
    snap.update_node(Node("n1", labels={"zone": "a"}, allocatable={"cpu": 8000, "pods": 10}))
    assert snap.node_generation > gen
    assert int(snap.requested[0, snap.columns["cpu"]]) == 1000
    snap.update_node(Node("n1", allocatable={"cpu": 8000, "pods": 10, "nvidia.com/gpu": 4}))
    assert int(snap.allocatable[0, snap.columns["nvidia.com/gpu"]]) == 4
    assert "default/run" in snap.node_pods[0]
