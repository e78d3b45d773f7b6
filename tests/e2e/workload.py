"""A fault test's workload: its namespace, PriorityClasses, kwok nodes and gangs
(:class:`Workload`, :class:`Gang`, :func:`random_gangs`)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .harness import eventually
from .k8s import JSON, Kube, fake_node, pod_manifest

SIGS = "scheduling.sigs.k8s.io/v1alpha1"
GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"


# ----------------------------------------------------------------------------------- workload
@dataclass
class Gang:
    name: str
    size: int
    min_member: int
    cpu: str
    priority_class: str
    priority: int
    lone: bool = False  # a pod without a PodGroup (a gang of one)
    disruption_mode: str = "Single"

    def pod_names(self) -> list[str]:
        return [self.name] if self.lone else [f"{self.name}-{i}" for i in range(self.size)]


@dataclass
class Workload:
    kube: Kube
    id: str
    node_cpu: str = "4"
    node_memory: str = "16Gi"
    node_pods: str = "110"
    nodes: list[str] = field(default_factory=list)
    gangs: dict[str, Gang] = field(default_factory=dict)
    pod_gang: dict[str, str] = field(default_factory=dict)

    @property
    def ns(self) -> str:
        return self.id

    async def setup(self, priority_classes: dict[str, int]) -> None:
        await self.kube.create_namespace(self.ns, priority_classes)

    async def add_nodes(self, count: int) -> list[str]:
        names = [f"{self.id}-n{len(self.nodes) + i}" for i in range(count)]
        await gather_limited(
            self.kube.create(
                "/api/v1/nodes",
                fake_node(
                    n,
                    cpu=self.node_cpu,
                    memory=self.node_memory,
                    pods=self.node_pods,
                    labels={"e2e-test": self.id},
                ),
            )
            for n in names
        )
        self.nodes += names

        async def all_ready() -> bool:
            ready = await self.kube.ready_nodes(f"e2e-test={self.id}")
            return set(names) <= {n["metadata"]["name"] for n in ready}

        await eventually(all_ready, timeout=90, what=f"{count} nodes Ready")
        return names

    def pod(self, name: str, gang: Gang) -> JSON:
        labels = {"e2e-gang": gang.name}
        if not gang.lone:
            labels[GROUP_LABEL] = gang.name
        return pod_manifest(
            name,
            namespace=self.ns,
            cpu=gang.cpu,
            memory="256Mi",
            labels=labels,
            priority_class_name=gang.priority_class,
            extra_spec={"nodeSelector": {"e2e-test": self.id}, "terminationGracePeriodSeconds": 1},
        )

    async def create_gangs(self, gangs: Iterable[Gang], *, shuffle_seed: int | None = None) -> None:
        """PodGroups first, then all pods at once (in a shuffled order if a seed is given)."""
        gangs = list(gangs)
        for gang in gangs:
            self.gangs[gang.name] = gang
            for pod in gang.pod_names():
                self.pod_gang[pod] = gang.name
        await gather_limited(
            self.kube.create(f"/apis/{SIGS}/namespaces/{self.ns}/podgroups", self.pod_group(g))
            for g in gangs
            if not g.lone
        )
        pods = [(p, g) for g in gangs for p in g.pod_names()]
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(pods)
        await gather_limited(
            self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", self.pod(p, g)) for p, g in pods
        )

    def pod_group(self, gang: Gang) -> JSON:
        return {
            "apiVersion": SIGS,
            "kind": "PodGroup",
            "metadata": {"name": gang.name, "namespace": self.ns},
            "spec": {
                "minMember": gang.min_member,
                "priorityClassName": gang.priority_class,
                "disruptionMode": gang.disruption_mode,
            },
        }

    async def pods(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/api/v1/namespaces/{self.ns}/pods"))["items"]
        return {p["metadata"]["name"]: p for p in items}

    async def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            pods = await self.pods()
            await gather_limited(
                self.kube.delete(f"/api/v1/namespaces/{self.ns}/pods/{p}", grace_period_seconds=0)
                for p in pods
            )
        with contextlib.suppress(Exception):
            await self.kube.request(
                "DELETE", f"/apis/{SIGS}/namespaces/{self.ns}/podgroups", {}, ok=lambda s: True
            )
        with contextlib.suppress(Exception):
            await gather_limited(self.kube.delete(f"/api/v1/nodes/{n}") for n in self.nodes)
        with contextlib.suppress(Exception):
            await self.kube.delete(f"/api/v1/namespaces/{self.ns}")


def random_gangs(
    rng: random.Random,
    count: int,
    *,
    prefix: str,
    priority_class: str,
    priority: int,
    max_size: int = 6,
) -> list[Gang]:
    gangs = []
    for i in range(count):
        size = rng.randint(1, max_size)
        lone = size == 1 and rng.random() < 0.5
        min_member = size if size <= 2 or rng.random() < 0.7 else size - 1
        gangs.append(
            Gang(
                name=f"{prefix}{i:03d}",
                size=size,
                min_member=min_member,
                cpu=rng.choice(["500m", "1", "1500m"]),
                priority_class=priority_class,
                priority=priority,
                lone=lone,
                disruption_mode=rng.choice(["Single", "All"]),
            )
        )
    return gangs


async def gather_limited(coros: Iterable[Awaitable[Any]], limit: int = 24) -> list[Any]:
    semaphore = asyncio.Semaphore(limit)

    async def run(coro: Awaitable[Any]) -> Any:
        async with semaphore:
            return await coro

    return await asyncio.gather(*(run(c) for c in coros))
