"""Issue 29 item 4: a topology-constrained gang that needs preemption while one of its members
is already bound. The bound member pins the domain; the preemption search must look there
alone (finding that domain once raised "unhashable type: 'numpy.ndarray'", the domains being
put in a set), evict only there, and place the rest of the gang there, even where another
domain would be cheaper to free. Flat PodGroups, GangGroups and CompositePodGroup trees, under
both strategies."""

from __future__ import annotations

from gangsched.core.model import Dialect, Node, Pod
from gangsched.core.topology.domains import Domain, partition
from gangsched.core.topology.request import TopologyRequest
from tests.builders import cluster, group, node, pod, snapshot
from tests.unit.composite.trees import cpg, leaf, tree_cluster
from tests.unit.preemption.drive import BOTH, HIGH, settle

RACK = "example.com/rack"
UP = Dialect.UPSTREAM


def rack_nodes() -> list[Node]:
    return [node(f"{r}-{i}", 2, labels={RACK: r}) for r in "ab" for i in range(2)]


def low(name: str, on: str, cpu: int = 2, priority: int = 10) -> Pod:
    return pod(name, cpu, memory=None, node_name=on, priority=priority)


#: Rack a holds the bound member (1 of a-0's 2 CPUs) and a priority-10 pod filling a-1; rack
#: b is full of priority-5 pods, the cheaper victims, but the gang may not leave rack a.
def running() -> list[Pod]:
    return [low("a-low", "a-1"), low("b-low0", "b-0", priority=5), low("b-low1", "b-1", priority=5)]


@BOTH
def test_flat_podgroup_preempts_in_the_rack_of_its_bound_member(strategy: str) -> None:
    g = group("g", 2, priority=HIGH)
    g.topology = TopologyRequest(required=RACK)
    members = [
        pod("g-0", 1, memory=None, group="g", priority=HIGH, node_name="a-0"),
        pod("g-1", 2, memory=None, group="g", priority=HIGH, created=100.0),
    ]
    state = cluster(rack_nodes(), [*running(), *members], [g])
    out = settle(state, strategy)
    assert out.evicted == ["a-low"]
    assert out.bound == {"g-1": "a-1"}


@BOTH
def test_gang_group_preempts_in_the_rack_of_its_bound_member(strategy: str) -> None:
    """Part a is rack-constrained with a member bound in rack a; part b may go anywhere and
    fits on the unlabelled node."""
    part_a = group("a", 2, priority=HIGH, gang_group=["a", "b"])
    part_a.topology = TopologyRequest(required=RACK)
    part_b = group("b", 1, priority=HIGH, gang_group=["a", "b"])
    members = [
        pod("a-0", 1, memory=None, group="a", priority=HIGH, node_name="a-0"),
        pod("a-1", 2, memory=None, group="a", priority=HIGH, created=100.0),
        pod("b-1", 2, memory=None, group="b", priority=HIGH, created=100.0),
    ]
    nodes = [*rack_nodes(), node("spare", 2)]
    state = cluster(nodes, [*running(), *members], [part_a, part_b])
    out = settle(state, strategy)
    assert out.evicted == ["a-low"]
    assert out.bound == {"a-1": "a-1", "b-1": "spare"}


@BOTH
def test_tree_with_a_rack_constraint_preempts_in_the_rack_of_its_bound_member(
    strategy: str,
) -> None:
    """A CompositePodGroup constrained to a rack, one leaf member bound in rack a."""
    root = cpg("root", 2, priority=HIGH)
    root.topology_key = RACK
    leaves = [leaf("pa", parent="root", priority=HIGH), leaf("pb", parent="root", priority=HIGH)]
    members = [
        pod("pa-0", 1, memory=None, group="pa", dialect=UP, priority=HIGH, node_name="a-0"),
        pod("pb-0", 2, memory=None, group="pb", dialect=UP, priority=HIGH, created=100.0),
    ]
    state = tree_cluster(rack_nodes(), [*running(), *members], leaves, [root])
    out = settle(state, strategy)
    assert out.evicted == ["a-low"]
    assert out.bound == {"pb-0": "a-1"}


@BOTH
def test_tree_leaf_with_a_rack_constraint_preempts_in_the_rack_of_its_bound_member(
    strategy: str,
) -> None:
    """The constraint on the leaf PodGroup rather than on the CompositePodGroup."""
    root = cpg("root", None, priority=HIGH)
    constrained = leaf("pa", 2, parent="root", priority=HIGH)
    constrained.topology = TopologyRequest(required=RACK)
    members = [
        pod("pa-0", 1, memory=None, group="pa", dialect=UP, priority=HIGH, node_name="a-0"),
        pod("pa-1", 2, memory=None, group="pa", dialect=UP, priority=HIGH, created=100.0),
    ]
    state = tree_cluster(rack_nodes(), [*running(), *members], [constrained], [root])
    out = settle(state, strategy)
    assert out.evicted == ["a-low"]
    assert out.bound == {"pa-1": "a-1"}


def test_domains_compare_and_hash_by_their_labels() -> None:
    """A set of domains, `in` and `==` work on the labels, never on the node arrays."""
    snap = snapshot(rack_nodes())
    split = partition(snap, RACK)
    a, b = split.domains
    twin = Domain(key=a.key, value=a.value, nodes=a.nodes.copy(), mask=a.mask.copy())
    assert {a, b, twin} == {a, b}
    assert twin == a and twin != b and twin in [b, a]
    assert split.domain_of(0) in {a}
