"""Side by side with the upstream kube-scheduler on the same control plane: for each volume
case, gangsched and kube-scheduler agree on where a pod can go (which of its test's nodes, by
role) and where it cannot (unschedulable). Each scheduler gets its own namespace and its own
identically shaped nodes; the real PV controller and the test provisioner serve both.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devtools.processes import free_ports

from .conftest import Cluster
from .controller_manager import pv_controller  # noqa: F401  (fixture)
from .k8s import Kube, condition
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_volumes import DRIVER, VolumeEnv
from .volume_provisioner import SELECTED_NODE, Provisioner

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

BASELINE = "kube-scheduler-baseline"
ZONE = "topology.kubernetes.io/zone"
#: Seconds an Unschedulable outcome must hold before it counts (both schedulers retry a pod
#: within this once what they lacked shows up: gangsched's backoff here is at most 2 s,
#: kube-scheduler requeues on the event with a 1 s initial backoff).
UNSCHEDULABLE_HOLDS = 4.0


@contextlib.contextmanager
def baseline_scheduler(cluster: Cluster) -> Iterator[None]:
    (port,) = free_ports(1)
    up = cluster.run_script("baseline-scheduler.sh", "up", SCHEDULER_PORT=str(port))
    if up.returncode != 0:
        pytest.fail(f"baseline-scheduler.sh failed:\n{up.stderr}")
    try:
        yield
    finally:
        cluster.run_script("baseline-scheduler.sh", "down")


@pytest.fixture(scope="module")
def baseline(cluster: Cluster) -> Iterator[None]:
    with baseline_scheduler(cluster):
        yield


@dataclass
class Outcome:
    #: The role of the node the pod went to, or "" when unschedulable.
    role: str
    message: str = ""


Case = Callable[[VolumeEnv, str], Awaitable[tuple[str, list[str]]]]


async def _nodes(env: VolumeEnv, roles: list[str], cpu: str = "4") -> dict[str, str]:
    """Nodes with a role label; returns role -> node name."""
    names = await env.add_nodes(len(roles), cpu=cpu)
    for name, role in zip(names, roles, strict=True):
        await env.kube.patch(
            f"/api/v1/nodes/{name}",
            {"metadata": {"labels": {"e2e-role": role, ZONE: role}}},
        )
    return dict(zip(roles, names, strict=True))


async def dynamic_in_allowed_zone(env: VolumeEnv, scheduler: str) -> tuple[str, list[str]]:
    await _nodes(env, ["a", "b"])
    name = f"{env.id}-zonal"
    await env.kube.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": DRIVER,
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["b"]}]}],
        },
    )
    env.classes.append(name)
    await env.claim("data", name)
    await env.create_pod(env.with_claims(env.pod("p", cpu="1", scheduler_name=scheduler), "data"))
    return name, ["p"]


async def static_local_pv(env: VolumeEnv, scheduler: str) -> tuple[str, list[str]]:
    nodes = await _nodes(env, ["plain", "disk"])
    local = await env.storage_class("local", provisioner="kubernetes.io/no-provisioner")
    await env.local_volume(f"{env.id}-disk", nodes["disk"], local)
    await env.claim("data", local)
    await env.create_pod(env.with_claims(env.pod("p", cpu="1", scheduler_name=scheduler), "data"))
    return "", ["p"]


async def pv_on_full_node(env: VolumeEnv, scheduler: str) -> tuple[str, list[str]]:
    nodes = await _nodes(env, ["full", "free"])
    await env.create_pod(
        env.pod("filler", cpu="4", scheduler_name="other", node_name=nodes["full"])
    )
    local = await env.storage_class("local", provisioner="kubernetes.io/no-provisioner")
    await env.local_volume(f"{env.id}-disk", nodes["full"], local)
    await env.claim("data", local)
    await env.create_pod(env.with_claims(env.pod("p", cpu="1", scheduler_name=scheduler), "data"))
    return "", ["p"]


async def missing_claim(env: VolumeEnv, scheduler: str) -> tuple[str, list[str]]:
    await _nodes(env, ["a"])
    await env.create_pod(env.with_claims(env.pod("p", cpu="1", scheduler_name=scheduler), "nope"))
    return "", ["p"]


async def unbound_immediate(env: VolumeEnv, scheduler: str) -> tuple[str, list[str]]:
    await _nodes(env, ["a"])
    name = f"{env.id}-immediate"
    await env.kube.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "nobody.example.com",
            "volumeBindingMode": "Immediate",
        },
    )
    env.classes.append(name)
    await env.claim("data", name)
    await env.create_pod(env.with_claims(env.pod("p", cpu="1", scheduler_name=scheduler), "data"))
    return "", ["p"]


async def read_write_once_pod_in_use(env: VolumeEnv, scheduler: str) -> tuple[str, list[str]]:
    # One node: with two identical nodes either is right for "first", and the two schedulers
    # broke that tie differently; the case is about "second", which no node can take.
    await _nodes(env, ["only"])
    csi = await env.storage_class("csi")
    await env.claim("solo", csi, mode="ReadWriteOncePod")
    await env.create_pod(
        env.with_claims(env.pod("first", cpu="1", scheduler_name=scheduler), "solo")
    )
    return csi, ["first", "second"]


CASES: dict[str, Case] = {
    "dynamic-in-allowed-zone": dynamic_in_allowed_zone,
    "static-local-pv": static_local_pv,
    "pv-on-full-node": pv_on_full_node,
    "missing-claim": missing_claim,
    "unbound-immediate": unbound_immediate,
    "rwop-in-use": read_write_once_pod_in_use,
}


async def run_case(env: VolumeEnv, case: str, scheduler: str) -> dict[str, Outcome]:
    provision_class, pods = await CASES[case](env, scheduler)
    async with contextlib.AsyncExitStack() as stack:
        if provision_class:
            await stack.enter_async_context(Provisioner(env.kube, env.ns, provision_class, DRIVER))
        if case == "rwop-in-use":
            await env.wait_bound(["first"], timeout=90)
            await env.create_pod(
                env.with_claims(env.pod("second", cpu="1", scheduler_name=scheduler), "solo")
            )
        return await settle(env, pods)


async def settle(env: VolumeEnv, names: list[str]) -> dict[str, Outcome]:
    """Each pod bound (its node's role) or reported unschedulable (its message)."""
    roles = {}
    for node in env.nodes:
        labels = (await env.kube.get(f"/api/v1/nodes/{node}"))["metadata"]["labels"]
        roles[node] = labels.get("e2e-role", "")

    async def outcomes() -> dict[str, Outcome] | None:
        pods = await env.pods()
        out: dict[str, Outcome] = {}
        for name in names:
            pod = pods[name]
            node = pod["spec"].get("nodeName")
            if node:
                out[name] = Outcome(roles.get(node, node))
                continue
            cond = condition(pod, "PodScheduled") or {}
            if cond.get("reason") != "Unschedulable":
                return None
            out[name] = Outcome("", cond.get("message", ""))
        return out

    async def settled() -> dict[str, Outcome] | None:
        # An Unschedulable verdict is final only if it holds: one reached before the
        # scheduler's informers saw the case's volume, claim or filler pod is retried.
        first = await outcomes()
        if first is None or all(o.role for o in first.values()):
            return first
        await asyncio.sleep(UNSCHEDULABLE_HOLDS)
        again = await outcomes()
        same = again is not None and {k: o.role for k, o in again.items()} == {
            k: o.role for k, o in first.items()
        }
        return first if same else None

    result = await env.kube_wait(settled, f"{names} settled", timeout=120)
    assert result is not None
    return result


@pytest.mark.parametrize("case", list(CASES))
async def test_gangsched_and_kube_scheduler_agree(
    case: str,
    kube: Kube,
    gangsched: Gangsched,  # noqa: F811
    pv_controller: None,  # noqa: F811
    baseline: None,
) -> None:
    results: dict[str, dict[str, Outcome]] = {}
    for scheduler in ("gangsched", BASELINE):
        env = VolumeEnv(kube, gangsched)
        await env.setup()
        try:
            results[scheduler] = await run_case(env, case, scheduler)
            if case == "dynamic-in-allowed-zone":
                claim = (await env.claims())["data"]
                node = (await env.pods())["p"]["spec"]["nodeName"]
                assert claim["metadata"]["annotations"][SELECTED_NODE] == node
        finally:
            await env.cleanup()
    ours, theirs = results["gangsched"], results[BASELINE]
    where: dict[str, Any] = {
        "gangsched": {k: v.role or f"unschedulable: {v.message}" for k, v in ours.items()},
        BASELINE: {k: v.role or f"unschedulable: {v.message}" for k, v in theirs.items()},
    }
    print(f"\n{case}: {where}")
    assert {k: v.role for k, v in ours.items()} == {k: v.role for k, v in theirs.items()}, where
