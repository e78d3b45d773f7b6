"""Topology per level: each constrained level's subtree in one domain, nested in its parent's."""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.model import CompositePodGroup
from gangsched.core.model import Dialect, Node, Pod, PodGroup
from gangsched.core.scheduler import SCHEDULED, UNSCHEDULABLE
from gangsched.core.topology.request import TopologyRequest
from tests.builders import node, pod
from tests.unit.composite.trees import cpg, leaf, run, tree_cluster

ZONE, RACK = "topology.kubernetes.io/zone", "example.com/rack"


def nodes(cpu: int = 2) -> list[Node]:
    layout = [("n1", "z1", "r1"), ("n2", "z1", "r2"), ("n3", "z2", "r3"), ("n4", "z2", "r4")]
    return [node(name, cpu=cpu, labels={ZONE: zone, RACK: rack}) for name, zone, rack in layout]


def labels_of(state: ClusterState, placed: Pod) -> dict[str, str]:
    assert placed.node_name is not None, placed
    return state.nodes[placed.node_name].labels


def members(group: str, count: int, start: float = 0.0, cpu: float = 1) -> list[Pod]:
    return [
        pod(f"{group}-{i}", group=group, dialect=Dialect.UPSTREAM, cpu=cpu, created=start + i)
        for i in range(count)
    ]


def constrained_tree() -> tuple[list[CompositePodGroup], list[PodGroup]]:
    job = cpg("job", 2)
    job.topology_key = ZONE
    slices = []
    for i, name in enumerate(("sa", "sb")):
        level = cpg(name, 1, parent="job", created=float(i + 1))
        level.topology_key = RACK
        slices.append(level)
    leaves = [leaf("a", 2, parent="sa"), leaf("b", 2, parent="sb", created=1)]
    return [job, *slices], leaves


def test_each_level_in_one_domain_nested_in_its_parents() -> None:
    composites, leaves = constrained_tree()
    # n1 is partly used: the tightest zone is still z1 (r2 holds one slice, r1 the other).
    busy = pod("busy", cpu=1, node_name="n3")
    state = tree_cluster(
        nodes(), [busy, *members("a", 2), *members("b", 2, start=10)], leaves, composites
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    placed = {p.name: labels_of(state, p) for p in state.pods.values() if p.group}
    assert len({labels[ZONE] for labels in placed.values()}) == 1, placed
    for group in ("a", "b"):
        racks = {labels[RACK] for name, labels in placed.items() if name.startswith(f"{group}-")}
        assert len(racks) == 1, (group, placed)


def test_a_slice_that_fits_no_rack_leaves_the_whole_tree_unbound() -> None:
    composites, leaves = constrained_tree()
    # Every rack has room for one 1-CPU pod only: each slice of two needs a rack to itself.
    state = tree_cluster(
        nodes(cpu=1),
        [*members("a", 2), *members("b", 2, start=10)],
        leaves,
        composites,
    )
    reports = run(state)
    assert [r.result for r in reports] == [UNSCHEDULABLE]
    assert all(p.node_name is None for p in state.pods.values())
    assert "no topology.kubernetes.io/zone domain holds the tree" in reports[0].message
    assert f"no {RACK} domain holds it" in reports[0].message


def test_leaf_topology_inside_a_constrained_parent() -> None:
    job = cpg("job", 2)
    job.topology_key = ZONE
    a = leaf("a", 2, parent="job")
    a.topology = TopologyRequest(required=RACK)
    b = leaf("b", 1, parent="job", created=1)
    state = tree_cluster(nodes(), [*members("a", 2), *members("b", 1, start=10)], [a, b], [job])
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    a_racks = {labels_of(state, state.pods[f"default/a-{i}"])[RACK] for i in (0, 1)}
    assert len(a_racks) == 1
    zones = {labels_of(state, p)[ZONE] for p in state.pods.values()}
    assert len(zones) == 1


def test_a_constrained_leaf_is_never_spread_by_the_tree_searches() -> None:
    # The root has no constraint of its own, so the tree-wide searches run when the greedy
    # pass fails; leaf "a" asked for one rack and every rack has room for one of its pods
    # only. Pod by pod, the two members would fit on two racks: that must not be taken.
    job = cpg("job", 2)
    a = leaf("a", 2, parent="job")
    a.topology = TopologyRequest(required=RACK)
    b = leaf("b", 1, parent="job", created=1)
    state = tree_cluster(
        nodes(cpu=1), [*members("a", 2), *members("b", 1, start=10)], [a, b], [job]
    )
    reports = run(state)
    assert [r.result for r in reports] == [UNSCHEDULABLE], reports[0].message
    assert all(p.node_name is None for p in state.pods.values())
