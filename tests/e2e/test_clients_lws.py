"""LeaderWorkerSet v0.7 (built from its module) with `gangSchedulingManagement.schedulerProvider:
volcano`: every replica (a leader and its workers) is a gang under gangsched.

LWS creates one `scheduling.volcano.sh/v1beta1` PodGroup per replica (minMember = the group
size, minResources = leader + workers) and its pod webhook annotates every pod of the replica
`scheduling.k8s.io/group-name`. gangsched reads that dialect: each replica binds whole or not at
all, scaling the LWS adds gangs, and the PodGroups' Volcano queue is ignored (said once).

The Volcano PodGroup CRD is LWS's own test CRD (test/integration/crd/volcano-podgroup.yaml) with
the rest of volcano.sh/apis' PodGroupSpec fields added to its schema, so `queue` survives pruning.

Run with `make e2e-clients` (marker `clients`; not part of `make test`).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any

import pytest

from .clients import (
    ClientLayout,
    Controller,
    build_client,
    install_client,
    load_documents,
    run_client,
)
from .conftest import Cluster
from .harness import eventually
from .k8s import JSON, Kube, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_operator import Env

pytestmark = [pytest.mark.e2e, pytest.mark.clients, pytest.mark.asyncio(loop_scope="session")]

LWS = "leaderworkerset.x-k8s.io/v1"
VOLCANO = "scheduling.volcano.sh/v1beta1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SET_LABEL = "leaderworkerset.sigs.k8s.io/name"
INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def volcano_crd(lws_src: Any) -> JSON:
    crd: JSON = load_documents(lws_src / "test/integration/crd/volcano-podgroup.yaml")[0]
    crd = copy.deepcopy(crd)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"].update(
        {
            "queue": {"type": "string"},
            "priorityClassName": {"type": "string"},
            "minTaskMember": {
                "type": "object",
                "additionalProperties": {"type": "integer", "format": "int32"},
            },
        }
    )
    return crd


LWS_LAYOUT = ClientLayout(
    name="lws",
    namespace="lws-system",
    prefix="lws-",
    crds="config/crd/bases",
    conversion="config/crd",
    webhooks="config/webhook/manifests.yaml",
    webhook_patches=(
        ("config/webhook/mutating-patch.yaml", "MutatingWebhookConfiguration"),
        ("config/webhook/validating-patch.yaml", "ValidatingWebhookConfiguration"),
    ),
    rbac="config/rbac",
    # The module's kustomize RBAC lacks Volcano PodGroups; its Helm chart
    # (charts/lws/templates/rbac/clusterrole.yaml) grants exactly this when
    # gangSchedulingManagement.schedulerProvider is volcano.
    extra_rules=(
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "resources": ["podgroups"],
            "verbs": ["create", "get", "list", "watch"],
        },
    ),
)


@pytest.fixture(scope="module")
def lws(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controller]:
    workdir = tmp_path_factory.mktemp("lws")
    build = build_client("lws")
    install = install_client(cluster, workdir, LWS_LAYOUT, extra_crds=[volcano_crd(build.src)])
    config = install.controller_config(
        "config.lws.x-k8s.io/v1alpha1",
        gangSchedulingManagement={"schedulerProvider": "volcano"},
    )
    with run_client(cluster, install, [f"--config={config}"]) as controller:
        yield controller


class LwsEnv(Env):
    def __init__(self, kube: Kube, sched: Gangsched, lws: Controller) -> None:
        super().__init__(kube, sched)
        self.lws = lws

    def leader_worker_set(self, name: str, *, replicas: int, size: int, cpu: str) -> JSON:
        template = self.pod("template", cpu=cpu)
        return {
            "apiVersion": LWS,
            "kind": "LeaderWorkerSet",
            "metadata": {
                "name": name,
                "namespace": self.ns,
                "annotations": {QUEUE_ANNOTATION: "research"},
            },
            "spec": {
                "replicas": replicas,
                "leaderWorkerTemplate": {
                    "size": size,
                    "workerTemplate": {"spec": template["spec"]},
                },
            },
        }

    async def lws_pods(self, name: str) -> dict[str, JSON]:
        return {
            n: p
            for n, p in (await self.pods()).items()
            if p["metadata"].get("labels", {}).get(SET_LABEL) == name
            and not p["metadata"].get("deletionTimestamp")
        }

    async def wait_pods(self, name: str, count: int) -> dict[str, JSON]:
        async def check() -> dict[str, JSON] | None:
            self.lws.assert_alive()
            pods = await self.lws_pods(name)
            return pods if len(pods) == count else None

        found: dict[str, JSON] = await wait_for(
            check, timeout=90, what=f"{count} pods of LeaderWorkerSet {name}"
        )
        return found

    async def volcano_groups(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/apis/{VOLCANO}/namespaces/{self.ns}/podgroups"))["items"]
        return {g["metadata"]["name"]: g for g in items}

    async def cleanup_lws(self) -> None:
        await self.kube.delete(f"/apis/{LWS}/namespaces/{self.ns}/leaderworkersets")
        await self.kube.delete(f"/apis/{VOLCANO}/namespaces/{self.ns}/podgroups")


@pytest.fixture
async def env(
    kube: Kube,
    gangsched: Gangsched,  # noqa: F811
    lws: Controller,
) -> AsyncIterator[LwsEnv]:
    e = LwsEnv(kube, gangsched, lws)
    await e.setup()
    yield e
    await e.cleanup_lws()
    await e.cleanup()


async def _at_least(groups: Awaitable[dict[str, JSON]], count: int) -> dict[str, JSON] | None:
    found = await groups
    return found if len(found) >= count else None


def by_replica(pods: dict[str, JSON]) -> dict[str, list[JSON]]:
    out: dict[str, list[JSON]] = {}
    for pod in pods.values():
        out.setdefault(pod["metadata"]["labels"][INDEX_LABEL], []).append(pod)
    return out


async def test_each_replica_is_a_volcano_gang_bound_whole(env: LwsEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.kube.create(
        f"/apis/{LWS}/namespaces/{env.ns}/leaderworkersets",
        env.leader_worker_set("infer", replicas=2, size=3, cpu="1"),
    )
    pods = await env.wait_pods("infer", 6)
    placed = await env.wait_bound(sorted(pods), timeout=90)
    assert len(placed) == 6

    groups: dict[str, JSON] = await eventually(
        lambda: _at_least(env.volcano_groups(), 2), timeout=30, what="2 Volcano PodGroups"
    )
    assert len(groups) == 2, groups
    for group in groups.values():
        assert group["spec"]["minMember"] == 3
        assert group["spec"]["queue"] == "research"
    pods = await env.lws_pods("infer")
    for index, members in by_replica(pods).items():
        names = {m["metadata"]["annotations"].get(GROUP_ANNOTATION) for m in members}
        assert len(names) == 1 and names <= set(groups), (index, names)
        assert len(members) == 3
    env.sched.assert_alive()
    await eventually(
        lambda: "Volcano queues are ignored" in env.sched.log.read_text(errors="replace"),
        timeout=30,
        what="gangsched to log that Volcano queues are ignored",
    )
    log = env.sched.log.read_text(errors="replace")
    assert log.count("Volcano queues are ignored") == 1, env.sched.log_tail()


async def test_scaling_adds_gangs_and_a_gang_that_does_not_fit_binds_nothing(
    env: LwsEnv,
) -> None:
    await env.add_nodes(2, cpu="4")
    await env.kube.create(
        f"/apis/{LWS}/namespaces/{env.ns}/leaderworkersets",
        env.leader_worker_set("serve", replicas=2, size=3, cpu="1"),
    )
    first = await env.wait_pods("serve", 6)
    await env.wait_bound(sorted(first), timeout=90)
    # A third replica of 3 x 1 CPU on 8 CPUs with 6 taken: 2 members would fit, the gang
    # does not, so none of it binds.
    await env.kube.patch(
        f"/apis/{LWS}/namespaces/{env.ns}/leaderworkersets/serve", {"spec": {"replicas": 3}}
    )
    pods = await env.wait_pods("serve", 9)
    new = sorted(set(pods) - set(first))

    async def held() -> bool:
        current = await env.lws_pods("serve")
        return all(
            not current[n]["spec"].get("nodeName")
            and (current[n].get("status") or {}).get("conditions")
            for n in new
        )

    await wait_for(held, timeout=30, what="the third replica's pods to be marked")
    current = await env.lws_pods("serve")
    assert not [n for n in new if current[n]["spec"].get("nodeName")]
    groups = await eventually(
        lambda: _at_least(env.volcano_groups(), 3), timeout=30, what="3 Volcano PodGroups"
    )
    assert len(groups) == 3, groups
    # Room for it: the whole gang binds.
    await env.add_nodes(1, cpu="4")
    placed = await env.wait_bound(new, timeout=90)
    assert len(placed) == 3
