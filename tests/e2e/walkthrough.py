"""The seed walkthrough (examples/demo/, what `make demo` shows) replayed against whichever
gangsched a test started: the built image (test_image.py) or the Helm release's configuration
and identity (test_helm.py).

The demo's own files are applied with kubectl, made private to the run so they share a
cluster with other tests: the namespace and node names get the run's id, the nodes its label,
and the gang's pods select that label (the cluster's other nodes must not absorb the gang).
Everything else -- priorities, requests, the PodGroup, the victims pinned to the two nodes --
is the demo's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .conftest import REPO_ROOT, Cluster
from .k8s import JSON, Kube, condition, unique_name, wait_for

DEMO = REPO_ROOT / "examples" / "demo"
SIGS = "scheduling.sigs.k8s.io/v1alpha1"


def _private(docs: list[JSON], run: str) -> list[JSON]:
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Node":
            meta["name"] = f"{run}-{meta['name']}"
            meta.setdefault("labels", {}).update(
                {"e2e-test": run, "kubernetes.io/hostname": meta["name"]}
            )
        elif doc["kind"] != "PriorityClass":
            meta["namespace"] = run
        if doc["kind"] == "Pod":
            spec = doc["spec"]
            if "nodeName" in spec:
                spec["nodeName"] = f"{run}-{spec['nodeName']}"
            else:
                spec["nodeSelector"] = {"e2e-test": run}
    return docs


def _step(cluster: Cluster, run: str, name: str, workdir: Path) -> list[JSON]:
    docs = [d for d in yaml.safe_load_all((DEMO / name).read_text()) if d]
    docs = _private(docs, run)
    path = workdir / f"{run}-{name}"
    path.write_text(yaml.safe_dump_all(docs))
    cluster.kubectl("apply", "-f", str(path))
    return docs


async def replay_seed_walkthrough(
    cluster: Cluster, kube: Kube, *, workdir: Path, alive: Callable[[], None]
) -> dict[str, Any]:
    """Steps 1-4 of the demo; asserts the demo's outcome. `alive()` raises when the scheduler
    under test has died (so a crash fails at once, not at a timeout). Returns what it saw."""
    run = unique_name("seed")
    await kube.create("/api/v1/namespaces", {"metadata": {"name": run}})
    nodes: list[str] = []
    try:
        # Step 1: two 4-CPU nodes and two priority classes.
        docs = _step(cluster, run, "01-cluster.yaml", workdir)
        nodes = [d["metadata"]["name"] for d in docs if d["kind"] == "Node"]
        for node in nodes:
            await kube.wait_for_object(
                f"/api/v1/nodes/{node}",
                lambda n: (condition(n, "Ready") or {}).get("status") == "True",
                what=f"node {node} Ready",
            )
        # Step 2: both nodes filled with low-priority pods.
        _step(cluster, run, "02-low-priority-pods.yaml", workdir)
        for pod in ("lp-pod-1", "lp-pod-2"):
            await kube.wait_for_object(
                f"/api/v1/namespaces/{run}/pods/{pod}",
                lambda p: p.get("status", {}).get("phase") == "Running",
                what=f"{pod} running",
            )
        # Step 3: the 2-pod high-priority gang that cannot fit without preemption.
        _step(cluster, run, "03-high-priority-job.yaml", workdir)

        marked: dict[str, JSON] = {}

        async def victims_marked_and_gone() -> bool:
            alive()
            items = (await kube.get(f"/api/v1/namespaces/{run}/pods"))["items"]
            pods = {p["metadata"]["name"]: p for p in items}
            for name in ("lp-pod-1", "lp-pod-2"):
                cond = condition(pods[name], "DisruptionTarget") if name in pods else None
                if cond:
                    marked[name] = cond
            return not ({"lp-pod-1", "lp-pod-2"} & set(pods))

        await wait_for(victims_marked_and_gone, timeout=90, interval=0.1, what="victims gone")
        # kwok may finish a deletion before a poll sees the condition; the events remain. The
        # scheduler posts a victim's Preempted event after its eviction, so the victim can be
        # gone before the event is there: wait for both events.
        preempted: dict[str, JSON] = {}

        async def both_events() -> bool:
            events = await kube.get(
                f"/apis/events.k8s.io/v1/namespaces/{run}/events", fieldSelector="reason=Preempted"
            )
            preempted.clear()
            preempted.update({e["regarding"]["name"]: e for e in events["items"]})
            return {"lp-pod-1", "lp-pod-2"} <= set(preempted)

        await wait_for(both_events, timeout=60, what="a Preempted event on each victim")
        assert set(preempted) == {"lp-pod-1", "lp-pod-2"}, sorted(preempted)
        assert {e.get("related", {}).get("name") for e in preempted.values()} == {"hp-training-job"}
        for cond in marked.values():
            assert cond["reason"] == "PreemptionByScheduler", cond
            assert f"preemptor: {run}/hp-training-job" in cond["message"], cond

        # Step 4: the gang binds whole, one member per node.
        async def bound() -> dict[str, str]:  # empty until both are bound
            alive()
            got = {}
            for pod in ("hp-worker-1", "hp-worker-2"):
                obj = await kube.get(f"/api/v1/namespaces/{run}/pods/{pod}")
                got[pod] = obj["spec"].get("nodeName")
            return got if all(got.values()) else {}

        placed: dict[str, str] = await wait_for(bound, timeout=90, what="the gang bound")
        assert sorted(placed.values()) == sorted(nodes), placed
        group = await kube.wait_for_object(
            f"/apis/{SIGS}/namespaces/{run}/podgroups/hp-training-job",
            lambda g: g.get("status", {}).get("phase") == "Running",
            what="PodGroup hp-training-job Running",
            timeout=60,
        )
        return {"namespace": run, "placed": placed, "marked": marked, "podGroup": group}
    finally:
        for path in (
            f"/api/v1/namespaces/{run}/pods",
            f"/apis/{SIGS}/namespaces/{run}/podgroups",
        ):
            await kube.delete(path, grace_period_seconds=0)
        for node in nodes:
            await kube.delete(f"/api/v1/nodes/{node}")
        await kube.delete(f"/api/v1/namespaces/{run}")
