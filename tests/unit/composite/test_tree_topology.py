"""Topology per level: each constrained level's subtree in one domain, nested in its parent's."""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.model import CompositePodGroup
from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE
from gangsched.core.model import Dialect, Node, Pod, PodGroup
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


# -- the least fragmented placement at every constrained level (issue 20) ---------------------
def rack_nodes() -> list[Node]:
    """Zone z1: n1 (rack r1, runs a 1-CPU pod) and n2 (rack r2, idle); zone z2: n3 (rack r3,
    idle). 4 CPUs each."""
    layout = [("n1", "z1", "r1"), ("n2", "z1", "r2"), ("n3", "z2", "r3")]
    return [node(name, cpu=4, labels={ZONE: zone, RACK: rack}) for name, zone, rack in layout]


def busy() -> Pod:
    return pod("busy", cpu=1, node_name="n1")


def placed_nodes(state: ClusterState) -> dict[str, str | None]:
    return {p.name: p.node_name for p in state.pods.values() if p.group}


def test_least_fragmented_below_a_constrained_sub_level() -> None:
    """The root has no constraint; its child CompositePodGroup keeps leaf a in one rack (r1,
    the fullest), and leaf f hangs off the root unconstrained. The spreading scorer puts f on
    an idle node; packed, f joins a on n1, which has room, and no idle node is opened."""
    job = cpg("job", 2)
    slice_ = cpg("slice", 1, parent="job")
    slice_.topology_key = RACK
    a = leaf("a", 2, parent="slice")
    f = leaf("f", 1, parent="job", created=1)
    state = tree_cluster(
        rack_nodes(), [busy(), *members("a", 2), *members("f", 1, start=10)], [a, f], [job, slice_]
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    assert reports[0].strategy == "greedy+least-fragmented"
    assert placed_nodes(state) == {"a-0": "n1", "a-1": "n1", "f-0": "n1"}


def test_least_fragmented_with_a_leaf_topology_constraint() -> None:
    """Leaf a asks for one rack itself (the tree-wide tightest search cannot keep it there):
    the packing pass still places both leaves on the node already in use."""
    job = cpg("job", 2)
    a = leaf("a", 2, parent="job")
    a.topology = TopologyRequest(required=RACK)
    f = leaf("f", 1, parent="job", created=1)
    state = tree_cluster(
        rack_nodes(), [busy(), *members("a", 2), *members("f", 1, start=10)], [a, f], [job]
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    assert reports[0].strategy == "greedy+least-fragmented"
    assert placed_nodes(state) == {"a-0": "n1", "a-1": "n1", "f-0": "n1"}


def test_least_fragmented_inside_each_of_two_nested_constrained_levels() -> None:
    """Root in one zone, a sub-level in one rack of it, and an unconstrained leaf under each:
    the zone is z1 (n1 in use), the rack r1; both loose leaves join n1 instead of opening n2,
    and the constraints hold."""
    job = cpg("job", 2)
    job.topology_key = ZONE
    slice_ = cpg("slice", 2, parent="job")
    slice_.topology_key = RACK
    a = leaf("a", 1, parent="slice")
    g = leaf("g", 1, parent="slice", created=1)
    f = leaf("f", 1, parent="job", created=2)
    pods = [busy(), *members("a", 1), *members("g", 1, start=5), *members("f", 1, start=10)]
    state = tree_cluster(rack_nodes(), pods, [a, g, f], [job, slice_])
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    assert "least-fragmented" in reports[0].strategy
    assert placed_nodes(state) == {"a-0": "n1", "g-0": "n1", "f-0": "n1"}


def test_a_packed_placement_never_leaves_its_domain() -> None:
    """Packing must not pull a constrained sub-level onto the used node outside its rack:
    slice needs two 2-CPU pods in one rack; r1 (n1, busy) has room for one only, so the slice
    goes to r2 whole even though n1 is the fullest node."""
    job = cpg("job", 1)
    slice_ = cpg("slice", 1, parent="job")
    slice_.topology_key = RACK
    a = leaf("a", 2, parent="slice")
    state = tree_cluster(rack_nodes(), [busy(), *members("a", 2, cpu=2)], [a], [job, slice_])
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    racks = {labels_of(state, state.pods[f"default/a-{i}"])[RACK] for i in (0, 1)}
    assert len(racks) == 1, racks


def test_a_sub_level_takes_the_domain_that_holds_more_of_its_children() -> None:
    """A basic level kept in one rack over two single-pod leaves: r1 (one node) is the
    tightest rack but holds one leaf only, r0 (two nodes) holds both; r0 is taken, as the
    root's domain would be, and nothing of the level lands outside it."""
    layout = [("n0", "r0"), ("n1", "r0"), ("n2", "r1")]
    one_pod_nodes = [node(n, cpu=1, pods=1, labels={RACK: rack}) for n, rack in layout]
    job = cpg("job")
    level = cpg("level", parent="job", created=1)
    level.topology_key = RACK
    g0 = leaf("g0", 1, parent="level", created=2)
    g1 = leaf("g1", 1, parent="level", created=3)
    pods = [*members("g0", 1, start=4), *members("g1", 1, start=5)]
    state = tree_cluster(one_pod_nodes, pods, [g0, g1], [job, level])
    reports = run(state)
    assert [r.result for r in reports] == [SCHEDULED], reports[0].message
    assert placed_nodes(state) == {"g0-0": "n0", "g1-0": "n1"}


def test_zones_no_member_may_use_do_not_use_up_the_domain_budget() -> None:
    """Forty CPU zones (all emptier, so tighter-looking, than none) and one GPU zone the
    members select: the forty are not candidates at all, so the GPU zone is tried although
    it comes last of 41 by name and only 32 zones are tried per level."""
    job = cpg("job", 1)
    job.topology_key = ZONE
    a = leaf("a", 2, parent="job")
    cluster_nodes = [
        node(f"c{i:02}", cpu=2, labels={ZONE: f"c{i:02}", "pool": "cpu"}) for i in range(40)
    ]
    cluster_nodes.append(node("gpu", cpu=2, labels={ZONE: "zz", "pool": "gpu"}))
    pods = [
        pod(
            f"a-{i}",
            group="a",
            dialect=Dialect.UPSTREAM,
            cpu=1,
            created=float(i),
            node_selector={"pool": "gpu"},
        )
        for i in range(2)
    ]
    state = tree_cluster(cluster_nodes, pods, [a], [job])
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    assert {p.node_name for p in state.pods.values()} == {"gpu"}


# -- whether a tree fits never depends on the least fragmented choice (issue 29) --------------
def test_a_constrained_level_keeps_the_room_its_later_siblings_need() -> None:
    """A rack-constrained level over g0 (three 1-CPU pods, minCount 2), then g1 (two 2-CPU
    pods, minCount 2), both needed by the root, on n0, n1, n2 (4, 3, 1 CPUs; 3, 2, 1 pods).
    The level used to keep its own least fragmented placement, g0 packed onto n0, and g1 then
    fitted nowhere: the tree was unschedulable though the first placement found places it.
    The least fragmented choice is made over the whole tree only."""
    n = [
        node("n0", cpu=4, pods=3, labels={RACK: "r0"}),
        node("n1", cpu=3, pods=2, labels={RACK: "r0"}),
        node("n2", cpu=1, pods=1, labels={RACK: "r0"}),
    ]
    level = cpg("level", parent="job", created=1)
    level.topology_key = RACK
    g0 = leaf("g0", 2, parent="level", created=1)
    g1 = leaf("g1", 2, parent="job", created=5)
    pods = [*members("g0", 3, start=2), *members("g1", 2, start=6, cpu=2)]
    state = tree_cluster(n, pods, [g0, g1], [cpg("job", 2), level])
    reports = run(state)
    assert [r.result for r in reports] == [SCHEDULED], reports[0].message
    assert all(p.node_name is not None for p in state.pods.values())


def test_where_the_greedy_pass_fails_below_a_constrained_level_the_packing_pass_runs() -> None:
    """The root needs a rack-constrained level over g0 (two 1-CPU pods), g1 (two 1-CPU pods)
    and g2 (one 2-CPU pod) on n0 (2 CPUs, 2 pods) and n1 (4 CPUs, 3 pods): it fits exactly.
    Spread by the default scorer, g0 and g1 leave no node with 2 CPUs for g2; the tree-wide
    searches know no domains, so the level-by-level pass with nodes in use scored first is
    the fallback (before, the tree fitted only through the level's own packing choice)."""
    n = [
        node("n0", cpu=2, pods=2, labels={RACK: "r0"}),
        node("n1", cpu=4, pods=3, labels={RACK: "r0"}),
    ]
    level = cpg("level", parent="job", created=1)
    level.topology_key = RACK
    g0 = leaf("g0", 1, parent="level", created=1)
    g1 = leaf("g1", 1, parent="job", created=4)
    g2 = leaf("g2", 1, parent="job", created=7)
    pods = [*members("g0", 2, start=2), *members("g1", 2, start=5), *members("g2", 1, 8, cpu=2)]
    state = tree_cluster(n, pods, [g0, g1, g2], [cpg("job", 3), level])
    reports = run(state)
    assert [r.result for r in reports] == [SCHEDULED], reports[0].message
    assert reports[0].strategy == "greedy-packing"
    assert placed_nodes(state) == {
        "g0-0": "n0",
        "g0-1": "n0",
        "g1-0": "n1",
        "g1-1": "n1",
        "g2-0": "n1",
    }
