"""Side by side with the upstream kube-scheduler on the same control plane: for each DRA case,
gangsched and kube-scheduler agree on where the pods can go (which of the case's nodes, by
role) and where they cannot, and allocate the same requests (a `firstAvailable` alternative
by name). Which devices each picks may differ; both must give no device twice. Each scheduler
gets its own namespace, DeviceClass and identically shaped nodes; claims are named by the pods
(`resourceClaimName`), so no resourceclaim controller is involved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from .k8s import JSON, Kube, condition, fake_node, pod_manifest, unique_name, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_dra import DRIVER, RESOURCE, SIGS, devices_of, remove_dra_objects
from .test_volumes_side_by_side import BASELINE, baseline  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


@dataclass
class Outcome:
    #: Per pod: the role of its node, or "" when unschedulable.
    roles: dict[str, str]
    #: Per claim: the requests its allocation's results name (sorted), [] when unallocated.
    requests: dict[str, list[str]]
    messages: dict[str, str]


class DraEnv:
    """One scheduler's half of a case: its namespace, class, nodes (role -> name) and pods."""

    def __init__(self, kube: Kube, scheduler: str) -> None:
        self.kube = kube
        self.scheduler = scheduler
        self.id = unique_name("drasbs")
        self.ns = self.id
        self.device_class = f"gpu-{self.id}"
        self.nodes: dict[str, str] = {}
        self.claims: list[str] = []

    async def setup(self) -> None:
        await self.kube.create_namespace(self.ns, {})
        await self.kube.create(
            f"{RESOURCE}/deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": self.device_class},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            },
        )

    async def node(self, role: str, *, memory: str = "80Gi") -> str:
        """A kwok node with 8 GPUs (`memory` each) in two NVLink domains of 4."""
        name = f"{self.id}-{role}"
        await self.kube.create(
            "/api/v1/nodes",
            fake_node(name, cpu="32", labels={"e2e-test": self.id, "e2e-role": role}),
        )
        await self.kube.create(
            f"{RESOURCE}/resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{DRIVER}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{i}",
                            "attributes": {
                                "model": {"string": "H100"},
                                "nvlinkDomain": {"string": f"{name}-nvl{i // 4}"},
                            },
                            "capacity": {"memory": {"value": memory}},
                        }
                        for i in range(8)
                    ],
                },
            },
        )
        await self.kube.wait_for_object(
            f"/api/v1/nodes/{name}",
            lambda n: (condition(n, "Ready") or {}).get("status") == "True",
            what=f"node {name} Ready",
        )
        self.nodes[role] = name
        return name

    def request(self, count: int, *, min_memory: str = "", name: str = "gpus") -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": self.device_class, "count": count}
        if min_memory:
            expression = (
                f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{min_memory}")) >= 0'
            )
            exactly["selectors"] = [{"cel": {"expression": expression}}]
        return {"name": name, **exactly}

    async def claim(
        self,
        name: str,
        *,
        requests: list[dict[str, Any]],
        same_domain: bool = False,
    ) -> None:
        devices: dict[str, Any] = {"requests": requests}
        if same_domain:
            devices["constraints"] = [{"matchAttribute": f"{DRIVER}/nvlinkDomain"}]
        await self.kube.create(
            f"{RESOURCE}/namespaces/{self.ns}/resourceclaims",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"devices": devices},
            },
        )
        self.claims.append(name)

    async def exact_claim(self, name: str, count: int, **kwargs: Any) -> None:
        same_domain = bool(kwargs.pop("same_domain", False))
        request = self.request(count, **kwargs)
        await self.claim(
            name,
            requests=[{"name": request.pop("name"), "exactly": request}],
            same_domain=same_domain,
        )

    async def pod(self, name: str, claim: str, *, group: str = "") -> None:
        labels: dict[str, str] = {}
        extra: dict[str, Any] = {
            "nodeSelector": {"e2e-test": self.id},
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "gpus", "resourceClaimName": claim}],
        }
        if group and self.scheduler == "gangsched":
            labels["pod-group.scheduling.sigs.k8s.io"] = group
        elif group:
            extra["schedulingGroup"] = {"podGroupName": group}
        body = pod_manifest(
            name,
            namespace=self.ns,
            scheduler_name=self.scheduler,
            cpu="1",
            labels=labels,
            extra_spec=extra,
        )
        body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
        await self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", body)

    async def pod_group(self, name: str, size: int) -> None:
        spec: dict[str, Any]
        if self.scheduler == "gangsched":
            api, spec = SIGS, {"minMember": size}
        else:
            api, spec = (
                "scheduling.k8s.io/v1beta1",
                {"schedulingPolicy": {"gang": {"minCount": size}}},
            )
        await self.kube.create(
            f"/apis/{api}/namespaces/{self.ns}/podgroups",
            {
                "apiVersion": api,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": spec,
            },
        )

    async def pods(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/api/v1/namespaces/{self.ns}/pods"))["items"]
        return {p["metadata"]["name"]: p for p in items}

    async def claim_objects(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims"))["items"]
        return {c["metadata"]["name"]: c for c in items}

    async def wait_bound(self, names: list[str]) -> None:
        async def bound() -> bool:
            pods = await self.pods()
            return all(pods[n]["spec"].get("nodeName") for n in names)

        await wait_for(bound, timeout=90, what=f"{names} bound by {self.scheduler}")


Case = Callable[[DraEnv], Awaitable[list[str]]]
#: Seconds an Unschedulable outcome must hold before it counts (both schedulers retry a pod
#: within this once what they lacked shows up: gangsched's backoff here is at most 2 s,
#: kube-scheduler requeues on the event with a 1 s initial backoff).
UNSCHEDULABLE_HOLDS = 4.0


async def four_gpus_in_one_domain(env: DraEnv) -> list[str]:
    await env.node("only")
    await env.exact_claim("c", 4, same_domain=True)
    await env.pod("p", "c")
    return ["p"]


async def five_gpus_in_one_domain(env: DraEnv) -> list[str]:
    # 8 GPUs on the node, but a domain has only 4.
    await env.node("only")
    await env.exact_claim("c", 5, same_domain=True)
    await env.pod("p", "c")
    return ["p"]


async def memory_selector_picks_the_big_gpus(env: DraEnv) -> list[str]:
    await env.node("small", memory="40Gi")
    await env.node("big", memory="80Gi")
    await env.exact_claim("c", 2, min_memory="64Gi")
    await env.pod("p", "c")
    return ["p"]


async def first_available_falls_back(env: DraEnv) -> list[str]:
    await env.node("only")
    huge = env.request(16, name="sixteen")
    four = env.request(4, name="four")
    await env.claim("c", requests=[{"name": "gpus", "firstAvailable": [huge, four]}])
    await env.pod("p", "c")
    return ["p"]


async def devices_taken_by_another_claim(env: DraEnv) -> list[str]:
    await env.node("only")
    await env.exact_claim("all-eight", 8)
    await env.exact_claim("one", 1)
    await env.pod("first", "all-eight")
    await env.wait_bound(["first"])
    await env.pod("second", "one")
    return ["first", "second"]


async def gang_of_two_whole_nodes(env: DraEnv) -> list[str]:
    await env.node("a")
    await env.node("b")
    await env.pod_group("g", 2)
    names = []
    for i in range(2):
        await env.exact_claim(f"c{i}", 8)
        await env.pod(f"m{i}", f"c{i}", group="g")
        names.append(f"m{i}")
    return names


async def gang_of_three_on_two_nodes(env: DraEnv) -> list[str]:
    # Each member needs a whole node: the gang cannot fit, no member may bind.
    await env.node("a")
    await env.node("b")
    await env.pod_group("g", 3)
    names = []
    for i in range(3):
        await env.exact_claim(f"c{i}", 8)
        await env.pod(f"m{i}", f"c{i}", group="g")
        names.append(f"m{i}")
    return names


CASES: dict[str, Case] = {
    "four-gpus-in-one-domain": four_gpus_in_one_domain,
    "five-gpus-in-one-domain": five_gpus_in_one_domain,
    "memory-selector": memory_selector_picks_the_big_gpus,
    "first-available": first_available_falls_back,
    "devices-taken": devices_taken_by_another_claim,
    "gang-fits": gang_of_two_whole_nodes,
    "gang-too-big": gang_of_three_on_two_nodes,
}


async def settle(env: DraEnv, names: list[str]) -> Outcome:
    """Each pod bound (its node's role) or reported unschedulable; then the claims."""
    roles = {node: role for role, node in env.nodes.items()}

    async def outcomes() -> tuple[dict[str, str], dict[str, str]] | None:
        pods = await env.pods()
        where: dict[str, str] = {}
        messages: dict[str, str] = {}
        for name in names:
            pod = pods[name]
            node = pod["spec"].get("nodeName")
            if node:
                where[name] = roles.get(node, node)
                continue
            cond = condition(pod, "PodScheduled") or {}
            if cond.get("status") != "False" or cond.get("reason") != "Unschedulable":
                return None
            where[name] = ""
            messages[name] = cond.get("message", "")
        return where, messages

    async def settled() -> tuple[dict[str, str], dict[str, str]] | None:
        # An Unschedulable verdict is final only if it holds: one reached before the
        # scheduler's informers saw the case's slices or claims is retried within seconds.
        first = await outcomes()
        if first is None or all(first[0].values()):
            return first
        await asyncio.sleep(UNSCHEDULABLE_HOLDS)
        again = await outcomes()
        return first if again is not None and again[0] == first[0] else None

    found = await wait_for(settled, timeout=120, what=f"{names} settled ({env.scheduler})")
    where, messages = found
    claims = await env.claim_objects()
    taken = [d for c in claims.values() for d in devices_of(c)]
    assert len(taken) == len(set(taken)), f"{env.scheduler} gave a device twice: {taken}"
    for name, pod in (await env.pods()).items():
        node = pod["spec"].get("nodeName")
        if name not in names or not node:
            continue
        claim = claims[pod["spec"]["resourceClaims"][0]["resourceClaimName"]]
        assert {pool for _, pool, _ in devices_of(claim)} == {node}, (
            f"{env.scheduler}: {name}'s devices are not on its node {node}"
        )
        reserved = [r["name"] for r in claim["status"].get("reservedFor") or []]
        assert name in reserved, f"{env.scheduler}: claim not reserved for {name}"
    requests = {
        name: sorted(
            r["request"]
            for r in ((c.get("status") or {}).get("allocation") or {})
            .get("devices", {})
            .get("results", [])
        )
        for name, c in claims.items()
    }
    return Outcome(where, requests, messages)


@pytest.mark.parametrize("case", list(CASES))
async def test_gangsched_and_kube_scheduler_agree_on_claims(
    case: str,
    kube: Kube,
    gangsched: Gangsched,  # noqa: F811
    baseline: None,  # noqa: F811
) -> None:
    results: dict[str, Outcome] = {}
    for scheduler in ("gangsched", BASELINE):
        env = DraEnv(kube, scheduler)
        try:
            await env.setup()
            names = await CASES[case](env)
            results[scheduler] = await settle(env, names)
        finally:
            await remove_dra_objects(kube, env.ns, list(env.nodes.values()), env.device_class)
    gangsched.assert_alive()
    ours, theirs = results["gangsched"], results[BASELINE]
    print(f"\n{case}: gangsched {ours}\n{case}: kube-scheduler {theirs}")
    # Where: the same pods bound or not, to nodes of the same roles (among equal nodes either
    # scheduler may break a tie differently: compared as a multiset).
    assert sorted(ours.roles.values()) == sorted(theirs.roles.values()), (ours, theirs)
    assert {n for n, r in ours.roles.items() if r} == {n for n, r in theirs.roles.items() if r}
    # What: the same requests allocated (firstAvailable's alternative by name).
    assert ours.requests == theirs.requests, (ours, theirs)
    if case == "gang-too-big":
        assert not any(ours.roles.values()) and not any(ours.requests.values())
        assert "cannot allocate all claims" in " ".join(ours.messages.values())
