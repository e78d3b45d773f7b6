"""Volumes on the real control plane: gangsched as its own ServiceAccount (shipped RBAC), the
real PV controller (kube-controller-manager) and a test-side provisioner.

- a 4-pod gang with WaitForFirstConsumer claims gets all 4 provisioned on its nodes before any
  pod binds;
- a failing provisioner leaves nothing bound, the failure is recorded, and the gang is retried
  (and binds whole once provisioning works);
- a gang one of whose members has a PV pinned to a full node binds nothing;
- a missing claim is reported as kube-scheduler words it;
- a ReadWriteOncePod claim in use keeps a second pod off it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from .controller_manager import pv_controller  # noqa: F401  (fixture)
from .k8s import JSON, Kube, condition, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_operator import SIGS, Env
from .volume_provisioner import SELECTED_NODE, Provisioner

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

DRIVER = "csi.e2e.gangsched.io"
T = TypeVar("T")


class VolumeEnv(Env):
    """A test's namespace and nodes, plus its StorageClasses and PVs (cluster-scoped)."""

    def __init__(self, kube: Kube, sched: Gangsched) -> None:
        super().__init__(kube, sched)
        self.classes: list[str] = []
        self.volumes: list[str] = []

    async def storage_class(self, suffix: str, *, provisioner: str = DRIVER) -> str:
        name = f"{self.id}-{suffix}"
        await self.kube.create(
            "/apis/storage.k8s.io/v1/storageclasses",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
        self.classes.append(name)
        return name

    async def claim(
        self, name: str, storage_class: str, *, size: str = "1Gi", mode: str = "ReadWriteOnce"
    ) -> JSON:
        return await self.kube.create(
            f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {
                    "accessModes": [mode],
                    "storageClassName": storage_class,
                    "resources": {"requests": {"storage": size}},
                },
            },
        )

    async def local_volume(self, name: str, node: str, storage_class: str) -> None:
        await self.kube.create(
            "/api/v1/persistentvolumes",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": "10Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": storage_class,
                    "persistentVolumeReclaimPolicy": "Retain",
                    "local": {"path": f"/mnt/{name}"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "In",
                                            "values": [node],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
            },
        )
        self.volumes.append(name)

    def with_claims(self, pod: JSON, *claims: str) -> JSON:
        pod["spec"]["volumes"] = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}}
            for i, claim in enumerate(claims)
        ]
        return pod

    async def claims(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims"))[
            "items"
        ]
        return {c["metadata"]["name"]: c for c in items}

    async def pod_condition(self, name: str) -> JSON:
        pod = await self.kube.get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        return condition(pod, "PodScheduled") or {}

    async def kube_wait(
        self, check: Callable[[], Awaitable[T | None]], what: str, timeout: float = 90.0
    ) -> T:
        self.sched.assert_alive()
        return await wait_for(check, timeout=timeout, interval=0.3, what=what)

    async def cleanup(self) -> None:
        await super().cleanup()
        await self.kube.delete(
            f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims", grace_period_seconds=0
        )
        volumes = (await self.kube.get("/api/v1/persistentvolumes"))["items"]
        for volume in volumes:
            ref = volume["spec"].get("claimRef") or {}
            if volume["metadata"]["name"] in self.volumes or ref.get("namespace") == self.ns:
                await self.kube.delete(f"/api/v1/persistentvolumes/{volume['metadata']['name']}")
        for name in self.classes:
            await self.kube.delete(f"/apis/storage.k8s.io/v1/storageclasses/{name}")


@pytest.fixture
async def env(kube: Kube, gangsched: Gangsched, pv_controller: None) -> Any:  # noqa: F811
    e = VolumeEnv(kube, gangsched)
    await e.setup()
    yield e
    await e.cleanup()


async def create_gang(env: VolumeEnv, name: str, members: list[tuple[str, list[str]]]) -> None:
    await env.kube.create(
        f"/apis/{SIGS}/namespaces/{env.ns}/podgroups", env.pod_group(name, len(members))
    )
    for pod_name, claims in members:
        await env.create_pod(env.with_claims(env.pod(pod_name, cpu="1", group=name), *claims))


async def test_four_members_provisioned_on_their_nodes_before_any_pod_binds(
    env: VolumeEnv,
) -> None:
    await env.add_nodes(2, cpu="4")
    csi = await env.storage_class("csi")
    names = [f"w{i}" for i in range(4)]
    for name in names:
        await env.claim(f"data-{name}", csi)
    first_bound: dict[str, float] = {}  # claim or pod -> first time seen bound

    async def record() -> None:
        # Pods are listed before claims: a claim bound before a pod that this poll sees bound
        # is then seen by this poll too (listed the other way round, a claim bound between
        # the two lists, just before its pod, was recorded one poll after the pod).
        now = time.monotonic()
        pods = await env.pods()
        claims = await env.claims()
        for pod_name, pod in pods.items():
            if pod["spec"].get("nodeName"):
                first_bound.setdefault(pod_name, now)
        for claim_name, claim in claims.items():
            if claim["spec"].get("volumeName"):
                first_bound.setdefault(claim_name, now)

    async def watch() -> None:
        while True:
            await record()
            await asyncio.sleep(0.05)

    async with Provisioner(env.kube, env.ns, csi, DRIVER) as provisioner:
        watcher = asyncio.create_task(watch())
        try:
            await create_gang(env, "job", [(n, [f"data-{n}"]) for n in names])
            placed = await env.wait_bound(names, timeout=90)
        finally:
            watcher.cancel()
    await record()  # what bound since the watcher's last look

    async def all_bound() -> dict[str, JSON] | None:
        # The PV controller sets the claim's volumeName (what the scheduler waits for) and
        # then, in a second write, its phase: wait for the phase.
        claims = await env.claims()
        phases = [claims[f"data-{n}"].get("status", {}).get("phase") for n in names]
        return claims if phases == ["Bound"] * len(names) else None

    claims = await env.kube_wait(all_bound, "every claim's phase Bound", timeout=60)
    for name in names:
        claim = claims[f"data-{name}"]
        assert claim["status"]["phase"] == "Bound", claim
        assert claim["metadata"]["annotations"][SELECTED_NODE] == placed[name]
        assert provisioner.provisioned[f"data-{name}"] == placed[name]
        volume = await env.kube.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == [placed[name]]
    last_claim = max(first_bound[f"data-{n}"] for n in names)
    first_pod = min(first_bound[n] for n in names)
    assert last_claim <= first_pod, f"a pod bound before every claim was: {first_bound}"


async def test_failing_provisioner_binds_nothing_and_the_gang_is_retried(env: VolumeEnv) -> None:
    await env.add_nodes(2, cpu="4")
    csi = await env.storage_class("csi")
    names = ["a", "b"]
    for name in names:
        await env.claim(f"data-{name}", csi)
    async with Provisioner(env.kube, env.ns, csi, DRIVER, fail=True) as provisioner:
        await create_gang(env, "job", [(n, [f"data-{n}"]) for n in names])

        async def retried() -> bool:
            return sum(provisioner.failures.values()) >= 3  # the gang was tried again

        await env.kube_wait(retried, "provisioning attempted three times")
        pods = await env.pods()
        assert not any(p["spec"].get("nodeName") for p in pods.values()), pods

        async def failure_reported() -> JSON | None:
            # Written by the scheduler once it sees the failure, after the provisioner counted.
            cond = await env.pod_condition("a")
            return cond if "provisioning failed for PVC" in cond.get("message", "") else None

        cond = await env.kube_wait(failure_reported, "a says provisioning failed", timeout=60)
        assert cond.get("status") == "False", cond
        group = await env.kube.get(f"/apis/{SIGS}/namespaces/{env.ns}/podgroups/job")
        assert (group.get("status") or {}).get("scheduled", 0) == 0, group
        provisioner.fail = False
        placed = await env.wait_bound(names, timeout=90)
    claims = await env.claims()
    for name in names:
        assert claims[f"data-{name}"]["metadata"]["annotations"][SELECTED_NODE] == placed[name]


async def test_member_with_a_pv_pinned_to_a_full_node_binds_nothing(env: VolumeEnv) -> None:
    full, _ = await env.add_nodes(2, cpu="4")
    await env.create_pod(env.pod("filler", cpu="4", scheduler_name="other", node_name=full))
    local = await env.storage_class("local", provisioner="kubernetes.io/no-provisioner")
    await env.local_volume(f"{env.id}-disk", full, local)
    await env.claim("pinned", local)
    await create_gang(env, "job", [("a", []), ("b", ["pinned"])])

    async def reported() -> JSON | None:
        # Both reasons: a verdict reached before the scheduler saw the PV may name only
        # the volume.
        cond = await env.pod_condition("b")
        message = cond.get("message", "")
        return cond if "volume" in message and "Insufficient cpu" in message else None

    cond = await env.kube_wait(reported, "b reported unschedulable (volume, Insufficient cpu)")
    assert cond is not None
    assert "Insufficient cpu" in cond["message"], cond
    await asyncio.sleep(3)  # a few retries later, still nothing bound
    pods = await env.pods()
    assert not pods["a"]["spec"].get("nodeName") and not pods["b"]["spec"].get("nodeName")
    volume = await env.kube.get(f"/api/v1/persistentvolumes/{env.id}-disk")
    assert not volume["spec"].get("claimRef"), volume


async def test_missing_claim_is_reported_like_kube_scheduler(env: VolumeEnv) -> None:
    await env.add_nodes(1)
    await env.create_pod(env.with_claims(env.pod("p", cpu="1"), "nope"))

    async def reported() -> str | None:
        message = (await env.pod_condition("p")).get("message", "")
        return message if "not found" in message else None

    message = await env.kube_wait(reported, "p reported unschedulable")
    assert message is not None
    assert 'nodes are available: persistentvolumeclaim "nope" not found.' in message


async def test_read_write_once_pod_claim_in_use_keeps_a_second_pod_off(env: VolumeEnv) -> None:
    await env.add_nodes(2, cpu="4")
    csi = await env.storage_class("csi")
    await env.claim("solo", csi, mode="ReadWriteOncePod")
    async with Provisioner(env.kube, env.ns, csi, DRIVER):
        await env.create_pod(env.with_claims(env.pod("first", cpu="1"), "solo"))
        await env.wait_bound(["first"], timeout=90)
        await env.create_pod(env.with_claims(env.pod("second", cpu="1"), "solo"))

        async def reported() -> str | None:
            message = (await env.pod_condition("second")).get("message", "")
            return message if "ReadWriteOncePod" in message else None

        message = await env.kube_wait(reported, "second reported unschedulable")
    assert message is not None
    assert (
        "PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
        in message
    )
    assert not (await env.pods())["second"]["spec"].get("nodeName")
