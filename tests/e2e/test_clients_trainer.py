"""Kubeflow Trainer v2.0 + JobSet (both built from their modules) under gangsched.

A TrainingRuntime with `podGroupPolicy.coscheduling` and `schedulerName: gangsched` in its pod
template: for each TrainJob Trainer creates a JobSet and a `scheduling.x-k8s.io` PodGroup
(minMember = the pods of the job, minResources = their requests, scheduleTimeoutSeconds) and
labels the pods `scheduling.x-k8s.io/pod-group`; gangsched binds the TrainJob whole. A second
TrainJob too big for what is left binds nothing until the first is deleted, then binds whole;
a higher-priority TrainJob preempts a lower one as a whole. kwok completes a Job's pods the
moment they run: the runtimes annotate their pods `pod-complete.stage.kwok.x-k8s.io/delay`
(hack/cluster-up.sh reads it) so a TrainJob keeps its room while the next one is tried.

Trainer's PodGroup (scheduling.x-k8s.io) has no priority or disruptionMode of its own: the
gang takes its pods' priority (the runtime's priorityClassName), and as in kube-scheduler a
victim is a pod (DisruptionMode Single). The preemption case sizes the jobs so the higher one
needs every node the lower one holds: all of the lower job goes, none of it binds again while
the higher one runs (its Job controller recreates the pods; they wait as a gang).

Trainer 2.0 always runs its own certificate rotation (open-policy-agent/cert-controller) for
the Secret `kubeflow-system/kubeflow-trainer-webhook-cert` and the hard-coded cert dir
/tmp/k8s-webhook-server/serving-certs: the test pre-creates that Secret with a certificate that
is valid for the Service name it checks and for 127.0.0.1 (so it is kept) and writes the same
files into that directory, as the Secret's volume would in a pod. Two such runs on one machine
at once would share that directory.

Run with `make e2e-clients` (marker `clients`; not part of `make test`).
"""

from __future__ import annotations

import asyncio
import base64
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from .clients import (
    ClientLayout,
    Controller,
    apply,
    install_client,
    run_client,
    webhook_tls,
)
from .conftest import Cluster
from .harness import eventually
from .k8s import JSON, Kube, condition, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_clients_jobset import jobset  # noqa: F401  (fixture)
from .test_operator import HIGH, LOW, X_K8S, Env

pytestmark = [pytest.mark.e2e, pytest.mark.clients, pytest.mark.asyncio(loop_scope="session")]

TRAINER = "trainer.kubeflow.org/v1alpha1"
NAMESPACE = "kubeflow-system"
SERVICE = "kubeflow-trainer-controller-manager"
SECRET = "kubeflow-trainer-webhook-cert"
WEBHOOK_CONFIGURATION = "validator.trainer.kubeflow.org"
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: kwok's pod-complete delay (hack/cluster-up.sh): the TrainJob's pods keep running this long.
KEEP_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}


TRAINER_LAYOUT = ClientLayout(
    name="trainer",
    namespace=NAMESPACE,
    prefix="",
    crds="manifests/base/crds",
    webhooks="manifests/base/webhook/manifests.yaml",
    webhook_name=WEBHOOK_CONFIGURATION,
    rbac="manifests/base/rbac",
    # The coscheduling plugin of Trainer v2.0.0 watches RuntimeClasses and LimitRanges (pod
    # overhead and defaults in minResources) with no RBAC marker for them, so the module's
    # ClusterRole lacks them and its caches never sync: list/watch on both, nothing more.
    extra_rules=(
        {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["limitranges"], "verbs": ["list", "watch"]},
    ),
)


@pytest.fixture(scope="module")
def trainer(
    cluster: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
    jobset: Controller,  # noqa: F811
) -> Iterator[Controller]:
    workdir = tmp_path_factory.mktemp("trainer")
    tls = webhook_tls(
        workdir / "certs", dns_names=[f"{SERVICE}.{NAMESPACE}.svc"], ca_name="kubeflow-trainer-ca"
    )
    install = install_client(cluster, workdir, TRAINER_LAYOUT, tls=tls)
    files = {
        name: base64.b64encode((tls.cert_dir / name).read_bytes()).decode()
        for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")
    }
    apply(
        cluster,
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": SECRET, "namespace": NAMESPACE},
                "data": files,
            }
        ],
    )
    CERT_DIR.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        shutil.copyfile(tls.cert_dir / name, CERT_DIR / name)
    argv = [
        f"--webhook-server-port={install.listen['webhook']}",
        f"--health-probe-bind-address=127.0.0.1:{install.listen['health']}",
        "--metrics-bind-address=0",
        "--leader-elect=false",
    ]
    # The certificate rotation looks the webhook configuration up by name before it is ready.
    with run_client(cluster, install, argv, webhooks_first=True) as controller:
        yield controller


class TrainerEnv(Env):
    def __init__(self, kube: Kube, sched: Gangsched, trainer: Controller) -> None:
        super().__init__(kube, sched)
        self.trainer = trainer

    async def runtime(self, name: str, *, cpu: str, priority_class: str = "") -> None:
        """A TrainingRuntime whose pods ask for `cpu` (of `priority_class`) and keep running."""
        pod = self.pod("unused", cpu=cpu)
        pod_spec = dict(pod["spec"], restartPolicy="OnFailure")
        if priority_class:
            pod_spec["priorityClassName"] = priority_class
        pod_spec["containers"] = [dict(pod_spec["containers"][0], name="node")]
        await self.kube.create(
            f"/apis/{TRAINER}/namespaces/{self.ns}/trainingruntimes",
            {
                "apiVersion": TRAINER,
                "kind": "TrainingRuntime",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {
                    "mlPolicy": {"numNodes": 1},
                    "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 120}},
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "metadata": {
                                            "labels": {
                                                "trainer.kubeflow.org/trainjob-ancestor-step": (
                                                    "trainer"
                                                )
                                            }
                                        },
                                        "spec": {
                                            "template": {
                                                "metadata": {"annotations": KEEP_RUNNING},
                                                "spec": pod_spec,
                                            }
                                        },
                                    },
                                }
                            ]
                        }
                    },
                },
            },
        )

    async def train_job(self, name: str, *, runtime: str, nodes: int) -> None:
        await self.kube.create(
            f"/apis/{TRAINER}/namespaces/{self.ns}/trainjobs",
            {
                "apiVersion": TRAINER,
                "kind": "TrainJob",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {
                    "runtimeRef": {
                        "apiGroup": "trainer.kubeflow.org",
                        "kind": "TrainingRuntime",
                        "name": runtime,
                    },
                    "trainer": {"numNodes": nodes},
                },
            },
        )

    async def job_pods(self, train_job: str, count: int) -> list[str]:
        async def check() -> list[str] | None:
            self.trainer.assert_alive()
            pods = await self.pods()
            names = sorted(
                n
                for n, p in pods.items()
                if p["metadata"].get("labels", {}).get(POD_GROUP_LABEL) == train_job
                and not p["metadata"].get("deletionTimestamp")
            )
            return names if len(names) == count else None

        found: list[str] = await wait_for(
            check, timeout=120, what=f"{count} pods of TrainJob {train_job}"
        )
        return found

    async def wait_unschedulable(self, names: list[str]) -> None:
        """gangsched reported every member Unschedulable (it tried and held the whole gang)."""

        async def reported() -> bool:
            pods = await self.pods()
            return all(
                (condition(pods[n], "PodScheduled") or {}).get("reason") == "Unschedulable"
                for n in names
                if n in pods
            ) and set(names) <= set(pods)

        self.sched.assert_alive()
        await eventually(reported, timeout=90, what=f"{names} reported Unschedulable")

    async def still_unbound(self, names: list[str], *, seconds: float) -> None:
        """For `seconds`, no member of `names` is bound (none of the gang goes alone)."""
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            pods = await self.pods()
            bound = {
                n: pods[n]["spec"]["nodeName"] for n in names if pods[n]["spec"].get("nodeName")
            }
            assert not bound, f"members bound while the gang cannot fit: {bound}"
            if asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(1)

    async def cleanup_trainer(self) -> None:
        await self.kube.delete(f"/apis/{TRAINER}/namespaces/{self.ns}/trainjobs")
        await self.kube.delete(f"/apis/{TRAINER}/namespaces/{self.ns}/trainingruntimes")


@pytest.fixture
async def env(
    kube: Kube,
    gangsched: Gangsched,  # noqa: F811
    trainer: Controller,
) -> AsyncIterator[TrainerEnv]:
    e = TrainerEnv(kube, gangsched, trainer)
    await e.setup()
    yield e
    await e.cleanup_trainer()
    await e.cleanup()


async def test_train_job_gets_trainers_pod_group_and_binds_whole(env: TrainerEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.runtime("torch", cpu="2")
    await env.train_job("first", runtime="torch", nodes=3)
    first = await env.job_pods("first", 3)
    placed = await env.wait_bound(first, timeout=90)
    assert len(placed) == 3

    group: JSON = await eventually(
        lambda: env.kube.get_or_none(f"/apis/{X_K8S}/namespaces/{env.ns}/podgroups/first"),
        timeout=30,
        what="Trainer's PodGroup first",
    )
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["scheduleTimeoutSeconds"] == 120
    assert group["spec"]["minResources"]["cpu"] in ("6", 6)

    env.trainer.assert_alive()


async def test_second_train_job_too_big_waits_until_the_first_is_deleted(env: TrainerEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.runtime("torch", cpu="2")
    await env.train_job("first", runtime="torch", nodes=3)
    first = await env.job_pods("first", 3)
    await env.wait_bound(first, timeout=90)
    # 2 of 8 CPUs are left: the second TrainJob (2 x 2 CPUs) fits no more than one pod.
    await env.train_job("second", runtime="torch", nodes=2)
    second = await env.job_pods("second", 2)
    await env.wait_unschedulable(second)
    await env.still_unbound(second, seconds=8)
    pods = await env.pods()
    assert all(pods[n].get("status", {}).get("phase") == "Running" for n in first), {
        n: pods[n].get("status", {}).get("phase") for n in first
    }

    await env.kube.delete(f"/apis/{TRAINER}/namespaces/{env.ns}/trainjobs/first")
    placed = await env.wait_bound(second, timeout=120)
    assert len(placed) == 2
    env.trainer.assert_alive()


async def test_higher_priority_train_job_preempts_a_lower_one_whole(env: TrainerEnv) -> None:
    await env.add_nodes(2, cpu="4")
    await env.runtime("low", cpu="4", priority_class=LOW)
    await env.runtime("high", cpu="3", priority_class=HIGH)
    await env.train_job("low", runtime="low", nodes=2)
    low = await env.job_pods("low", 2)
    await env.wait_bound(low, timeout=90)
    # Each high pod needs 3 of a node's 4 CPUs: the whole low job has to go.
    await env.train_job("high", runtime="high", nodes=2)
    high = await env.job_pods("high", 2)

    marked: dict[str, JSON] = {}

    async def victims_marked_or_gone() -> bool:
        pods = await env.pods()
        for name in low:
            cond = condition(pods[name], "DisruptionTarget") if name in pods else None
            if cond:
                marked[name] = cond
        return all(name in marked or name not in pods for name in low)

    await eventually(victims_marked_or_gone, timeout=90, what=f"{low} preempted")
    for cond in marked.values():
        assert cond["reason"] == "PreemptionByScheduler", cond
        assert f"preemptor: {env.ns}/high" in cond["message"], cond
    placed = await env.wait_bound(high, timeout=120)
    assert len(set(placed.values())) == 2, placed

    async def originals_gone() -> bool:
        pods = await env.pods()
        return not set(low) & set(pods)

    await eventually(originals_gone, timeout=60, what=f"{low} deleted")
    # The low job's Job controller recreates its pods; they wait whole behind the high job.
    recreated = await env.job_pods("low", 2)
    assert not set(recreated) & set(low)
    await env.wait_unschedulable(recreated)
    await env.still_unbound(recreated, seconds=8)
    env.trainer.assert_alive()
