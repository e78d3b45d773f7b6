"""Dynamic Resource Allocation on a real control plane: `gangsched run` allocates a gang's
ResourceClaims and writes them back before any pod binds.

ResourceSlices are published by hand for a fake driver `gpu.example.com` on kwok nodes (8 GPUs
per node in two NVLink domains of 4, memory capacity); no driver or kubelet is needed to
allocate. The resourceclaim controller's part (a claim `<pod>-<claim>` from the template,
owned by the pod, named in `status.resourceClaimStatuses`) is played by the test when the
control plane runs no kube-controller-manager. kwok runs pods whatever their claims, so the
assertions are on the claims.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Cluster
from .k8s import JSON, Kube, KubeError, condition, fake_node, pod_manifest, unique_name, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
SIGS = "scheduling.sigs.k8s.io/v1alpha1"
FINALIZER = "resource.kubernetes.io/delete-protection"
#: Opaque driver configuration of the class and of the claims (copied into the allocation).
CLASS_CONFIG = {"opaque": {"driver": DRIVER, "parameters": {"kind": "GpuConfig", "mig": False}}}
CLAIM_CONFIG = {"opaque": {"driver": DRIVER, "parameters": {"sharing": {"strategy": "None"}}}}


class Env:
    def __init__(self, kube: Kube, cluster: Cluster) -> None:
        self.kube = kube
        #: kube-controller-manager's resourceclaim controller runs (hack/cluster-up.sh KCM=1).
        self.claim_controller = cluster.env.get("KCM") == "1"
        self.id = unique_name("dra")
        self.ns = self.id
        self.device_class = f"gpu-{self.id}"
        self.nodes: list[str] = []
        #: Pod name -> its generated claim's name.
        self.claim_of: dict[str, str] = {}

    async def setup(self, nodes: int) -> None:
        await self.kube.create_namespace(self.ns, {"e2e-dra-high": 1_000_000, "e2e-dra-low": 1})
        await self.kube.create(
            f"{RESOURCE}/deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": self.device_class},
                "spec": {
                    "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                    "config": [CLASS_CONFIG],
                },
            },
        )
        for i in range(nodes):
            name = f"{self.id}-n{i}"
            await self.kube.create(
                "/api/v1/nodes", fake_node(name, cpu="32", labels={"e2e-test": self.id})
            )
            await self.kube.create(f"{RESOURCE}/resourceslices", gpu_slice(name))
            self.nodes.append(name)
        for name in self.nodes:
            await self.kube.wait_for_object(
                f"/api/v1/nodes/{name}",
                lambda n: (condition(n, "Ready") or {}).get("status") == "True",
                timeout=90,
                what=f"node {name} Ready",
            )

    async def template(self, name: str, gpus: int) -> None:
        await self.kube.create(
            f"{RESOURCE}/namespaces/{self.ns}/resourceclaimtemplates",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpus",
                                    "exactly": {
                                        "deviceClassName": self.device_class,
                                        "allocationMode": "ExactCount",
                                        "count": gpus,
                                        "selectors": [
                                            {
                                                "cel": {
                                                    "expression": f'device.capacity["{DRIVER}"]'
                                                    '.memory.compareTo(quantity("40Gi")) >= 0'
                                                }
                                            }
                                        ],
                                    },
                                }
                            ],
                            "constraints": [{"matchAttribute": f"{DRIVER}/nvlinkDomain"}],
                            "config": [{"requests": ["gpus"], **CLAIM_CONFIG}],
                        }
                    }
                },
            },
        )

    async def gang(
        self, group: str, size: int, template: str, *, priority: str = "e2e-dra-low"
    ) -> list[str]:
        await self.kube.create(
            f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{self.ns}/podgroups",
            {
                "apiVersion": SIGS,
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": self.ns},
                "spec": {"minMember": size},
            },
        )
        names = []
        for i in range(size):
            name = f"{group}-{i}"
            body = pod_manifest(
                name,
                namespace=self.ns,
                cpu="1",
                labels={"pod-group.scheduling.sigs.k8s.io": group},
                priority_class_name=priority,
                extra_spec={
                    "nodeSelector": {"e2e-test": self.id},
                    "terminationGracePeriodSeconds": 1,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                },
            )
            body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
            pod = await self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", body)
            await self.generate_claim(pod, template)
            names.append(name)
        return names

    async def generate_claim(self, pod: JSON, template: str) -> None:
        """Wait for kube-controller-manager's resourceclaim controller to generate the pod's
        claim; where the control plane runs none, do what it does. (Waiting a few seconds and
        then playing it raced a slow controller: two claims for one pod.)"""
        name = pod["metadata"]["name"]
        path = f"/api/v1/namespaces/{self.ns}/pods/{name}"

        async def generated() -> str | None:
            current = await self.kube.get(path)
            for entry in (current.get("status") or {}).get("resourceClaimStatuses") or []:
                if entry.get("name") == "gpu" and entry.get("resourceClaimName"):
                    return str(entry["resourceClaimName"])
            return None

        if self.claim_controller:
            self.claim_of[name] = await wait_for(generated, timeout=90, what="claim generated")
            return
        self.claim_of[name] = f"{name}-gpu"
        raw = await self.kube.get(
            f"{RESOURCE}/namespaces/{self.ns}/resourceclaimtemplates/{template}"
        )
        await self.kube.create(
            f"{RESOURCE}/namespaces/{self.ns}/resourceclaims",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": f"{name}-gpu",
                    "namespace": self.ns,
                    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": name,
                            "uid": pod["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": raw["spec"]["spec"],
            },
        )
        await self.kube.patch(
            f"/api/v1/namespaces/{self.ns}/pods/{name}/status",
            {
                "status": {
                    "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
                }
            },
        )

    async def claims(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims"))["items"]
        return {c["metadata"]["name"]: c for c in items}

    async def cleanup(self) -> None:
        await remove_dra_objects(self.kube, self.ns, self.nodes, self.device_class)

    async def pods(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/api/v1/namespaces/{self.ns}/pods"))["items"]
        return {p["metadata"]["name"]: p for p in items}


async def remove_dra_objects(
    kube: Kube, namespace: str, nodes: list[str], device_class: str
) -> None:
    """A test's pods, PodGroups, claims (their delete protection too), nodes with their
    ResourceSlices, DeviceClass and namespace: left behind, the nodes would be heartbeated by
    kwok and listed by every scheduler for the rest of the session (and catch pods of tests
    that select no nodes)."""
    with contextlib.suppress(Exception):
        for path in (
            f"/api/v1/namespaces/{namespace}/pods",
            f"/apis/{SIGS}/namespaces/{namespace}/podgroups",
            f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups",
        ):
            await kube.delete(path, grace_period_seconds=0)
    with contextlib.suppress(Exception):
        claims = await kube.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims")
        for claim in claims["items"]:
            path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{claim['metadata']['name']}"
            if claim["metadata"].get("finalizers"):
                await kube.patch(path, {"metadata": {"finalizers": None}})
            await kube.delete(path)
    for node in nodes:
        with contextlib.suppress(Exception):
            await kube.delete(f"{RESOURCE}/resourceslices/{node}-{DRIVER}")
            await kube.delete(f"/api/v1/nodes/{node}")
    with contextlib.suppress(Exception):
        await kube.delete(f"{RESOURCE}/deviceclasses/{device_class}")
        await kube.delete(f"/api/v1/namespaces/{namespace}")


@pytest.fixture
async def env(kube: Kube, cluster: Cluster) -> AsyncIterator[Env]:
    made = Env(kube, cluster)
    try:
        yield made
    finally:
        await made.cleanup()


def gpu_slice(node: str) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "model": {"string": "H100"},
                        "nvlinkDomain": {"string": f"{node}-nvl{i // 4}"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(8)
            ],
        },
    }


def devices_of(claim: JSON) -> list[tuple[str, str, str]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [
        (r["driver"], r["pool"], r["device"])
        for r in (allocation.get("devices") or {}).get("results") or []
    ]


async def watch_order(kube: Kube, env: Env, seen: dict[str, int], stop: asyncio.Event) -> None:
    """Record in which poll each claim was first seen allocated and each pod first seen bound.

    Each poll lists the pods before the claims: a claim allocated before its pod was bound is
    then seen allocated in the same poll as the bound pod or an earlier one, so the order check
    never fails on timing alone; a claim written after the bind shows up in a later poll when
    the bind lands between two polls. A final poll after ``stop`` records what the last one
    missed.
    """
    poll = 0
    while True:
        done = stop.is_set()
        for name, pod in (await env.pods()).items():
            if pod["spec"].get("nodeName") and f"pod/{name}" not in seen:
                seen[f"pod/{name}"] = poll
        for name, claim in (await env.claims()).items():
            if devices_of(claim) and f"claim/{name}" not in seen:
                seen[f"claim/{name}"] = poll
        if done:
            return
        poll += 1
        await asyncio.sleep(0.05)


async def test_gang_claims_allocated_and_reserved_before_binding(
    kube: Kube,
    env: Env,
    gangsched: Gangsched,  # noqa: F811
) -> None:
    await env.setup(nodes=2)
    await env.template("four-gpus", 4)
    seen: dict[str, int] = {}
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_order(kube, env, seen, stop))
    try:
        names = await env.gang("train", 4, "four-gpus")

        async def all_bound() -> bool:
            pods = await env.pods()
            return all(pods[n]["spec"].get("nodeName") for n in names)

        await wait_for(all_bound, timeout=90, what="the 4-pod gang bound")
    finally:
        stop.set()
        await watcher
    gangsched.assert_alive()
    claims = await env.claims()
    pods = await env.pods()
    taken: list[tuple[str, str, str]] = []
    for name in names:
        claim = claims[env.claim_of[name]]
        pod = pods[name]
        devices = devices_of(claim)
        assert len(devices) == 4
        taken += devices
        node = pod["spec"]["nodeName"]
        assert {pool for _, pool, _ in devices} == {node}, "devices on the pod's node"
        domains = {int(device.split("-")[1]) // 4 for _, _, device in devices}
        assert len(domains) == 1, "one NVLink domain per pod"
        reserved = claim["status"].get("reservedFor") or []
        assert [(r["resource"], r["name"], r["uid"]) for r in reserved] == [
            ("pods", name, pod["metadata"]["uid"])
        ]
        assert FINALIZER in claim["metadata"].get("finalizers", [])
        selector = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
        assert selector["matchFields"][0]["values"] == [node]
        # The drivers' configuration, as kube-scheduler copies it: the class's, then the claim's.
        assert claim["status"]["allocation"]["devices"]["config"] == [
            {"source": "FromClass", "requests": ["gpus"], **CLASS_CONFIG},
            {"source": "FromClaim", "requests": ["gpus"], **CLAIM_CONFIG},
        ]
        assert claim["status"]["allocation"]["allocationTimestamp"].endswith("Z")
        # Written before the bind: the claim was seen allocated no later than its pod bound.
        assert seen[f"claim/{env.claim_of[name]}"] <= seen[f"pod/{name}"]
    assert len(taken) == len(set(taken)) == 16, "no device twice"


async def test_gang_that_cannot_get_its_devices_binds_nothing(
    kube: Kube,
    env: Env,
    gangsched: Gangsched,  # noqa: F811
) -> None:
    await env.setup(nodes=1)
    await env.template("four-gpus", 4)
    names = await env.gang("too-big", 3, "four-gpus")  # one node has two domains of 4

    async def reported() -> bool:
        pods = await env.pods()
        messages = [(condition(pods[n], "PodScheduled") or {}).get("message", "") for n in names]
        return all("cannot allocate all claims" in m for m in messages)

    await wait_for(reported, timeout=60, what="the gang reported unschedulable")
    await asyncio.sleep(2)  # nothing may bind or allocate meanwhile
    pods = await env.pods()
    assert not any(pods[n]["spec"].get("nodeName") for n in names)
    claims = await env.claims()
    assert not any(devices_of(c) for c in claims.values())


async def test_high_priority_gpu_gang_preempts_a_low_gpu_job(
    kube: Kube,
    env: Env,
    gangsched: Gangsched,  # noqa: F811
) -> None:
    await env.setup(nodes=1)
    await env.template("eight-gpus", 4)
    low = await env.gang("low", 2, "eight-gpus")  # both domains of the node

    async def low_bound() -> bool:
        pods = await env.pods()
        return all(pods[n]["spec"].get("nodeName") for n in low)

    await wait_for(low_bound, timeout=60, what="the low gang bound")
    high = await env.gang("high", 1, "eight-gpus", priority="e2e-dra-high")

    async def high_bound() -> bool:
        pods = await env.pods()
        for name in low:  # kwok does not deallocate: play the resourceclaim controller
            pod = pods.get(name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                await release(kube, env, env.claim_of[name])
        pod = pods.get(high[0])
        return bool(pod and pod["spec"].get("nodeName"))

    await wait_for(high_bound, timeout=90, what="the high gang bound after preemption")
    claims = await env.claims()
    assert len(devices_of(claims[env.claim_of[high[0]]])) == 4


async def release(kube: Kube, env: Env, claim: str) -> None:
    """Deallocate a claim whose pod is gone, as the resourceclaim controller would."""
    path = f"{RESOURCE}/namespaces/{env.ns}/resourceclaims/{claim}"
    body: Any = await kube.get_or_none(path)
    if body is None:
        return
    held = body["metadata"].get("finalizers") or []
    try:
        if (body.get("status") or {}).get("allocation"):
            patch = {"status": {"allocation": None, "reservedFor": None}}
            await kube.patch(f"{path}/status", patch)
        if FINALIZER in held:
            finalizers = [f for f in held if f != FINALIZER]
            await kube.patch(path, {"metadata": {"finalizers": finalizers or None}})
    except KubeError as exc:
        # kube-controller-manager's resourceclaim controller, where it runs, may deallocate
        # and delete the claim of a deleted pod first: our patch then finds it gone (404).
        # The API server also refuses a finalizer patch now and then with 422 "spec: Invalid
        # value: null: field is immutable" though the patch touches no spec (twice in
        # fresh-clone CI runs, the claim not being deleted): the caller polls, and the next
        # poll releases the claim again. Anything else is a real failure.
        if exc.status == 404:
            return
        if exc.status == 422 and "field is immutable" in str(exc):
            print(f"release {claim}: refused, retried at the next poll: {exc}")
            return
        current = await kube.get_or_none(path)
        if current is not None and not current["metadata"].get("deletionTimestamp"):
            raise
