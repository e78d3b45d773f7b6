"""Benchmark of `gangsched run` on a real control plane (not a test).

1,000 kwok nodes (32 CPU, 256 GiB), then 500 gangs of 8 one-CPU pods created as fast as the
API server takes them. Measured from outside through a watch: pods bound per second, the time
from a gang's last member being created to all its members bound (p50/p99), API requests the
scheduler sent per bound pod (its own request counter), and its peak RSS and CPU seconds.

    .venv/bin/python -m bench.operator_bench [--nodes 1000] [--gangs 500] [--size 8]

`--scheduler kube-scheduler` runs the same workload, in the upstream dialect
(scheduling.k8s.io PodGroups, spec.schedulingGroup), through the upstream kube-scheduler.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from bench.harness import (
    Cluster,
    SchedulerProcess,
    connect,
    create_nodes,
    install_gangsched,
    percentile,
    start_gangsched,
)
from gangsched.edge.kube import Kube

NAMESPACE = "bench"


def gang_objects(
    index: int, size: int, scheduler: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    name = f"gang-{index:04d}"
    if scheduler == "gangsched":
        group = {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"minMember": size},
        }
        join: dict[str, Any] = {"labels": {"pod-group.scheduling.sigs.k8s.io": name}}
        extra: dict[str, Any] = {}
        scheduler_name = "gangsched"
    else:
        group = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
        }
        join = {"labels": {}}
        extra = {"schedulingGroup": {"podGroupName": name}}
        scheduler_name = "kube-scheduler-baseline"
    pods = []
    for m in range(size):
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{m}", "namespace": NAMESPACE, **join},
                "spec": {
                    "schedulerName": scheduler_name,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": "pause",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                    **extra,
                },
            }
        )
    return group, pods


async def watch_binds(kube: Kube, bound_at: dict[str, float], stop: asyncio.Event) -> None:
    listed = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")
    version = listed["metadata"]["resourceVersion"]
    while not stop.is_set():
        async for event in kube.watch(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            query={"resourceVersion": version, "allowWatchBookmarks": "true"},
            read_timeout=60,
        ):
            obj = event.get("object") or {}
            version = obj.get("metadata", {}).get("resourceVersion", version)
            name = obj.get("metadata", {}).get("name")
            if name and obj.get("spec", {}).get("nodeName") and name not in bound_at:
                bound_at[name] = time.monotonic()
            if stop.is_set():
                return


async def run(args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster.start()
    scheduler: SchedulerProcess | None = None
    try:
        kube = await connect(cluster)
        started = time.monotonic()
        await create_nodes(kube, args.nodes, cpu="32", memory="256Gi")
        node_seconds = time.monotonic() - started
        await kube.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        if args.scheduler == "gangsched":
            install_gangsched(cluster)
        scheduler_started = 0.0

        def start_scheduler() -> SchedulerProcess | None:
            nonlocal scheduler_started
            scheduler_started = time.monotonic()
            if args.scheduler == "gangsched":
                return start_gangsched(cluster)
            cluster.start_baseline()
            return None

        if not args.precreate:
            scheduler = start_scheduler()
        requests_before = 0.0
        bound_at: dict[str, float] = {}
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_binds(kube, bound_at, stop))
        await asyncio.sleep(0.5)
        complete_at: dict[str, float] = {}
        members: dict[str, list[str]] = {}
        slots = asyncio.Semaphore(args.concurrency)
        t0 = time.monotonic()

        async def submit(index: int) -> None:
            group, pods = gang_objects(index, args.size, args.scheduler)
            plural = "/apis/" + group["apiVersion"] + f"/namespaces/{NAMESPACE}/podgroups"
            async with slots:
                await kube.post(plural, group)
                for pod in pods:
                    await kube.post(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
            name = group["metadata"]["name"]
            complete_at[name] = time.monotonic()
            members[name] = [p["metadata"]["name"] for p in pods]

        await asyncio.gather(*(submit(i) for i in range(args.gangs)))
        created = time.monotonic()
        create_seconds = created - t0
        if args.precreate:
            # Everything exists before the scheduler starts: throughput is the scheduler's
            # own, not the rate at which this client manages to create pods.
            scheduler = start_scheduler()
            for name in complete_at:
                complete_at[name] = scheduler_started
            t0 = scheduler_started
        total = args.gangs * args.size
        deadline = created + args.timeout
        while len(bound_at) < total and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        stop.set()
        watcher.cancel()
        last_bind = max(bound_at.values(), default=created)
        latencies = [
            max(bound_at[p] for p in pods) - complete_at[g]
            for g, pods in members.items()
            if all(p in bound_at for p in pods)
        ]
        result: dict[str, Any] = {
            "scheduler": args.scheduler,
            "mode": "precreated" if args.precreate else "streamed",
            "nodes": args.nodes,
            "gangs": args.gangs,
            "gang_size": args.size,
            "node_setup_seconds": round(node_seconds, 1),
            "create_seconds": round(create_seconds, 2),
            "pods_bound": len(bound_at),
            "pods_per_second": round(len(bound_at) / max(last_bind - t0, 1e-9), 1),
            "group_latency_p50_s": round(percentile(latencies, 0.5), 3),
            "group_latency_p99_s": round(percentile(latencies, 0.99), 3),
            "gangs_complete": len(latencies),
        }
        if scheduler is not None:
            sent = scheduler.metric("gangsched_api_requests_total") - requests_before
            result["api_requests_per_bound_pod"] = round(sent / max(len(bound_at), 1), 2)
            result["scheduler_peak_rss_mib"] = round(scheduler.rss_peak_mib(), 1)
            result["scheduler_cpu_seconds"] = round(scheduler.cpu_seconds(), 1)
        await kube.close()
        return result
    finally:
        if scheduler is not None:
            scheduler.stop()
        cluster.stop_baseline()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=500)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--scheduler", choices=["gangsched", "kube-scheduler"], default="gangsched")
    parser.add_argument(
        "--precreate",
        action="store_true",
        help="create every gang before starting the scheduler (measures the scheduler alone)",
    )
    parser.add_argument("--json", default="bench/results/operator.json")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
