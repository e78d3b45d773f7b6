"""The tree cycle: all levels in one cycle, all or nothing, and better than upstream's order."""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.model import composite_ref
from gangsched.core.composite.tree import highest_all_ancestor, root_of
from gangsched.core.decisions import ERROR, SCHEDULED, UNSCHEDULABLE, WAITING, GroupOutcome
from gangsched.core.model import Dialect, DisruptionMode, Pod
from tests.builders import node, pod, ref
from tests.unit.composite.trees import cpg, leaf, run, tree_cluster

UP = Dialect.UPSTREAM


def members(group: str, count: int, cpu: float = 1, start: float = 0.0) -> list[Pod]:
    return [
        pod(f"{group}-{i}", group=group, dialect=UP, cpu=cpu, created=start + i)
        for i in range(count)
    ]


def bound(state: ClusterState, names: list[str]) -> dict[str, str | None]:
    return {name: state.pods[f"default/{name}"].node_name for name in names}


def test_a_child_that_fits_is_not_bound_when_its_parent_cannot_be_satisfied() -> None:
    """Research probe p5: root gang minGroupCount 2, child a fits, child b does not."""
    state = tree_cluster(
        [node("n1", cpu=2)],
        [*members("a", 1), *members("b", 1, cpu=4, start=10)],
        [leaf("a", parent="root"), leaf("b", parent="root", created=1)],
        [cpg("root", 2)],
    )
    reports = run(state)
    assert [r.result for r in reports] == [UNSCHEDULABLE]
    assert all(p.node_name is None for p in state.pods.values())
    outcomes = {d.group: d for d in reports[0].decisions if isinstance(d, GroupOutcome)}
    root = outcomes[composite_ref("default", "root")]
    assert root.result == UNSCHEDULABLE
    assert "minGroupCount (2) cannot be satisfied" in root.message
    assert "PodGroup default/b" in root.message


def test_search_finds_which_children_to_take_where_upstream_order_fails() -> None:
    """Upstream places a (two 1-CPU pods, spread over both nodes) first and then b (2 CPUs)
    fits nowhere; taking b first leaves one node for both pods of a."""
    state = tree_cluster(
        [node("n1", cpu=2), node("n2", cpu=2)],
        [*members("a", 2), *members("b", 1, cpu=2, start=10)],
        [leaf("a", 2, parent="root"), leaf("b", parent="root", created=1)],
        [cpg("root", 2)],
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    assert reports[0].strategy != "greedy"
    placed = bound(state, ["a-0", "a-1", "b-0"])
    assert None not in placed.values()
    assert placed["a-0"] == placed["a-1"] != placed["b-0"]


def test_three_levels_bind_whole() -> None:
    state = tree_cluster(
        [node(f"n{i}", cpu=4) for i in range(3)],
        [*members("s1", 4), *members("s2", 4, start=10), *members("head", 1, start=20)],
        [
            leaf("s1", 4, parent="slices"),
            leaf("s2", 4, parent="slices", created=1),
            leaf("head", 1, parent="job", created=2),
        ],
        [cpg("job", 2), cpg("slices", 2, parent="job", created=1)],
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED
    assert all(p.node_name is not None for p in state.pods.values())
    outcomes = {d.group.name: d.result for d in reports[0].decisions if isinstance(d, GroupOutcome)}
    assert outcomes == dict.fromkeys(["s1", "s2", "head", "job", "slices"], SCHEDULED)


def test_three_levels_bind_nothing_when_one_slice_cannot_fit() -> None:
    state = tree_cluster(
        [node(f"n{i}", cpu=4) for i in range(2)],
        [*members("s1", 4), *members("s2", 5, start=10), *members("head", 1, start=20)],
        [
            leaf("s1", 4, parent="slices"),
            leaf("s2", 5, parent="slices", created=1),
            leaf("head", 1, parent="job", created=2),
        ],
        [cpg("job", 2), cpg("slices", 2, parent="job", created=1)],
    )
    reports = run(state)
    assert [r.result for r in reports] == [UNSCHEDULABLE]
    assert all(p.node_name is None for p in state.pods.values())
    outcomes = {d.group.name: d for d in reports[0].decisions if isinstance(d, GroupOutcome)}
    assert "CompositePodGroup default/slices" in outcomes["job"].message
    assert "PodGroup default/s2" in outcomes["slices"].message


def test_basic_parent_lets_each_ready_child_go_alone() -> None:
    state = tree_cluster(
        [node("n1", cpu=2)],
        [*members("a", 2), *members("b", 3, start=10)],
        [leaf("a", 2, parent="root"), leaf("b", 3, parent="root", created=1)],
        [cpg("root")],
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED
    assert set(bound(state, ["a-0", "a-1"]).values()) == {"n1"}
    assert all(state.pods[f"default/b-{i}"].node_name is None for i in range(3))
    outcomes = {d.group.name: d.result for d in reports[0].decisions if isinstance(d, GroupOutcome)}
    assert outcomes["a"] == SCHEDULED and outcomes["root"] == SCHEDULED
    assert outcomes["b"] == UNSCHEDULABLE


def test_children_not_needed_are_still_placed_when_they_fit() -> None:
    state = tree_cluster(
        [node("n1", cpu=8)],
        [*members("a", 1), *members("b", 1, start=10), *members("c", 1, start=20)],
        [leaf(g, parent="root", created=i) for i, g in enumerate("abc")],
        [cpg("root", 1)],
    )
    run(state)
    assert all(p.node_name == "n1" for p in state.pods.values())


def test_root_not_ready_waits_without_an_attempt() -> None:
    state = tree_cluster(
        [node("n1", cpu=8)],
        [*members("a", 2), *members("b", 1, start=10)],
        [leaf("a", 3, parent="root"), leaf("b", 1, parent="root", created=1)],
        [cpg("root", 2)],
    )
    reports = run(state)
    assert [r.result for r in reports] == [WAITING]
    assert "PodGroup default/a has 2 of minCount 3 pods" in reports[0].message


def test_priority_mismatch_is_an_error_on_the_tree() -> None:
    state = tree_cluster(
        [node("n1", cpu=8)],
        [*members("a", 1), *members("b", 1, start=10)],
        [leaf("a", parent="root"), leaf("b", parent="root", priority=5, created=1)],
        [cpg("root", 1)],
    )
    reports = run(state)
    assert [r.result for r in reports] == [ERROR]
    assert "same priority as the root CompositePodGroup default/root" in reports[0].message
    assert all(p.node_name is None for p in state.pods.values())


def test_cycle_of_parents_is_an_error_and_nothing_is_placed() -> None:
    state = tree_cluster(
        [node("n1", cpu=8)],
        members("a", 1),
        [leaf("a", parent="x")],
        [cpg("x", 1, parent="y"), cpg("y", 1, parent="x")],
    )
    reports = run(state)
    assert [r.result for r in reports] == [ERROR]
    assert "cycle of parent references" in reports[0].message
    errored = {d.group for d in reports[0].decisions if isinstance(d, GroupOutcome)}
    assert composite_ref("default", "x") in errored
    assert state.pods["default/a-0"].node_name is None


def test_missing_parent_is_an_error_naming_it() -> None:
    state = tree_cluster([node("n1")], members("a", 1), [leaf("a", parent="ghost")], [])
    reports = run(state)
    assert [r.result for r in reports] == [ERROR]
    assert 'parentCompositePodGroupName "ghost", which does not exist' in reports[0].message


def test_root_of_and_the_highest_all_ancestor() -> None:
    groups = {
        g.ref: g
        for g in [
            leaf("a", parent="mid", mode=DisruptionMode.ALL),
            leaf("lone", parent=None),
        ]
    }
    composites = {
        c.ref: c
        for c in [
            cpg("top", mode=DisruptionMode.SINGLE),
            cpg("mid", parent="top", mode=DisruptionMode.ALL),
        ]
    }
    a = ref("a", dialect=UP)
    assert root_of(a, groups, composites) == composite_ref("default", "top")
    assert highest_all_ancestor(a, groups, composites) == composite_ref("default", "mid")
    lone = ref("lone", dialect=UP)
    assert root_of(lone, groups, composites) == lone
    assert highest_all_ancestor(lone, groups, composites) is None


def test_the_least_fragmented_placement_is_preferred_to_the_first_found() -> None:
    """The spreading scorer puts the gang on the idle node n2 (the greedy pass's first
    placement); n1 already runs a pod and has room for both members, so the tree cycle packs
    them there and leaves n2 whole."""
    state = tree_cluster(
        [node("n1", cpu=4), node("n2", cpu=4)],
        [pod("other", cpu=1, node_name="n1"), *members("a", 2)],
        [leaf("a", 2, parent="root")],
        [cpg("root", 1)],
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    assert reports[0].strategy == "greedy+least-fragmented"
    assert bound(state, ["a-0", "a-1"]) == {"a-0": "n1", "a-1": "n1"}


def test_the_greedy_placement_is_kept_when_it_opens_no_idle_node() -> None:
    state = tree_cluster(
        [node("n1", cpu=4), node("n2", cpu=4)],
        [pod("x", cpu=1, node_name="n1"), pod("y", cpu=1, node_name="n2"), *members("a", 2)],
        [leaf("a", 2, parent="root")],
        [cpg("root", 1)],
    )
    reports = run(state)
    assert reports[0].result == SCHEDULED, reports[0].message
    assert reports[0].strategy == "greedy"
