"""Preemption for a tree: at the root only, the whole tree fits after the evictions or nothing
is evicted; a victim in a DisruptionMode All subtree goes with that subtree."""

from __future__ import annotations

from gangsched.core.model import Dialect, DisruptionMode, Pod
from tests.builders import node, pod
from tests.unit.composite.trees import cpg, leaf, tree_cluster
from tests.unit.preemption.drive import BOTH, HIGH, LOW, settle

UP = Dialect.UPSTREAM


def members(group: str, count: int, *, cpu: float, start: float, priority: int) -> list[Pod]:
    return [
        pod(f"{group}-{i}", cpu=cpu, group=group, dialect=UP, created=start + i, priority=priority)
        for i in range(count)
    ]


@BOTH
def test_nothing_is_evicted_when_only_part_of_the_tree_could_fit(strategy: str) -> None:
    """Two children of one full node each; evicting the low pod frees one node only (the
    other holds a pod of the tree's own priority): the tree cannot fit, nobody is evicted."""
    low = pod("low", cpu=4, priority=LOW, node_name="n1")
    peer = pod("peer", cpu=4, priority=HIGH, node_name="n2")
    state = tree_cluster(
        [node("n1", cpu=4), node("n2", cpu=4)],
        [
            low,
            peer,
            *members("a", 1, cpu=4, start=10, priority=HIGH),
            *members("b", 1, cpu=4, start=20, priority=HIGH),
        ],
        [
            leaf("a", parent="root", priority=HIGH),
            leaf("b", parent="root", priority=HIGH, created=1),
        ],
        [cpg("root", 2, priority=HIGH)],
    )
    out = settle(state, strategy)
    assert out.evicted == []
    assert not out.bound


@BOTH
def test_a_victim_in_an_all_mode_subtree_takes_the_whole_subtree(strategy: str) -> None:
    """The preemptor needs one node; the victim there belongs to a low tree whose middle level
    is DisruptionMode All: its sibling on the other node goes too, the rest of the low tree
    (another child of the root, Single) stays."""
    victims = [
        pod("v-a", cpu=4, priority=LOW, node_name="n1", group="va", dialect=UP),
        pod("v-b", cpu=2, priority=LOW, node_name="n2", group="vb", dialect=UP),
        pod("v-c", cpu=2, priority=LOW, node_name="n2", group="vc", dialect=UP),
    ]
    state = tree_cluster(
        [node("n1", cpu=4), node("n2", cpu=4)],
        [
            *victims,
            pod("high", cpu=4, priority=HIGH, created=50, spec_node_name="n1"),
        ],
        [
            leaf("va", parent="mid", priority=LOW),
            leaf("vb", parent="mid", priority=LOW, created=1),
            leaf("vc", parent="low-root", priority=LOW, created=2),
        ],
        [
            cpg("low-root", None, priority=LOW),
            cpg("mid", None, parent="low-root", priority=LOW, mode=DisruptionMode.ALL),
        ],
    )
    out = settle(state, strategy)
    assert sorted(out.evicted) == ["v-a", "v-b"]
    assert out.bound.get("high") == "n1"
