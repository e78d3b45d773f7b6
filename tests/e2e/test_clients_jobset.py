"""JobSet v0.10 (built from its module) exclusive placement under gangsched.

With `alpha.jobset.sigs.k8s.io/exclusive-topology: <key>` JobSet's pod webhook gives each child
Job's leader (completion index 0) a pod affinity to its own Job and an anti-affinity to every
other Job of the JobSet in that topology domain; followers are refused until their leader is
scheduled and then get a nodeSelector for the leader's domain. Under gangsched that puts every
child Job in a domain of its own, as under kube-scheduler.

Run with `make e2e-clients` (marker `clients`; not part of `make test`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from .clients import ClientLayout, Controller, install_client, run_client
from .conftest import Cluster
from .k8s import JSON, Kube, condition, fake_node, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_operator import Env

pytestmark = [pytest.mark.e2e, pytest.mark.clients, pytest.mark.asyncio(loop_scope="session")]

JOBSET = "jobset.x-k8s.io/v1alpha2"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
RACK = "e2e.gangsched.io/rack"
JOB_NAME_LABEL = "job-name"


JOBSET_LAYOUT = ClientLayout(
    name="jobset",
    namespace="jobset-system",
    prefix="jobset-",
    crds="config/components/crd/bases",
    conversion="config/components/crd",
    webhooks="config/components/webhook/manifests.yaml",
    webhook_patches=(
        ("config/components/webhook/patches/mutating-patch.yaml", "MutatingWebhookConfiguration"),
        (
            "config/components/webhook/patches/validating-patch.yaml",
            "ValidatingWebhookConfiguration",
        ),
    ),
    rbac="config/components/rbac",
)


@pytest.fixture(scope="module")
def jobset(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controller]:
    install = install_client(cluster, tmp_path_factory.mktemp("jobset"), JOBSET_LAYOUT)
    config = install.controller_config("config.jobset.x-k8s.io/v1alpha1")
    with run_client(cluster, install, [f"--config={config}"]) as controller:
        yield controller


class JobSetEnv(Env):
    def __init__(self, kube: Kube, sched: Gangsched, jobset: Controller) -> None:
        super().__init__(kube, sched)
        self.jobset = jobset

    async def add_rack(self, rack: str, count: int, cpu: str = "4") -> list[str]:
        names = [f"{self.id}-{rack}-{i}" for i in range(count)]
        for name in names:
            labels = {"e2e-test": self.id, RACK: f"{self.id}-{rack}"}
            await self.kube.create("/api/v1/nodes", fake_node(name, cpu=cpu, labels=labels))
            await self.kube.wait_for_object(
                f"/api/v1/nodes/{name}",
                lambda n: (condition(n, "Ready") or {}).get("status") == "True",
                what=f"node {name} Ready",
            )
        self.nodes += names
        return names

    async def cleanup_jobsets(self) -> None:
        await self.kube.delete(f"/apis/{JOBSET}/namespaces/{self.ns}/jobsets")
        await self.kube.delete(f"/apis/batch/v1/namespaces/{self.ns}/jobs")


@pytest.fixture
async def env(
    kube: Kube,
    gangsched: Gangsched,  # noqa: F811
    jobset: Controller,
) -> AsyncIterator[JobSetEnv]:
    e = JobSetEnv(kube, gangsched, jobset)
    await e.setup()
    yield e
    await e.cleanup_jobsets()
    await e.cleanup()


async def test_exclusive_placement_puts_each_child_job_in_its_own_rack(env: JobSetEnv) -> None:
    racks = {"a": await env.add_rack("a", 2), "b": await env.add_rack("b", 2)}
    node_rack = {node: rack for rack, nodes in racks.items() for node in nodes}
    template = env.pod("unused", cpu="1")
    pod_spec = dict(template["spec"], restartPolicy="Never")
    body = {
        "apiVersion": JOBSET,
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": env.ns, "annotations": {EXCLUSIVE: RACK}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 3,
                            "completions": 3,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {"spec": pod_spec},
                        }
                    },
                }
            ]
        },
    }
    await env.kube.create(f"/apis/{JOBSET}/namespaces/{env.ns}/jobsets", body)

    async def all_bound() -> dict[str, tuple[str, str]] | None:
        env.jobset.assert_alive()
        env.sched.assert_alive()
        pods = await env.pods()
        placed = {
            name: (p["metadata"]["labels"].get(JOB_NAME_LABEL, ""), p["spec"].get("nodeName"))
            for name, p in pods.items()
            if not p["metadata"].get("deletionTimestamp")
        }
        if len(placed) == 6 and all(node for _, node in placed.values()):
            return {name: (job, str(node)) for name, (job, node) in placed.items()}
        return None

    placed = await wait_for(all_bound, timeout=120, what="6 JobSet pods bound")
    racks_of_job: dict[str, set[str]] = {}
    for job, node in placed.values():
        racks_of_job.setdefault(job, set()).add(node_rack[node])
    assert len(racks_of_job) == 2, placed
    assert all(len(r) == 1 for r in racks_of_job.values()), racks_of_job
    assert len(set().union(*racks_of_job.values())) == 2, racks_of_job
    pods = await env.pods()
    leaders = [
        p
        for p in pods.values()
        if p["metadata"].get("annotations", {}).get("batch.kubernetes.io/job-completion-index")
        == "0"
    ]
    assert len(leaders) == 2
    for leader in leaders:  # what JobSet injected is what placed them
        affinity: JSON = leader["spec"].get("affinity") or {}
        assert affinity.get("podAffinity") and affinity.get("podAntiAffinity"), leader["spec"]
