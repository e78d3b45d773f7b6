"""Topology-constrained gangs on a real control plane (issue 14): the upstream dialect
(scheduling.k8s.io/v1beta1 `spec.schedulingConstraints`, kept by the API server because the
local cluster runs with TopologyAwareWorkloadScheduling on) and ours (scheduling.sigs.k8s.io
`spec.topology`, validated and kept immutable by the CRD schema)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .k8s import JSON, Kube, KubeError, condition, fake_node
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_operator import SIGS, UPSTREAM, Env

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

RACK = "e2e.example.com/rack"


@pytest.fixture
async def env(kube: Kube, gangsched: Gangsched) -> Any:  # noqa: F811
    e = Env(kube, gangsched)
    await e.setup()
    yield e
    await e.cleanup()


async def add_racks(env: Env, layout: dict[str, int], cpu: str = "4") -> dict[str, str]:
    """Nodes per rack, labelled for the test and with their rack; node -> rack."""
    racks: dict[str, str] = {}
    for rack, count in layout.items():
        for i in range(count):
            name = f"{env.id}-{rack}-{i}"
            labels = {"e2e-test": env.id, RACK: rack}
            await env.kube.create("/api/v1/nodes", fake_node(name, cpu=cpu, labels=labels))
            env.nodes.append(name)
            racks[name] = rack
    for name in racks:
        await env.kube.wait_for_object(
            f"/api/v1/nodes/{name}",
            lambda n: (condition(n, "Ready") or {}).get("status") == "True",
            timeout=90,
            what=f"node {name} Ready",
        )
    return racks


def upstream_group(env: Env, name: str, min_count: int, key: str) -> JSON:
    return {
        "apiVersion": UPSTREAM,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": env.ns},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "schedulingConstraints": {"topology": [{"key": key}]},
        },
    }


async def test_upstream_gang_lands_in_one_rack(env: Env) -> None:
    # Rack a: 2 nodes (8 CPU); rack b: 3 nodes (12 CPU). Six 2-CPU members fit only in b,
    # though a and b together would hold them spread out.
    racks = await add_racks(env, {"a": 2, "b": 3})
    path = f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups"
    created = await env.kube.create(path, upstream_group(env, "train", 6, RACK))
    # The API server kept the field (the gate is on): otherwise the test proves nothing.
    assert created["spec"].get("schedulingConstraints") == {"topology": [{"key": RACK}]}
    names = [f"train-{i}" for i in range(6)]
    for name in names:
        await env.create_pod(
            env.pod(name, cpu="2", extra_spec={"schedulingGroup": {"podGroupName": "train"}})
        )
    bound = await env.wait_bound(names)
    assert {racks[node] for node in bound.values()} == {"b"}


async def test_upstream_gang_too_big_for_every_rack_says_so(env: Env) -> None:
    await add_racks(env, {"a": 1, "b": 1})
    path = f"/apis/{UPSTREAM}/namespaces/{env.ns}/podgroups"
    await env.kube.create(path, upstream_group(env, "big", 3, RACK))
    for i in range(3):
        await env.create_pod(
            env.pod(f"big-{i}", cpu="2", extra_spec={"schedulingGroup": {"podGroupName": "big"}})
        )
    expected = "2 racks too small (at most 2 of the 3 pod(s) needed fit by free capacity"
    # Wait for the verdict on the whole gang (an earlier one, while members were still
    # arriving on a loaded machine, may name the topology with other counts).
    group = await env.kube.wait_for_object(
        f"{path}/big",
        lambda g: expected in (condition(g, "PodGroupInitiallyScheduled") or {}).get("message", ""),
        timeout=60,
        what=f"the group's condition saying {expected!r}",
    )
    message = (condition(group, "PodGroupInitiallyScheduled") or {})["message"]
    pods = await env.pods()
    assert not any(p["spec"].get("nodeName") for p in pods.values()), pods
    assert expected in message and "topology" in message, message


async def test_sigs_gang_lands_in_one_rack(env: Env) -> None:
    racks = await add_racks(env, {"a": 1, "b": 2})
    path = f"/apis/{SIGS}/namespaces/{env.ns}/podgroups"
    created = await env.kube.create(path, env.pod_group("train", 3, topology={"required": RACK}))
    assert created["spec"]["topology"] == {"required": RACK}
    names = [f"train-{i}" for i in range(3)]
    for name in names:
        await env.create_pod(env.pod(name, cpu="2", group="train"))
    bound = await env.wait_bound(names)
    assert {racks[node] for node in bound.values()} == {"b"}


async def test_sigs_topology_is_validated_and_immutable(env: Env) -> None:
    path = f"/apis/{SIGS}/namespaces/{env.ns}/podgroups"
    with pytest.raises(KubeError) as refused:
        await env.kube.create(path, env.pod_group("bad", 2, topology={"required": "not a key"}))
    assert refused.value.status == 422
    await env.kube.create(path, env.pod_group("fixed", 2, topology={"required": RACK}))
    with pytest.raises(KubeError) as immutable:
        await env.kube.patch(
            f"{path}/fixed", {"spec": {"topology": {"required": "other.example.com/zone"}}}
        )
    assert "topology is immutable" in str(immutable.value)
    with pytest.raises(KubeError) as removed:
        await env.kube.patch(f"{path}/fixed", {"spec": {"topology": None}})
    assert "topology is immutable" in str(removed.value)
    await env.kube.create(path, env.pod_group("free", 2))
    with pytest.raises(KubeError) as added:
        await env.kube.patch(f"{path}/free", {"spec": {"topology": {"required": RACK}}})
    assert "topology is immutable" in str(added.value)


async def test_kubectl_get_shows_the_required_and_preferred_levels(env: Env) -> None:
    """The printer columns, as the API server renders them for `kubectl get` (a Table):
    Topology (required) by default, Preferred in the wide output (priority 1)."""
    path = f"/apis/{SIGS}/namespaces/{env.ns}/podgroups"
    zone = "topology.kubernetes.io/zone"
    await env.kube.create(
        path, env.pod_group("levels", 2, topology={"required": zone, "preferred": RACK})
    )
    table = await env.kube.request(
        "GET",
        f"{path}/levels",
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    columns = {c["name"]: (i, c["priority"]) for i, c in enumerate(table["columnDefinitions"])}
    assert columns["Topology"][1] == 0 and columns["Preferred"][1] == 1
    cells = table["rows"][0]["cells"]
    assert cells[columns["Topology"][0]] == zone
    assert cells[columns["Preferred"][0]] == RACK


NETWORK_TOPOLOGY_CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusternetworktopologies.scheduling.koordinator.sh"},
    "spec": {
        "group": "scheduling.koordinator.sh",
        "scope": "Cluster",
        "names": {
            "kind": "ClusterNetworkTopology",
            "listKind": "ClusterNetworkTopologyList",
            "plural": "clusternetworktopologies",
            "singular": "clusternetworktopology",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


async def test_koordinator_network_topology_spec_lands_in_one_block(env: Env) -> None:
    """Koordinator's annotation names a layer; the ClusterNetworkTopology, installed after
    gangsched started (found by discovery and watched), says the layer is the rack label:
    the PodGroup, refused while no layer is known, is read again and its gang lands whole
    in the one rack that holds it."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    try:
        await env.kube.create(crds, NETWORK_TOPOLOGY_CRD)
    except KubeError as error:
        if error.status != 409:
            raise
    await env.kube.wait_crd_established(NETWORK_TOPOLOGY_CRD["metadata"]["name"])
    racks = await add_racks(env, {"a": 1, "b": 2})
    layer = f"E2E{env.id.replace('-', '')}Layer"
    spec = json.dumps({"gatherStrategy": [{"layer": layer, "strategy": "MustGather"}]})
    group = env.pod_group("train", 3)
    group["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/network-topology-spec": spec
    }
    await env.kube.create(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", group)
    names = [f"train-{i}" for i in range(3)]
    for name in names:
        await env.create_pod(env.pod(name, cpu="2", group="train"))
    topology_path = "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies"
    await env.kube.create(
        topology_path,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": env.id},
            "spec": {"networkTopologySpec": [{"labelKey": [RACK], "topologyLayer": layer}]},
        },
    )
    try:
        bound = await env.wait_bound(names, timeout=120)
    finally:
        await env.kube.delete(f"{topology_path}/{env.id}")
    assert {racks[node] for node in bound.values()} == {"b"}


async def test_koordinator_annotation_gang_with_network_topology_spec(env: Env) -> None:
    """An annotation-only gang (no PodGroup object): its pods carry the gang name, size and
    network-topology-spec, as Koordinator reads them from the first member. The pods arrive
    before the ClusterNetworkTopology that defines the layer; once it exists the gang lands
    whole in the one rack that holds it."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    try:
        await env.kube.create(crds, NETWORK_TOPOLOGY_CRD)
    except KubeError as error:
        if error.status != 409:
            raise
    await env.kube.wait_crd_established(NETWORK_TOPOLOGY_CRD["metadata"]["name"])
    racks = await add_racks(env, {"a": 1, "b": 2})
    layer = f"E2E{env.id.replace('-', '')}AnnLayer"
    spec = json.dumps({"gatherStrategy": [{"layer": layer, "strategy": "MustGather"}]})
    names = [f"ann-{i}" for i in range(3)]
    for name in names:
        body = env.pod(name, cpu="2")
        body["metadata"]["annotations"] = {
            "gang.scheduling.koordinator.sh/name": "ann",
            "gang.scheduling.koordinator.sh/min-available": "3",
            "gang.scheduling.koordinator.sh/network-topology-spec": spec,
        }
        await env.create_pod(body)
    topology_path = "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies"
    await env.kube.create(
        topology_path,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": f"{env.id}-ann"},
            "spec": {"networkTopologySpec": [{"labelKey": [RACK], "topologyLayer": layer}]},
        },
    )
    try:
        bound = await env.wait_bound(names, timeout=120)
    finally:
        await env.kube.delete(f"{topology_path}/{env.id}-ann")
    assert {racks[node] for node in bound.values()} == {"b"}
