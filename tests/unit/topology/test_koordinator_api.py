"""Koordinator's network-topology-spec annotation, resolved against ClusterNetworkTopology."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from gangsched.cli import main
from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw, pod_group_from_raw
from gangsched.core.api.dialects import KOORDINATOR_GANG_NAME, KOORDINATOR_MIN_AVAILABLE
from gangsched.core.api.fields import child
from gangsched.core.api.network_topology import (
    HOSTNAME,
    NETWORK_TOPOLOGY_SPEC,
    NetworkTopology,
    network_topology_from_raw,
)
from gangsched.core.cluster import ClusterState
from gangsched.core.topology.request import TopologyRequest
from gangsched.simulate.loader import ManifestError, load_manifests

RESOLVER = PriorityResolver()
SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"
ORIGIN = child("metadata.annotations", NETWORK_TOPOLOGY_SPEC)


def topology(*layers: dict[str, Any], name: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": name},
        "spec": {"networkTopologySpec": list(layers)},
    }


SPINE_BLOCK = topology(
    {"labelKey": [SPINE], "topologyLayer": "SpineLayer"},
    {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
    {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
)


def group(rules: Any, network: NetworkTopology | None, api: str = "sigs.k8s.io") -> Any:
    spec = rules if isinstance(rules, str) else json.dumps({"gatherStrategy": rules})
    raw = {
        "apiVersion": f"scheduling.{api}/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "annotations": {NETWORK_TOPOLOGY_SPEC: spec},
        },
        "spec": {"minMember": 2},
    }
    return pod_group_from_raw(raw, priorities=RESOLVER, network_topology=network)


def rule(layer: str, strategy: str) -> dict[str, str]:
    return {"layer": layer, "strategy": strategy}


@pytest.mark.parametrize("api", ["sigs.k8s.io", "x-k8s.io"])
def test_finest_must_gather_is_required_and_finer_layers_preferred(api: str) -> None:
    network = network_topology_from_raw([SPINE_BLOCK])
    rules = [rule("SpineLayer", "MustGather"), rule("BlockLayer", "PreferGather")]
    assert group(rules, network, api).topology == TopologyRequest(
        required=SPINE, preferred=(HOSTNAME, BLOCK), origin=ORIGIN
    )
    both = [rule("BlockLayer", "MustGather"), rule("SpineLayer", "MustGather")]
    assert group(both, network).topology == TopologyRequest(
        required=BLOCK, preferred=(HOSTNAME,), origin=ORIGIN
    )


def test_prefer_gather_alone_climbs_to_the_whole_cluster() -> None:
    network = network_topology_from_raw([SPINE_BLOCK])
    request = group([rule("BlockLayer", "PreferGather")], network).topology
    assert request is not None
    assert request.levels == (HOSTNAME, BLOCK, SPINE, None)


def test_layers_from_two_objects_combine() -> None:
    network = network_topology_from_raw(
        [
            topology({"labelKey": [SPINE], "topologyLayer": "SpineLayer"}, name="a"),
            topology(
                {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "B"},
                name="b",
            ),
        ]
    )
    assert network.finest_first() == [
        "NodeTopologyLayer",
        "B",
        "SpineLayer",
        "ClusterTopologyLayer",
    ]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            [rule("RackLayer", "MustGather")],
            r'gatherStrategy\[0\].layer: "RackLayer" is not a layer',
        ),
        ([rule("SpineLayer", "Gather")], r'strategy: "Gather" is not a gather strategy'),
        (
            [{**rule("SpineLayer", "MustGather"), "podCountMultiple": 4}],
            "podCountMultiple: 4 is not supported",
        ),
        ("{not json", "is not JSON"),
        (json.dumps({"gather": []}), 'unknown field "gather"'),
    ],
)
def test_malformed_annotation_names_the_field(rules: Any, message: str) -> None:
    network = network_topology_from_raw([SPINE_BLOCK])
    with pytest.raises(InvalidObject, match=message) as error:
        group(rules, network)
    assert "PodGroup ml/train" in str(error.value)


def test_annotation_without_any_cluster_network_topology_is_refused() -> None:
    with pytest.raises(InvalidObject, match="no ClusterNetworkTopology"):
        group([rule("SpineLayer", "MustGather")], None)


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        ({"labelKey": [SPINE, BLOCK], "topologyLayer": "L"}, "names 2 labels"),
        ({"topologyLayer": "L"}, 'labelKey: is required for layer "L"'),
        ({"labelKey": ["bad key"], "topologyLayer": "L"}, "not a valid label key"),
        ({"labelKey": [SPINE]}, "topologyLayer: is required"),
    ],
)
def test_malformed_cluster_network_topology(layer: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject, match=message) as error:
        network_topology_from_raw([topology(layer)])
    assert "ClusterNetworkTopology default" in str(error.value)


def test_layer_redefined_with_another_label_is_refused() -> None:
    first = topology({"labelKey": [SPINE], "topologyLayer": "L"}, name="a")
    second = topology({"labelKey": [BLOCK], "topologyLayer": "L"}, name="b")
    with pytest.raises(InvalidObject, match='layer "L" is already'):
        network_topology_from_raw([first, second])


def test_simulate_reads_cluster_network_topology_and_reports_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    bad = topology({"labelKey": [BLOCK], "topologyLayer": "SpineLayer"}, name="second")
    spec = json.dumps({"gatherStrategy": [rule("BlockLayer", "MustGather")]})
    pod_group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "annotations": {NETWORK_TOPOLOGY_SPEC: spec},
        },
        "spec": {"minMember": 2},
    }
    path.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [SPINE_BLOCK, pod_group]})
    )
    inventory = load_manifests([str(path)], scheduler_name="gangsched")
    assert inventory.pod_groups[0].topology == TopologyRequest(
        required=BLOCK, preferred=(HOSTNAME,), origin=ORIGIN
    )
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [SPINE_BLOCK, bad]}))
    with pytest.raises(ManifestError) as caught:
        load_manifests([str(path)], scheduler_name="gangsched")
    assert [str(p) for p in caught.value.problems] == [
        f"{path} items[1]: ClusterNetworkTopology second: "
        f'spec.networkTopologySpec[0].labelKey: layer "SpineLayer" is already "{SPINE}" in '
        'ClusterNetworkTopology "default"'
    ]


# ------------------------------------------------------- annotation gangs (no PodGroup object)
def gang_pod(name: str, spec: str | None, *, node: str | None = None) -> dict[str, Any]:
    annotations = {KOORDINATOR_GANG_NAME: "train", KOORDINATOR_MIN_AVAILABLE: "4"}
    if spec is not None:
        annotations[NETWORK_TOPOLOGY_SPEC] = spec
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": {
            "schedulerName": "gangsched",
            **({"nodeName": node} if node else {}),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
        },
    }


def block_nodes() -> list[dict[str, Any]]:
    """Spine s1: block b1 (2 nodes, room for 4 pods) and b2 (3 nodes, room for 6)."""
    layout = {"n1": "b1", "n2": "b1", "n3": "b2", "n4": "b2", "n5": "b2"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {SPINE: "s1", BLOCK: block, HOSTNAME: name}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for name, block in layout.items()
    ]


BLOCK_SPEC = json.dumps({"gatherStrategy": [rule("BlockLayer", "MustGather")]})


def run_simulate(tmp_path: Path, items: list[dict[str, Any]]) -> tuple[int, Any]:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", str(path), "-o", "json"])
    return code, (json.loads(out.getvalue()) if code == 0 else err.getvalue())


def test_annotation_gang_gathers_in_one_block(tmp_path: Path) -> None:
    """Koordinator reads the spec from an annotation gang's pods as from a PodGroup; one
    member already bound in b2 pins the gang there, though b1 holds the other three."""
    pods = [gang_pod(f"train-{i}", BLOCK_SPEC) for i in range(3)]
    pods.append(gang_pod("train-3", BLOCK_SPEC, node="n3"))
    code, result = run_simulate(tmp_path, [SPINE_BLOCK, *block_nodes(), *pods])
    assert code == 0, result
    assert {result["bound"][f"ml/train-{i}"] for i in range(3)} <= {"n3", "n4", "n5"}
    assert result["podGroups"]["ml/train"]["topology"] == {"key": BLOCK, "value": "b2"}


def test_annotation_gang_naming_an_unknown_layer_waits_with_the_reason(tmp_path: Path) -> None:
    spec = json.dumps({"gatherStrategy": [rule("RackLayer", "MustGather")]})
    pods = [gang_pod(f"train-{i}", spec) for i in range(4)]
    code, result = run_simulate(tmp_path, [SPINE_BLOCK, *block_nodes(), *pods])
    assert code == 0, result
    assert not result["bound"]
    message = result["podGroups"]["ml/train"]["message"]
    assert '"RackLayer" is not a layer of the ClusterNetworkTopology' in message
    assert f"{ORIGIN}.gatherStrategy[0].layer" in message


def test_annotation_gang_pod_with_a_malformed_spec_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidObject, match=r"gatherStrategy\[0\].strategy") as error:
        pod_from_raw(
            gang_pod("train-0", json.dumps({"gatherStrategy": [rule("BlockLayer", "Must")]})),
            priorities=RESOLVER,
        )
    assert "Pod ml/train-0" in str(error.value)


def test_annotation_gang_follows_the_layers_as_they_change() -> None:
    """The pods may be read before any ClusterNetworkTopology exists (and the layers may
    change later): the gang's constraint is resolved against the current layers."""
    pods = [pod_from_raw(gang_pod(f"train-{i}", BLOCK_SPEC), priorities=RESOLVER) for i in range(4)]
    state = ClusterState.build(scheduler_name="gangsched", nodes=[], pods=pods)
    ref = pods[0].group
    assert ref is not None
    before = state.pod_group(ref)
    assert before is not None and before.topology is not None
    assert "no ClusterNetworkTopology" in before.topology.problem
    state.network_topology = network_topology_from_raw([SPINE_BLOCK])
    after = state.pod_group(ref)
    assert after is not None
    assert after.topology == TopologyRequest(required=BLOCK, preferred=(HOSTNAME,), origin=ORIGIN)
