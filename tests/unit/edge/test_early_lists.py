"""The lists `gangsched run` starts before loading the rest: nothing started where the client
cannot be set up, a list handed over once, everything closed after."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web

from gangsched.edge.dra_cache import DRA_INFORMERS, RESOURCE_API
from gangsched.edge.early_lists import (
    DISCOVERY_GROUPS,
    DRA_API,
    DRA_PATHS,
    EARLY_PATHS,
    POD_GROUP_API_GROUPS,
    SERVED_LISTS,
    SMALL_PATHS,
    EarlyLists,
    serving_version,
)
from gangsched.edge.kube import KubeError
from gangsched.edge.network_topology_cache import API_VERSION as NETWORK_TOPOLOGY_API
from gangsched.edge.network_topology_cache import PATH as NETWORK_TOPOLOGY_PATH
from gangsched.edge.volume_cache import STORAGE_INFORMERS
from gangsched.edge.watches import COMPOSITE_API_VERSION, POD_GROUP_GROUPS
from tests.builders import kubeconfig_file, loopback_api_server


async def test_no_kubeconfig_file_starts_nothing(tmp_path: Path) -> None:
    early = await EarlyLists.start(str(tmp_path / "missing"))
    assert early.kube is None and early.take("/api/v1/pods") is None
    await early.close()


async def test_lists_are_handed_over_once_and_closed(tmp_path: Path) -> None:
    # Nothing listens on port 9: every request fails, as while the API server is down; the
    # informer taking the list sees the failure and lists again.
    kubeconfig = kubeconfig_file(tmp_path / "kubeconfig", server="http://127.0.0.1:9")
    early = await EarlyLists.start(str(kubeconfig))
    assert early.kube is not None and set(early.lists) == {*EARLY_PATHS, *SMALL_PATHS}
    pods = early.take("/api/v1/pods")
    assert pods is not None and early.take("/api/v1/pods") is None
    with pytest.raises(OSError):  # aiohttp's ClientConnectorError is an OSError
        await pods.next()
    await early.close()
    assert early.kube is None and early.lists == {}
    await early.close()  # again: nothing left to do


def test_the_early_discovery_asks_what_the_watches_read() -> None:
    assert tuple(POD_GROUP_GROUPS) == POD_GROUP_API_GROUPS
    assert {path for _, path, _ in STORAGE_INFORMERS} <= set(SMALL_PATHS)
    assert {path for _, path, _ in DRA_INFORMERS} == set(DRA_PATHS)
    assert {f"/apis/{version}/{resource}" for version, resource in SERVED_LISTS} == {
        f"/apis/{COMPOSITE_API_VERSION}/compositepodgroups",
        NETWORK_TOPOLOGY_PATH,
    }
    assert DRA_API == RESOURCE_API
    assert NETWORK_TOPOLOGY_API.partition("/")[0] in DISCOVERY_GROUPS


def test_the_first_version_serving_the_resource_is_chosen() -> None:
    group = {"versions": [{"groupVersion": "g/v1"}, {"groupVersion": "g/v1beta1"}]}
    documents = {
        "g/v1": {"resources": [{"name": "priorityclasses"}]},
        "g/v1beta1": {"resources": [{"name": "podgroups"}]},
    }
    assert serving_version(group, documents, "podgroups") == "g/v1beta1"
    assert serving_version(group, {"g/v1": documents["g/v1"]}, "podgroups") == ""


async def test_discovery_and_the_pod_group_lists_go_out_early(tmp_path: Path) -> None:
    """Before the core is imported: `/apis`, every version of the groups the watches read,
    and the list of PodGroups at the first version serving them (not the preferred one)."""
    served: list[str] = []
    documents = {
        "/apis": {
            "groups": [
                {
                    "name": "scheduling.k8s.io",
                    "versions": [
                        {"groupVersion": "scheduling.k8s.io/v1"},
                        {"groupVersion": "scheduling.k8s.io/v1beta1"},
                    ],
                },
                {"name": "apps", "versions": [{"groupVersion": "apps/v1"}]},
            ]
        },
        "/apis/scheduling.k8s.io/v1": {"resources": [{"name": "priorityclasses"}]},
        "/apis/scheduling.k8s.io/v1beta1": {"resources": [{"name": "podgroups"}]},
        "/apis/scheduling.k8s.io/v1beta1/podgroups": {"items": [], "metadata": {}},
    }

    async def answer(request: web.Request) -> web.Response:
        served.append(request.path)
        if request.path in documents:
            return web.json_response(documents[request.path])
        if request.path in EARLY_PATHS:
            return web.json_response({"items": [], "metadata": {}})
        return web.json_response({"reason": "NotFound"}, status=404)

    async with loopback_api_server(tmp_path, web.get("/{tail:.*}", answer)) as kubeconfig:
        early = await EarlyLists.start(str(kubeconfig))
        try:
            await early.discovered()
            podgroups = early.take("/apis/scheduling.k8s.io/v1beta1/podgroups")
            assert podgroups is not None
            assert await podgroups.next() == b'{"items": [], "metadata": {}}'
            versions = early.answer("/apis/scheduling.k8s.io/v1")
            assert versions is not None
            assert (await versions) == documents["/apis/scheduling.k8s.io/v1"]
            dra = early.answer(DRA_API)
            assert dra is not None
            with pytest.raises(KubeError):
                await dra
            assert "/apis/apps/v1" not in served  # groups the watches never read are not asked
            early.drop_answers()
            assert early.answer("/apis") is None
        finally:
            await early.close()
    assert early.kube is None and early.lists == {} and early.gets == {}


async def test_dra_and_composite_lists_go_out_early_where_served(tmp_path: Path) -> None:
    served: list[str] = []
    versions = [{"groupVersion": "scheduling.k8s.io/v1alpha3"}]
    scheduling = {"name": "scheduling.k8s.io", "versions": versions}

    async def answer(request: web.Request) -> web.Response:
        served.append(request.path)
        if request.path == "/apis":
            return web.json_response({"groups": [scheduling]})
        if request.path == DRA_API:
            return web.json_response({"resources": [{"name": "resourceclaims"}]})
        if request.path == "/apis/scheduling.k8s.io/v1alpha3":
            return web.json_response({"resources": [{"name": "compositepodgroups"}]})
        return web.json_response({"items": [], "metadata": {}})

    async with loopback_api_server(tmp_path, web.get("/{tail:.*}", answer)) as kubeconfig:
        early = await EarlyLists.start(str(kubeconfig))
        try:
            await early.discovered()
            composites = "/apis/scheduling.k8s.io/v1alpha3/compositepodgroups"
            assert set(early.lists) == {*EARLY_PATHS, *SMALL_PATHS, *DRA_PATHS, composites}
            claims = early.take(f"{DRA_API}/resourceclaims")
            assert claims is not None
            assert await claims.next() == b'{"items": [], "metadata": {}}'
            budgets = early.take(SMALL_PATHS[2])
            assert budgets is not None
            assert await budgets.next() == b'{"items": [], "metadata": {}}'
        finally:
            await early.close()
    assert f"{DRA_API}/resourceclaims" in served
