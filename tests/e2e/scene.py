"""A test's own corner of the shared e2e cluster: a namespace with its PriorityClasses, kwok
nodes labelled for the test alone, and the pods and PodGroups placed on them.

Several test modules share one control plane, so every pod a Scene makes selects the Scene's
nodes (nodeSelector e2e-test=<id>) and nothing of another test can land there or be taken for a
victim. The common opening, "every node 3/4 full of low-priority pods placed by another
scheduler", is `victims_on_every_node`.
"""

from __future__ import annotations

from typing import Any

from .k8s import JSON, Kube, condition, fake_node, pod_manifest, unique_name, wait_for

SIGS = "scheduling.sigs.k8s.io/v1alpha1"
GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"


class Scene:
    def __init__(
        self,
        kube: Kube,
        prefix: str,
        *,
        priority_classes: dict[str, int],
        nodes: int = 2,
        node_cpu: str = "4",
    ) -> None:
        self.kube = kube
        self.id = unique_name(prefix)
        self.ns = self.id
        self.priority_classes = priority_classes
        self.node_cpu = node_cpu
        self.nodes = [f"{self.id}-n{i}" for i in range(nodes)]

    # ------------------------------------------------------------------------------ objects
    def pod(self, name: str, cpu: str, group: str | None = None, **kwargs: Any) -> JSON:
        """A pod on this scene's nodes only, in PodGroup `group` (sigs label) if given."""
        labels = {GROUP_LABEL: group} if group else {}
        extra = {"nodeSelector": {"e2e-test": self.id}, "terminationGracePeriodSeconds": 1}
        return pod_manifest(
            name, namespace=self.ns, cpu=cpu, labels=labels, extra_spec=extra, **kwargs
        )

    async def create_pod(self, body: JSON) -> None:
        await self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", body)

    async def group(self, name: str, min_member: int, **spec: Any) -> None:
        await self.kube.create(
            f"/apis/{SIGS}/namespaces/{self.ns}/podgroups",
            {
                "apiVersion": SIGS,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"minMember": min_member, **spec},
            },
        )

    async def gang(
        self, name: str, size: int, cpu: str, *, min_member: int | None = None, **kwargs: Any
    ) -> None:
        """PodGroup `name` and its `size` members name-0 .. name-(size-1)."""
        await self.group(name, size if min_member is None else min_member)
        for i in range(size):
            await self.create_pod(self.pod(f"{name}-{i}", cpu, name, **kwargs))

    async def pods(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/api/v1/namespaces/{self.ns}/pods"))["items"]
        return {p["metadata"]["name"]: p for p in items}

    async def wait_bound(self, names: list[str], timeout: float) -> None:
        async def check() -> bool:
            pods = await self.pods()
            return all((pods.get(n) or {}).get("spec", {}).get("nodeName") for n in names)

        await wait_for(check, timeout=timeout, interval=0.5, what=f"{names} bound")

    # ------------------------------------------------------------------------------- set-up
    async def start(self, *, wait_nodes_ready: bool = False) -> None:
        """The namespace, its PriorityClasses and the nodes (Ready, if asked)."""
        await self.kube.create_namespace(self.ns, self.priority_classes)
        for name in self.nodes:
            await self.kube.create(
                "/api/v1/nodes", fake_node(name, cpu=self.node_cpu, labels={"e2e-test": self.id})
            )
        if wait_nodes_ready:
            for name in self.nodes:
                await self.kube.wait_for_object(
                    f"/api/v1/nodes/{name}",
                    lambda n: (condition(n, "Ready") or {}).get("status") == "True",
                    what=f"node {name} Ready",
                )

    async def victims_on_every_node(self, cpu: str, *, priority_class: str) -> list[str]:
        """victim-<i> on node i, placed by "another scheduler" (spec.nodeName set)."""
        names = []
        for i, node in enumerate(self.nodes):
            names.append(f"victim-{i}")
            await self.create_pod(
                self.pod(
                    names[-1],
                    cpu,
                    scheduler_name="other",
                    node_name=node,
                    priority_class_name=priority_class,
                )
            )
        return names

    async def stop(self) -> None:
        # No kube-controller-manager here: a namespace delete never finishes, so pods and
        # PodGroups go explicitly (else their retries load the tests that follow).
        for path in (
            f"/api/v1/namespaces/{self.ns}/pods",
            f"/apis/{SIGS}/namespaces/{self.ns}/podgroups",
        ):
            await self.kube.delete(path, grace_period_seconds=0)
        for name in self.nodes:
            await self.kube.delete(f"/api/v1/nodes/{name}")
        await self.kube.delete(f"/api/v1/namespaces/{self.ns}")

    async def events(self, reason: str, kind: str, name: str) -> list[JSON]:
        """Events with `reason` about the object `kind`/`name` in this namespace."""
        items = (
            await self.kube.get(
                f"/apis/events.k8s.io/v1/namespaces/{self.ns}/events",
                fieldSelector=f"reason={reason}",
            )
        )["items"]
        return [
            e
            for e in items
            if e["regarding"].get("kind") == kind and e["regarding"].get("name") == name
        ]
