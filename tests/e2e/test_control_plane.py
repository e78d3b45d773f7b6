"""Smoke tests of the e2e control plane: etcd + kube-apiserver + kwok, the PodGroup CRDs, the
upstream scheduling.k8s.io PodGroup API and the upstream kube-scheduler baseline."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.processes import free_ports

from .conftest import CRDS, SCENARIOS, Cluster
from .k8s import (
    JSON,
    Kube,
    KubeError,
    condition,
    fake_node,
    is_node_ready,
    load_manifests,
    pod_manifest,
    unique_name,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
GANGSCHED_PG = "podgroups.scheduling.sigs.k8s.io"
X_K8S_PG = "podgroups.scheduling.x-k8s.io"
UPSTREAM = "scheduling.k8s.io/v1beta1"
BASELINE = "kube-scheduler-baseline"
#: The session cluster's nodes (hack/cluster-up.sh, NODES=2 by default).
OWN_NODES = frozenset({"kwok-node-0", "kwok-node-1"})


def scenario_podgroups() -> list[tuple[str, JSON]]:
    found = []
    for f in sorted(SCENARIOS.glob("*.yaml")):
        for doc in load_manifests(f):
            # Only gangsched's own CRD (the topology scenario also holds an upstream one).
            api = str(doc.get("apiVersion", ""))
            if doc.get("kind") == "PodGroup" and api.startswith("scheduling.sigs.k8s.io/"):
                found.append((f.name, doc))
    return found


async def create_bound_pod(kube: Kube, node: str, **kwargs: Any) -> JSON:
    """Create an unscheduled pod and bind it through pods/binding, as a scheduler would."""
    name = unique_name("smoke")
    pod = await kube.create(PODS, pod_manifest(name, scheduler_name="no-such-scheduler", **kwargs))
    result = await kube.bind(NS, name, node, uid=pod["metadata"]["uid"])
    # The API server answers a successful bind with a Status (this is what makes the generated
    # V1Binding model raise ValueError in kubernetes clients).
    assert result["kind"] == "Status"
    assert result["status"] == "Success"
    return pod


async def install_crd(cluster: Cluster, kube: Kube, name: str) -> JSON:
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS / f"{name}.yaml"))
    return await kube.wait_crd_established(name)


# --------------------------------------------------------------------------- nodes and pods


async def test_fake_nodes_become_ready(cluster: Cluster, kube: Kube) -> None:
    ready = await wait_for(
        lambda: _ready_nodes(kube, cluster.nodes), timeout=60, what="kwok nodes Ready"
    )
    names = sorted(n["metadata"]["name"] for n in ready)
    assert names == sorted(f"kwok-node-{i}" for i in range(cluster.nodes))
    for n in ready:
        assert n["status"]["allocatable"]["cpu"] == "4"
        assert n["status"]["allocatable"]["memory"] == "16Gi"
        assert n["status"]["allocatable"]["pods"] == "110"
        assert n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert n["metadata"]["labels"]["type"] == "kwok"
        # TaintNodesByCondition is off and no controller-manager runs: nodes stay untainted.
        assert not n["spec"].get("taints")
    # kubectl works with the generated kubeconfig (CA-verified TLS + token).
    out = cluster.kubectl("get", "nodes", "-o", "name").stdout
    assert "node/kwok-node-0" in out


async def _ready_nodes(kube: Kube, count: int) -> list[JSON] | None:
    """The cluster's own Ready nodes (other tests' nodes may be there too, whatever order
    the tests run in)."""
    ready = await kube.ready_nodes()
    own = [n for n in ready if n["metadata"]["name"].startswith("kwok-node-")]
    return own if len(own) >= count else None


async def test_node_created_at_runtime_is_managed_by_kwok(kube: Kube) -> None:
    name = unique_name("extra-node")
    await kube.create("/api/v1/nodes", fake_node(name, cpu="2", memory="4Gi"))
    try:
        node = await kube.wait_for_object(
            f"/api/v1/nodes/{name}",
            is_node_ready,
            timeout=60,
        )
        assert node["status"]["allocatable"]["cpu"] == "2"
    finally:
        await kube.delete(f"/api/v1/nodes/{name}")


async def test_bound_pod_turns_running(kube: Kube) -> None:
    pod = await create_bound_pod(kube, "kwok-node-0")
    name = pod["metadata"]["name"]
    try:
        running = await kube.wait_for_object(
            f"{PODS}/{name}",
            lambda p: p.get("status", {}).get("phase") == "Running",
            timeout=60,
            what=f"pod {name} Running",
        )
        assert running["spec"]["nodeName"] == "kwok-node-0"
        assert running["status"].get("podIP")
        ready = condition(running, "Ready")
        assert ready is not None
        assert ready["status"] == "True"
        # Binding again is a conflict (already bound).
        with pytest.raises(KubeError) as err:
            await kube.bind(NS, name, "kwok-node-1")
        assert err.value.status == 409
    finally:
        await kube.delete(f"{PODS}/{name}", grace_period_seconds=0)


async def test_graceful_delete_of_running_pod_completes(kube: Kube) -> None:
    pod = await create_bound_pod(kube, "kwok-node-1")
    name = pod["metadata"]["name"]
    await kube.wait_for_object(
        f"{PODS}/{name}", lambda p: p.get("status", {}).get("phase") == "Running", timeout=60
    )
    # A graceful delete only sets deletionTimestamp; kwok (standing in for the kubelet)
    # finalizes it, so the pod really disappears -- preemption victims must go away.
    deleted = await kube.delete(f"{PODS}/{name}", grace_period_seconds=30)
    assert deleted is not None
    await kube.wait_gone(f"{PODS}/{name}", timeout=60)


async def test_pod_with_node_name_runs_without_scheduler(kube: Kube) -> None:
    name = unique_name("prebound")
    await kube.create(PODS, pod_manifest(name, node_name="kwok-node-0"))
    try:
        await kube.wait_for_object(
            f"{PODS}/{name}", lambda p: p.get("status", {}).get("phase") == "Running", timeout=60
        )
    finally:
        await kube.delete(f"{PODS}/{name}", grace_period_seconds=0)


# --------------------------------------------------------------------------- CRDs


async def test_gangsched_podgroup_crd(cluster: Cluster, kube: Kube) -> None:
    crd = await install_crd(cluster, kube, GANGSCHED_PG)
    assert crd["spec"]["names"]["shortNames"] == ["pg"]
    base = f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{NS}/podgroups"
    name = unique_name("pg")
    pg = await kube.create(
        base,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": 2, "minResources": {"cpu": "2", "memory": "1Gi", "pods": 2}},
        },
    )
    try:
        assert pg["spec"]["disruptionMode"] == "Single"  # defaulted
        # disruptionMode is immutable (CEL transition rule)
        with pytest.raises(KubeError) as err:
            await kube.patch(f"{base}/{name}", {"spec": {"disruptionMode": "All"}})
        assert err.value.status == 422
        assert "immutable" in str(err.value)
        # other spec fields stay mutable
        await kube.patch(f"{base}/{name}", {"spec": {"minMember": 3}})
        # status subresource
        status = await kube.patch(
            f"{base}/{name}/status",
            {
                "status": {
                    "phase": "Scheduling",
                    "scheduled": 1,
                    "running": 0,
                    "scheduleStartTime": "2026-01-01T00:00:00Z",
                    "conditions": [
                        {
                            "type": "PodGroupInitiallyScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "1/3 pods fit",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                            "observedGeneration": 2,
                        }
                    ],
                }
            },
        )
        assert status["status"]["phase"] == "Scheduling"
        with pytest.raises(KubeError) as err:
            await kube.patch(f"{base}/{name}/status", {"status": {"phase": "Bogus"}})
        assert err.value.status == 422
        out = cluster.kubectl("get", "pg", name, "-n", NS).stdout
        header = out.splitlines()[0].split()
        assert header == ["NAME", "MIN", "TOPOLOGY", "SCHEDULED", "RUNNING", "PHASE", "AGE"]
        # No topology asked: kubectl leaves that column blank.
        assert out.splitlines()[1].split()[1:5] == ["3", "1", "0", "Scheduling"]
    finally:
        await kube.delete(f"{base}/{name}")

    # invalid objects are rejected
    for bad_spec in ({"minMember": 0}, {}, {"minMember": 1, "disruptionMode": "Some"}):
        with pytest.raises(KubeError) as err:
            await kube.create(
                base,
                {
                    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": unique_name("bad")},
                    "spec": bad_spec,
                },
            )
        assert err.value.status == 422, bad_spec


async def test_scenario_podgroups_apply_unchanged(cluster: Cluster, kube: Kube) -> None:
    groups = scenario_podgroups()
    assert groups, f"no PodGroup objects found in {SCENARIOS}"
    await install_crd(cluster, kube, GANGSCHED_PG)
    for filename, doc in groups:
        # server-side dry run through kubectl, exactly as users would apply the manifest
        cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(doc))
        applied = await kube.apply(doc)
        assert applied["spec"]["minMember"] == doc["spec"]["minMember"], filename
        assert applied["spec"]["disruptionMode"] == doc["spec"].get("disruptionMode", "Single")
    for _, doc in groups:
        await kube.delete(await kube.object_path(doc))


async def test_scheduler_plugins_podgroup_crd(cluster: Cluster, kube: Kube) -> None:
    await install_crd(cluster, kube, X_K8S_PG)
    base = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"
    name = unique_name("xpg")
    pg = await kube.create(
        base,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": 3, "minResources": {"cpu": "3"}, "scheduleTimeoutSeconds": 60},
        },
    )
    try:
        assert pg["spec"]["minMember"] == 3
        st = await kube.patch(
            f"{base}/{name}/status", {"status": {"phase": "Running", "running": 3}}
        )
        assert st["status"]["running"] == 3
    finally:
        await kube.delete(f"{base}/{name}")


# --------------------------------------------------------------------------- upstream PodGroup


def upstream_podgroup(name: str, min_count: int, *, all_mode: bool = False, **spec: Any) -> JSON:
    return {
        "apiVersion": UPSTREAM,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "disruptionMode": {"all": {}} if all_mode else {"single": {}},
            **spec,
        },
    }


def group_pod(name: str, group: str, **kwargs: Any) -> JSON:
    """A member of upstream PodGroup `group`, kept to the cluster's own two nodes (the
    gang sizes below count on their 2 x 4 CPUs; other tests' nodes may exist)."""
    own_nodes = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": sorted(OWN_NODES),
                            }
                        ]
                    }
                ]
            }
        }
    }
    extra = {"schedulingGroup": {"podGroupName": group}, "affinity": own_nodes}
    return pod_manifest(name, extra_spec=extra, **kwargs)


async def test_upstream_podgroup_api_is_served(kube: Kube) -> None:
    kinds = {r["kind"] for r in await kube.resources(UPSTREAM)}
    assert {"PodGroup", "Workload"} <= kinds
    group = unique_name("upg")
    path = await kube.path_for(UPSTREAM, "PodGroup", NS)
    pg = await kube.create(path, upstream_podgroup(group, 2, all_mode=True))
    pod_name = f"{group}-0"
    try:
        assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
        assert pg["spec"]["disruptionMode"] == {"all": {}}
        pod = await kube.create(
            PODS, group_pod(pod_name, group, scheduler_name="no-such-scheduler")
        )
        # the field is dropped silently when the GenericWorkload gate is off
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": group}
        # disruptionMode is immutable upstream too
        with pytest.raises(KubeError) as err:
            await kube.patch(f"{path}/{group}", {"spec": {"disruptionMode": {"single": {}}}})
        assert err.value.status == 422
    finally:
        await kube.delete(f"{PODS}/{pod_name}", grace_period_seconds=0)
        await kube.delete(f"{path}/{group}")


# --------------------------------------------------------------------------- baseline scheduler


@contextlib.contextmanager
def baseline_scheduler(cluster: Cluster) -> Iterator[None]:
    (port,) = free_ports(1)
    up = cluster.run_script("baseline-scheduler.sh", "up", SCHEDULER_PORT=str(port))
    if up.returncode != 0:
        pytest.fail(f"baseline-scheduler.sh failed:\n{up.stderr}\n{cluster.log_tail()}")
    try:
        yield
    finally:
        cluster.run_script("baseline-scheduler.sh", "down")


async def _delete_pods(kube: Kube, selector: str) -> None:
    await kube.request("DELETE", PODS, {"gracePeriodSeconds": 0}, query={"labelSelector": selector})
    await wait_for(lambda: _no_pods(kube, selector), timeout=60, what=f"pods {selector} to be gone")


async def _no_pods(kube: Kube, selector: str) -> bool:
    return not (await kube.get(PODS, labelSelector=selector))["items"]


async def _bound(kube: Kube, selector: str) -> list[JSON]:
    pods = (await kube.get(PODS, labelSelector=selector))["items"]
    return [p for p in pods if p["spec"].get("nodeName")]


async def test_baseline_scheduler_gang_and_workload_aware_preemption(
    cluster: Cluster, kube: Kube
) -> None:
    """Upstream kube-scheduler with GenericWorkload: all-or-nothing gangs, group preemption."""
    run = unique_name("base")
    pg_path = await kube.path_for(UPSTREAM, "PodGroup", NS)
    pc_path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    low, high = f"{run}-low", f"{run}-high"
    sel = f"run={run}"
    with baseline_scheduler(cluster):
        try:
            for pc, value in ((low, 100), (high, 10000)):
                await kube.create(
                    pc_path,
                    {
                        "apiVersion": "scheduling.k8s.io/v1",
                        "kind": "PriorityClass",
                        "metadata": {"name": pc},
                        "value": value,
                    },
                )
            # 1. A gang that fits (3 x 1 CPU on 2 x 4 CPU) is placed whole.
            await kube.create(pg_path, upstream_podgroup(f"{run}-fits", 3, priorityClassName=low))
            for i in range(3):
                await kube.create(
                    PODS,
                    group_pod(
                        f"{run}-fits-{i}",
                        f"{run}-fits",
                        scheduler_name=BASELINE,
                        cpu="1",
                        labels={"run": run, "gang": "fits"},
                        priority_class_name=low,
                    ),
                )
            await wait_for(
                lambda: _count_at_least(kube, f"{sel},gang=fits", 3),
                timeout=60,
                what="the fitting gang to be bound",
            )
            # 2. A gang that cannot fit (6 x 1 CPU, 5 CPU free, same priority: no preemption)
            #    gets no pod bound at all: gang semantics are on.
            await kube.create(pg_path, upstream_podgroup(f"{run}-toobig", 6, priorityClassName=low))
            for i in range(6):
                await kube.create(
                    PODS,
                    group_pod(
                        f"{run}-toobig-{i}",
                        f"{run}-toobig",
                        scheduler_name=BASELINE,
                        cpu="1",
                        labels={"run": run, "gang": "toobig"},
                        priority_class_name=low,
                    ),
                )
            await asyncio.sleep(5)
            assert await _bound(kube, f"{sel},gang=toobig") == []
            await _delete_pods(kube, f"{sel},gang=toobig")
            # 3. A high-priority gang of 2 x 3 CPU needs room on both nodes (5 CPU free but
            #    at most 2+3 per node): the scheduler preempts low pods, kwok finalizes the
            #    victims' graceful deletion, and the gang is bound.
            await kube.create(pg_path, upstream_podgroup(f"{run}-hp", 2, priorityClassName=high))
            for i in range(2):
                await kube.create(
                    PODS,
                    group_pod(
                        f"{run}-hp-{i}",
                        f"{run}-hp",
                        scheduler_name=BASELINE,
                        cpu="3",
                        labels={"run": run, "gang": "hp"},
                        priority_class_name=high,
                    ),
                )
            hp = await wait_for(
                lambda: _count_at_least(kube, f"{sel},gang=hp", 2),
                timeout=90,
                what="the high-priority gang to be bound after preemption",
            )
            assert len({p["spec"]["nodeName"] for p in hp}) == 2
            remaining = await _bound(kube, f"{sel},gang=fits")
            assert len(remaining) < 3, "no low-priority pod was preempted"
        except BaseException:
            sched_log = Path(cluster.log_dir / f"{BASELINE}.log")
            if sched_log.exists():
                print(sched_log.read_text(errors="replace")[-5000:])
            raise
        finally:
            await _delete_pods(kube, sel)
            for g in ("fits", "toobig", "hp"):
                await kube.delete(f"{pg_path}/{run}-{g}")
            for pc in (low, high):
                await kube.delete(f"{pc_path}/{pc}")


async def _count_at_least(kube: Kube, selector: str, n: int) -> list[JSON] | None:
    bound = await _bound(kube, selector)
    return bound if len(bound) >= n else None
