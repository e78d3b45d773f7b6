"""core/domain_pinning.py: which domain a gated gang required in one zone is pinned to, and
how each member's required node affinity is narrowed (issue 32 item 1)."""

from __future__ import annotations

from gangsched.core.autoscaling_room import NodePool, Requirement
from gangsched.core.cluster import ClusterState
from gangsched.core.domain_pinning import (
    DOMAIN_GATE,
    domain_pins,
    is_narrowed,
    narrowed_terms,
)
from gangsched.core.labels import NodeSelectorTerm
from gangsched.core.labels import Requirement as LabelRequirement
from gangsched.core.model import Pod
from gangsched.core.topology.request import TopologyRequest
from tests.builders import cluster, gang_pods, group, node, ref

ZONE = "topology.kubernetes.io/zone"
OTHER = {"key": "e2e-test", "operator": "In", "values": ["x"]}


def gated(pods: list[Pod], *gates: str) -> list[Pod]:
    for pod in pods:
        pod.scheduling_gates = gates or (DOMAIN_GATE,)
    return pods


def state(
    *,
    members: int = 4,
    min_member: int = 4,
    cpu: int = 2,
    gates: tuple[str, ...] = (DOMAIN_GATE,),
    zones: dict[str, int] | None = None,
    pools: tuple[NodePool, ...] = (),
) -> ClusterState:
    """Nodes `zones` (zone -> free CPUs, one node each), a gang of `members` gated pods."""
    nodes = [node(f"n-{zone}", cpu, labels={ZONE: zone}) for zone, cpu in (zones or {}).items()]
    train = group("train", min_member)
    train.topology = TopologyRequest(required=ZONE, origin="test")
    built = cluster(nodes, gated(gang_pods("train", members, cpu=cpu, memory=None), *gates))
    built.upsert_group(train)
    built.node_pools.update({p.name: p for p in pools})
    return built


def test_the_zone_where_the_gang_fits_wins_over_bigger_zones_it_does_not_fit() -> None:
    pins = domain_pins(state(zones={"a": 4, "b": 8, "c": 6}))
    assert [(p.group, p.key, p.domain) for p in pins] == [(ref("train"), ZONE, "b")]
    assert [key for key, _ in pins[0].members] == [f"default/train-{i}" for i in range(4)]
    assert "fits" in pins[0].why


def test_no_zone_fits_a_pool_restricted_to_some_zones_decides() -> None:
    zones = Requirement(ZONE, "In", ("c", "d"))
    pins = domain_pins(
        state(zones={"a": 4, "c": 2}, pools=(NodePool(name="p", requirements=(zones,)),))
    )
    # c and d are launchable; c has the most free CPU.
    assert [p.domain for p in pins] == ["c"]
    assert "NodePool p" in pins[0].why


def test_a_pool_that_does_not_restrict_the_zone_may_launch_in_any_zone_the_nodes_show() -> None:
    pins = domain_pins(state(zones={"b": 2, "a": 2}, pools=(NodePool(name="p"),)))
    assert [p.domain for p in pins] == ["a"]  # equal free CPU: by name


def test_no_known_zone_no_pin() -> None:
    assert domain_pins(state(zones={}, pools=(NodePool(name="p"),))) == []


def test_incomplete_gangs_other_gates_and_ungated_members_are_not_pinned() -> None:
    big = {"a": 16}
    assert domain_pins(state(members=3, min_member=4, zones=big)) == []
    assert domain_pins(state(gates=(DOMAIN_GATE, "example.com/quota"), zones=big)) == []
    assert domain_pins(state(gates=("example.com/quota",), zones=big)) == []
    mixed = state(zones=big)
    mixed.pods["default/train-0"].scheduling_gates = ()
    assert domain_pins(mixed) == []


def test_a_domain_some_members_were_already_narrowed_to_is_kept() -> None:
    built = state(zones={"a": 16, "b": 2})
    pod = built.pods["default/train-3"]
    term = NodeSelectorTerm(match_expressions=(LabelRequirement(ZONE, "In", ("b",)),))
    pod.constraints = type(pod.constraints)(required_terms=(term,))
    assert [p.domain for p in domain_pins(built)] == ["b"]


def test_narrowing_appends_to_every_term_and_keeps_its_expressions() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [OTHER]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
                ]
            }
        }
    }
    terms = narrowed_terms(affinity, ZONE, "a")
    zone_a = {"key": ZONE, "operator": "In", "values": ["a"]}
    assert terms[0] == {"matchExpressions": [OTHER, zone_a]}
    assert terms[1]["matchExpressions"] == [zone_a]
    assert terms[1]["matchFields"][0]["key"] == "metadata.name"
    assert not is_narrowed(affinity, ZONE, "a")
    narrowed = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    assert is_narrowed(narrowed, ZONE, "a") and not is_narrowed(narrowed, ZONE, "b")
    assert narrowed_terms(narrowed, ZONE, "a") == terms  # writing it again changes nothing


def test_a_pod_without_required_affinity_gets_one_term() -> None:
    assert narrowed_terms(None, ZONE, "a") == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}
    ]


def test_a_members_own_affinity_excluding_a_zone_is_respected() -> None:
    built = state(zones={"a": 16, "b": 8})
    for pod in built.pods.values():
        term = NodeSelectorTerm(match_expressions=(LabelRequirement(ZONE, "NotIn", ("a",)),))
        pod.constraints = type(pod.constraints)(required_terms=(term,))
    assert [p.domain for p in domain_pins(built)] == ["b"]
