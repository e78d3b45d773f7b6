"""Karpenter (its kwok provider, built from its Go module) beside the e2e control plane.

`hack/build-clients.sh karpenter` builds `sigs.k8s.io/karpenter`'s `./kwok` main package (pinned
in hack/clients/versions.env). It runs as a local process authenticated as its own
ServiceAccount, with the RBAC its kwok Helm chart grants (`kwok/charts/templates`, rendered
here: the chart's templates only name things and add labels, so replacing the three names and
dropping the label/annotation directives is the whole rendering), and the module's CRDs
(`kwok/charts/crds`: NodePool, NodeClaim, NodeOverlay; `kwok/apis/crds`: KWOKNodeClass).

What the kwok provider does: for each NodeClaim it creates a Node object itself (annotated and
labelled `kwok.x-k8s.io/node: fake`, tainted `karpenter.sh/unregistered`, capacity of the
instance type chosen); the control plane's own kwok (tests/e2e/conftest.py, which manages every
node) makes it Ready, Karpenter registers it and lifts the taint, and gangsched then sees an
ordinary Ready node. Deleting a NodeClaim deletes the Node. Nothing in the module sets a
KWOKNodeClass's Ready condition (in a real provider its controller would), and a NodePool whose
node class is not Ready provisions nothing, so `Karpenter.node_class` is marked Ready here.

Each test gets its own NodePool (`node_pool`) whose nodes carry the label `e2e-test: <test id>`,
the label test pods select (tests/e2e/test_operator.py `Env.pod`): the session's static kwok
nodes never match those pods, so Karpenter sees them fit nowhere, and one test's nodes never
take another test's pods. The default instance shape is 16 CPU (15.9 allocatable after the
kwok provider's 100m kube-reserved: three 4-CPU pods per node).

Run with `make e2e-autoscaling` (marker `autoscaling`; not part of `make test`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.processes import http_get

from .clients import (
    Controller,
    apply,
    build_client,
    load_documents,
    ports,
    start_controller,
    stop_controller,
    wait_established,
)
from .conftest import Cluster
from .harness import token_kubeconfig
from .k8s import JSON, Kube, condition, wait_for
from .operator_fixture import Gangsched
from .test_operator import SIGS, Env

KARPENTER = "karpenter.sh/v1"
KWOK_CLASSES = "karpenter.kwok.sh/v1alpha1"
NAMESPACE = "karpenter"
#: The chart's fullname and ServiceAccount name for a release called "karpenter".
RELEASE = "karpenter"
NODE_CLASS = "e2e"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_CPU_LABEL = "karpenter.kwok.sh/instance-cpu"
ZONE_LABEL = "topology.kubernetes.io/zone"
#: The chart's RBAC templates (the ServiceAccount is created here; aggregate-clusterrole.yaml
#: only extends the user-facing admin role).
RBAC_TEMPLATES = ("clusterrole.yaml", "clusterrole-kwok.yaml", "role.yaml", "rolebinding.yaml")
TEMPLATE_NAMES = {
    r'\{\{ include "karpenter\.fullname" \. \}\}': RELEASE,
    r'\{\{ template "karpenter\.serviceAccountName" \. \}\}': RELEASE,
    r"\{\{ \.Release\.Namespace \}\}": NAMESPACE,
}


def chart_rbac(templates: Path) -> list[JSON]:
    """The chart's Roles, ClusterRoles and bindings for release `karpenter` in `karpenter`."""
    docs: list[JSON] = []
    for name in RBAC_TEMPLATES:
        text = (templates / name).read_text()
        for pattern, value in TEMPLATE_NAMES.items():
            text = re.sub(pattern, value, text)
        kept = [line for line in text.splitlines() if not line.strip().startswith("{{")]
        if any("{{" in line for line in kept):
            raise AssertionError(f"{templates / name}: a template directive left unrendered")
        for doc in yaml.safe_load_all("\n".join(kept)):
            if isinstance(doc, dict):
                meta = {k: v for k, v in doc["metadata"].items() if k in ("name", "namespace")}
                docs.append({**doc, "metadata": meta})
    return docs


def module_crds(src: Path) -> list[JSON]:
    return [
        doc
        for doc in load_documents(src / "kwok" / "charts" / "crds", src / "kwok" / "apis" / "crds")
        if doc.get("kind") == "CustomResourceDefinition"
    ]


@dataclass
class Karpenter:
    """The running controller and the ready KWOKNodeClass every test's NodePool uses."""

    controller: Controller
    node_class: str = NODE_CLASS

    def assert_alive(self) -> None:
        self.controller.assert_alive()

    def log_tail(self, lines: int = 80) -> str:
        return self.controller.log_tail(lines)

    def log(self) -> str:
        return self.controller.log.read_text(errors="replace")

    def metrics(self) -> str:
        status, body = http_get(f"http://127.0.0.1:{self.controller.ports['metrics']}/metrics")
        assert status == 200, f"Karpenter GET /metrics: HTTP {status}"
        return body


def node_pool(
    name: str,
    *,
    labels: dict[str, str],
    cpu_limit: int | None = None,
    consolidation_policy: str = "WhenEmptyOrUnderutilized",
    consolidate_after: str = "10s",
    instance_cpu: Sequence[str] = ("16",),
    zones: Sequence[str] = (),
    node_class: str = NODE_CLASS,
) -> JSON:
    """A NodePool of on-demand linux/amd64 kwok nodes labelled `labels`, `instance_cpu` CPUs
    each, at most `cpu_limit` CPUs in all (None: no limit), in `zones` (empty: any of the
    kwok provider's test-zone-a..d)."""
    requirements: list[JSON] = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": INSTANCE_CPU_LABEL, "operator": "In", "values": list(instance_cpu)},
    ]
    if zones:
        requirements.append({"key": ZONE_LABEL, "operator": "In", "values": list(zones)})
    spec: JSON = {
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "requirements": requirements,
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": node_class,
                },
                "expireAfter": "Never",
            },
        },
        "disruption": {
            "consolidationPolicy": consolidation_policy,
            "consolidateAfter": consolidate_after,
        },
    }
    if cpu_limit is not None:
        spec["limits"] = {"cpu": str(cpu_limit)}
    return {"apiVersion": KARPENTER, "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


async def apply_node_pool(kube: Kube, body: JSON, *, timeout: float = 60) -> JSON:
    """Apply the NodePool and wait until Karpenter reports it Ready (its node class found
    Ready: before that it provisions nothing from it)."""
    name = body["metadata"]["name"]
    await kube.apply(body)
    return await kube.wait_for_object(
        f"/apis/{KARPENTER}/nodepools/{name}",
        lambda pool: (condition(pool, "Ready") or {}).get("status") == "True",
        timeout=timeout,
        what=f"NodePool {name} Ready",
    )


async def node_claims(kube: Kube, pool: str) -> list[JSON]:
    items = await kube.get(
        f"/apis/{KARPENTER}/nodeclaims", labelSelector=f"{NODEPOOL_LABEL}={pool}"
    )
    return list(items["items"])


async def pool_nodes(kube: Kube, pool: str) -> list[JSON]:
    """The Node objects Karpenter created for `pool` (deleting ones included)."""
    items = await kube.get("/api/v1/nodes", labelSelector=f"{NODEPOOL_LABEL}={pool}")
    return list(items["items"])


async def delete_node_pool(kube: Kube, pool: str, *, timeout: float = 120) -> None:
    """Delete the NodePool and wait for its NodeClaims and Nodes to go (Karpenter drains and
    deletes them; the garbage collector deletes the claims the pool owns). Whatever is left
    after `timeout` is removed by force (finalizers dropped), so that a failed test does not
    leave nodes that later tests would count."""
    await kube.delete(f"/apis/{KARPENTER}/nodepools/{pool}")
    for claim in await node_claims(kube, pool):
        await kube.delete(f"/apis/{KARPENTER}/nodeclaims/{claim['metadata']['name']}")

    async def gone() -> bool:
        return not await node_claims(kube, pool) and not await pool_nodes(kube, pool)

    try:
        await wait_for(gone, timeout=timeout, interval=1, what=f"NodePool {pool}'s nodes gone")
    except TimeoutError:
        for claim in await node_claims(kube, pool):
            path = f"/apis/{KARPENTER}/nodeclaims/{claim['metadata']['name']}"
            await kube.patch(path, {"metadata": {"finalizers": None}})
            await kube.delete(path)
        for node in await pool_nodes(kube, pool):
            path = f"/api/v1/nodes/{node['metadata']['name']}"
            await kube.patch(path, {"metadata": {"finalizers": None}})
            await kube.delete(path)


def make_node_class_ready(cluster: Cluster, name: str) -> None:
    """Create the KWOKNodeClass and set its Ready condition (see the module docstring)."""
    apply(
        cluster,
        [{"apiVersion": KWOK_CLASSES, "kind": "KWOKNodeClass", "metadata": {"name": name}}],
    )
    ready: Any = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Ready",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ]
        }
    }
    cluster.kubectl(
        "patch", "kwoknodeclass", name, "--subresource=status", "--type=merge",
        "-p", json.dumps(ready),
    )  # fmt: skip


def start_karpenter(cluster: Cluster, workdir: Path) -> Karpenter:
    """Build (if needed), install CRDs, namespace, ServiceAccount and chart RBAC, and start
    Karpenter with leader election off, its metrics and health on free ports."""
    build = build_client("karpenter")
    crds = module_crds(build.src)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": RELEASE, "namespace": NAMESPACE},
    }
    apply(cluster, [namespace])
    apply(cluster, crds)
    wait_established(cluster, crds)
    apply(cluster, [account, *chart_rbac(build.src / "kwok" / "charts" / "templates")])
    make_node_class_ready(cluster, NODE_CLASS)
    kubeconfig = token_kubeconfig(
        cluster, RELEASE, workdir / "karpenter.kubeconfig", namespace=NAMESPACE
    )
    listen = ports("metrics", "health")
    argv = [
        str(build.binary),
        "--disable-leader-election=true",
        f"--metrics-port={listen['metrics']}",
        f"--health-probe-port={listen['health']}",
        "--log-level=debug",
    ]
    controller = start_controller(
        "karpenter",
        argv,
        workdir,
        kubeconfig=kubeconfig,
        ready_url=f"http://127.0.0.1:{listen['health']}/readyz",
        ports=listen,
    )
    return Karpenter(controller)


class AutoscalingEnv(Env):
    """One test's namespace and NodePool (named after the test id, its nodes labelled
    `e2e-test: <id>` as the test's pods select), removed with the test's pods."""

    def __init__(self, kube: Kube, sched: Gangsched, karpenter: Karpenter) -> None:
        super().__init__(kube, sched)
        self.karpenter = karpenter
        self.pool = self.id

    async def with_pool(self, **options: Any) -> JSON:
        """This test's NodePool (`options`: those of `node_pool`), Ready."""
        body = node_pool(self.pool, labels={"e2e-test": self.id}, **options)
        return await apply_node_pool(self.kube, body)

    async def claims(self) -> list[JSON]:
        return await node_claims(self.kube, self.pool)

    async def pool_nodes(self) -> list[JSON]:
        return await pool_nodes(self.kube, self.pool)

    async def gang(
        self, name: str, size: int, *, cpu: str = "4", min_member: int | None = None, **pod: Any
    ) -> list[str]:
        """Our PodGroup (minMember `min_member`, default `size`) and `size` member pods of
        `cpu` each, created in that order; returns the pod names."""
        await self.kube.create(
            f"/apis/{SIGS}/namespaces/{self.ns}/podgroups",
            self.pod_group(name, size if min_member is None else min_member),
        )
        names = [f"{name}-{i}" for i in range(size)]
        for pod_name in names:
            await self.create_pod(self.pod(pod_name, cpu=cpu, group=name, **pod))
        return names

    async def cleanup(self) -> None:
        await super().cleanup()
        await delete_node_pool(self.kube, self.pool)
        self.karpenter.assert_alive()


@pytest.fixture(scope="module")
def karpenter(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Karpenter]:
    running = start_karpenter(cluster, tmp_path_factory.mktemp("karpenter"))
    try:
        yield running
    finally:
        stop_controller(cluster, running.controller)


@pytest.fixture
async def autoscaling_env(
    kube: Kube, gangsched: Gangsched, karpenter: Karpenter
) -> AsyncIterator[AutoscalingEnv]:
    """Needs the `gangsched` fixture imported beside it (tests/e2e/operator_fixture.py)."""
    env = AutoscalingEnv(kube, gangsched, karpenter)
    await env.setup()
    try:
        yield env
    finally:
        await env.cleanup()
