"""Kueue v0.15 (built from its module) gates and admits gangs that gangsched then binds whole.

Plain pods of one gang carry Kueue's pod-group label and total-count annotation and our
PodGroup's label: Kueue's pod webhook gates them (`kueue.x-k8s.io/admission`), admits the
group's Workload when the ClusterQueue's quota allows and removes the gate; gangsched holds
gated pods without marking them Unschedulable and binds the gang once it is ungated. Over quota
nothing is admitted and nothing binds until the quota frees up. batch/v1 Jobs go through Kueue
too (suspended, admitted, unsuspended, their pods created by kube-controller-manager's Job
controller).

Run with `make e2e-clients` (marker `clients`; not part of `make test`).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .clients import ClientLayout, Controller, install_client, run_client
from .conftest import Cluster
from .harness import eventually
from .k8s import JSON, Kube, condition, fake_node, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_operator import SIGS, Env

pytestmark = [pytest.mark.e2e, pytest.mark.clients, pytest.mark.asyncio(loop_scope="session")]

KUEUE = "kueue.x-k8s.io/v1beta2"
GATE = "kueue.x-k8s.io/admission"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")


KUEUE_LAYOUT = ClientLayout(
    name="kueue",
    namespace="kueue-system",
    prefix="kueue-",
    crds="config/components/crd/bases",
    conversion="config/components/crd",
    webhooks="config/components/webhook/manifests.yaml",
    rbac="config/components/rbac",
)


@pytest.fixture(scope="module")
def kueue(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controller]:
    install = install_client(cluster, tmp_path_factory.mktemp("kueue"), KUEUE_LAYOUT)
    config = install.controller_config(
        "config.kueue.x-k8s.io/v1beta2",
        namespace="kueue-system",
        integrations={"frameworks": ["batch/job", "pod"]},
    )
    # Without its own certificate rotation Kueue serves metrics with the certificate it finds
    # in the hard-coded /etc/kueue/metrics/certs (mounted from a Secret in a pod), even when
    # metrics are off; it exits without one.
    METRICS_CERTS.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        shutil.copyfile(install.tls.cert_dir / name, METRICS_CERTS / name)
    argv = [f"--config={config}", "--feature-gates=VisibilityOnDemand=false"]
    with run_client(cluster, install, argv) as controller:
        yield controller


class KueueEnv(Env):
    """A namespace with its own ClusterQueue (quota `cpu`) and LocalQueue."""

    def __init__(self, kube: Kube, sched: Gangsched, kueue: Controller) -> None:
        super().__init__(kube, sched)
        self.kueue = kueue
        self.queue = f"{self.id}-lq"
        self.cluster_queue = f"{self.id}-cq"

    async def with_quota(self, cpu: str, *, topology: str = "") -> None:
        """A ClusterQueue of `cpu` for this namespace; with `topology`, its flavor is
        topology-aware (Kueue TAS) over this test's nodes and that Topology."""
        flavor = f"{self.id}-flavor"
        flavor_spec: JSON = {}
        if topology:
            flavor_spec = {"nodeLabels": {"e2e-test": self.id}, "topologyName": topology}
        await self.kube.apply(
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor},
                "spec": flavor_spec,
            }
        )
        await self.kube.apply(
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": {"name": self.cluster_queue},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": cpu},
                                        {"name": "memory", "nominalQuota": "64Gi"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        await self.kube.apply(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": self.queue, "namespace": self.ns},
                "spec": {"clusterQueue": self.cluster_queue},
            }
        )

        async def active() -> bool:
            cq = await self.kube.get(f"/apis/{KUEUE}/clusterqueues/{self.cluster_queue}")
            return (condition(cq, "Active") or {}).get("status") == "True"

        self.kueue.assert_alive()
        await wait_for(active, timeout=30, what=f"ClusterQueue {self.cluster_queue} Active")

    async def gang(
        self, name: str, size: int, cpu: str, *, annotations: dict[str, str] | None = None
    ) -> list[str]:
        """Our PodGroup plus `size` pods Kueue manages as one pod group."""
        await self.kube.create(
            f"/apis/{SIGS}/namespaces/{self.ns}/podgroups", self.pod_group(name, size)
        )
        names = [f"{name}-{i}" for i in range(size)]
        for pod_name in names:
            body = self.pod(
                pod_name,
                cpu=cpu,
                group=name,
                labels={QUEUE_LABEL: self.queue, GROUP_LABEL: name},
            )
            body["metadata"]["annotations"] = {TOTAL_COUNT: str(size), **(annotations or {})}
            await self.create_pod(body)
        return names

    async def cleanup_queues(self) -> None:
        for path in (
            f"/apis/{KUEUE}/namespaces/{self.ns}/localqueues/{self.queue}",
            f"/apis/{KUEUE}/clusterqueues/{self.cluster_queue}",
            f"/apis/{KUEUE}/resourceflavors/{self.id}-flavor",
            f"/apis/{KUEUE}/topologies/{self.id}-topology",
        ):
            await self.kube.delete(path)


@pytest.fixture
async def env(
    kube: Kube,
    gangsched: Gangsched,  # noqa: F811
    kueue: Controller,
) -> AsyncIterator[KueueEnv]:
    e = KueueEnv(kube, gangsched, kueue)
    await e.setup()
    yield e
    await e.cleanup()
    await e.cleanup_queues()


def gates(pod: JSON) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


async def still_gated(env: KueueEnv, names: list[str], seconds: float) -> None:
    """For `seconds`, every pod stays gated and unbound, and PodScheduled keeps the API
    server's SchedulingGated reason (gangsched never marks a gated pod Unschedulable)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        pods = await env.pods()
        for name in names:
            pod = pods[name]
            assert GATE in gates(pod), f"{name} lost Kueue's gate: {pod['spec']}"
            assert not pod["spec"].get("nodeName"), f"{name} was bound while gated"
            scheduled = condition(pod, "PodScheduled") or {}
            assert scheduled.get("reason") == "SchedulingGated", (name, scheduled)
        if asyncio.get_running_loop().time() >= deadline:
            return
        await asyncio.sleep(1)


async def wait_gated(env: KueueEnv, names: list[str]) -> None:
    async def all_gated() -> bool:
        pods = await env.pods()
        return all(name in pods and GATE in gates(pods[name]) for name in names)

    await wait_for(all_gated, timeout=30, what=f"Kueue's gate on {names}")


async def test_gang_within_quota_is_admitted_and_bound_whole(env: KueueEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.with_quota(cpu="4")
    names = await env.gang("train", 3, cpu="1")
    # Kueue's webhook gated every member at creation (the gate is there before any admission).
    created = await env.pods()
    assert all(GATE in gates(created[n]) for n in names), {n: created[n]["spec"] for n in names}
    placed = await env.wait_bound(names, timeout=90)
    assert len(set(placed)) == 3

    async def admitted() -> list[JSON] | None:
        workloads = await env.kube.get(f"/apis/{KUEUE}/namespaces/{env.ns}/workloads")
        found = [
            w
            for w in workloads["items"]
            if (condition(w, "Admitted") or {}).get("status") == "True"
        ]
        return found or None

    found = await eventually(admitted, timeout=30, what="Kueue's admitted Workload")
    assert len(found) == 1, found
    env.kueue.assert_alive()


async def test_over_quota_nothing_binds_until_the_quota_frees(env: KueueEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.with_quota(cpu="4")
    first = await env.gang("first", 3, cpu="1")
    await env.wait_bound(first, timeout=90)
    # 3 of 4 CPUs are admitted: a second gang of 2 does not fit the quota (the nodes would
    # have room for it), so Kueue keeps it gated and gangsched binds none of it.
    second = await env.gang("second", 2, cpu="1")
    await wait_gated(env, second)
    await still_gated(env, second, seconds=8)
    # The first gang finishes (kwok completes only Job pods; the test plays the kubelet):
    # Kueue finishes its Workload once every member succeeded and releases its quota.
    for name in first:
        await env.kube.patch(
            f"/api/v1/namespaces/{env.ns}/pods/{name}/status",
            {"status": {"phase": "Succeeded"}},
        )
    placed = await env.wait_bound(second, timeout=120)
    assert set(placed) == set(second)
    env.kueue.assert_alive()


async def test_gang_bigger_than_the_quota_stays_gated(env: KueueEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.with_quota(cpu="4")
    names = await env.gang("huge", 5, cpu="1")
    await wait_gated(env, names)
    await still_gated(env, names, seconds=8)
    env.kueue.assert_alive()


async def test_batch_job_is_unsuspended_and_its_pods_bound(env: KueueEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.with_quota(cpu="4")
    template: dict[str, Any] = env.pod("unused", cpu="1")
    template_spec = dict(template["spec"], restartPolicy="Never")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch", "namespace": env.ns, "labels": {QUEUE_LABEL: env.queue}},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {"metadata": {"labels": {"app": "batch"}}, "spec": template_spec},
        },
    }
    await env.kube.create(f"/apis/batch/v1/namespaces/{env.ns}/jobs", job)

    async def unsuspended() -> bool:
        current = await env.kube.get(f"/apis/batch/v1/namespaces/{env.ns}/jobs/batch")
        return current["spec"].get("suspend") is False

    await wait_for(unsuspended, timeout=60, what="Kueue to unsuspend the Job")

    async def job_pods() -> list[str] | None:
        pods = await env.pods()
        names = [n for n, p in pods.items() if p["metadata"]["labels"].get("app") == "batch"]
        return names if len(names) == 2 else None

    names = await wait_for(job_pods, timeout=60, what="the Job controller's pods")
    await env.wait_bound(names, timeout=60)
    env.kueue.assert_alive()


async def test_topology_aware_admission_selectors_are_honoured(kube: Kube, env: KueueEnv) -> None:
    """Kueue TAS picks one rack for the gang and injects node selectors (removing its
    `kueue.x-k8s.io/topology` gate); gangsched places every member where they say."""
    rack_label = "e2e.gangsched.io/rack"
    racks: dict[str, str] = {}
    for rack in ("a", "b"):
        for i in range(2):
            name = f"{env.id}-{rack}{i}"
            labels = {"e2e-test": env.id, rack_label: f"{env.id}-{rack}"}
            await kube.create("/api/v1/nodes", fake_node(name, cpu="4", labels=labels))
            env.nodes.append(name)
            racks[name] = rack
    for name in racks:
        await kube.wait_for_object(
            f"/api/v1/nodes/{name}",
            lambda n: (condition(n, "Ready") or {}).get("status") == "True",
            what=f"node {name} Ready",
        )
    topology = f"{env.id}-topology"
    await kube.apply(
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": topology},
            "spec": {
                "levels": [{"nodeLabel": rack_label}, {"nodeLabel": "kubernetes.io/hostname"}]
            },
        }
    )
    await env.with_quota(cpu="16", topology=topology)
    names = await env.gang(
        "tas", 3, cpu="2", annotations={"kueue.x-k8s.io/podset-required-topology": rack_label}
    )
    placed = await env.wait_bound(names, timeout=120)
    assert len({racks[node] for node in placed.values()}) == 1, placed
    pods = await env.pods()
    for name in names:
        selector = pods[name]["spec"].get("nodeSelector") or {}
        injected = {k: v for k, v in selector.items() if k != "e2e-test"}
        assert injected, f"Kueue injected no node selector into {name}: {selector}"
        node = await kube.get(f"/api/v1/nodes/{placed[name]}")
        labels = node["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in injected.items()), (name, injected, labels)
        assert not gates(pods[name]), pods[name]["spec"].get("schedulingGates")
    env.kueue.assert_alive()
