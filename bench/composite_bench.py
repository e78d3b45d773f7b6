"""Benchmark of the tree cycle (not a test): a CompositePodGroup tree of 8 gangs x 8 pods
against the flat gang of 64 pods, on the same cluster, one cycle at a time.

Cluster: N nodes (32 CPU, 128 GiB, 110 pods, 4 zones) with 10 running pods each (mixed
sizes), as `bench.core_bench`. Then, interleaved so both see the same fill: `--count` trees
(a root CompositePodGroup, gang minGroupCount 8, over 8 scheduling.k8s.io PodGroups of
minCount 8) and `--count` flat PodGroups of minCount 64, every member 1 CPU and 2 GiB.
`--zoned` gives each tree's root a zone topology constraint (the whole tree in one zone).

    .venv/bin/python -m bench.composite_bench [--nodes 1000] [--count 10] [--zoned]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.model import CompositePodGroup, composite_ref
from gangsched.core.decisions import SCHEDULED
from gangsched.core.model import Dialect, GroupRef, Node, Pod, PodGroup
from gangsched.core.scheduler import Scheduler

GIB = 1024**3


def build(nodes: int, count: int, *, zoned: bool) -> ClusterState:
    node_list = [
        Node(
            name=f"node-{i:05d}",
            labels={"kubernetes.io/hostname": f"node-{i:05d}", "zone": f"zone-{i % 4}"},
            allocatable={"cpu": 32000, "memory": 128 * GIB, "pods": 110},
        )
        for i in range(nodes)
    ]
    sizes = [250, 500, 1000, 2000]
    pods = [
        Pod(
            namespace="running",
            name=f"run-{i}",
            uid=f"r{i}",
            scheduler_name="default-scheduler",
            node_name=f"node-{i % nodes:05d}",
            phase="Running",
            requests={"cpu": sizes[i % 4], "memory": sizes[i % 4] * 4 * 1024 * 1024},
        )
        for i in range(nodes * 10)
    ]
    groups: list[PodGroup] = []
    composites: list[CompositePodGroup] = []
    created = 0.0
    for t in range(count):
        created += 1
        root = CompositePodGroup(
            ref=composite_ref("jobs", f"tree-{t}"),
            min_group_count=8,
            gang=True,
            created=created,
            topology_key="zone" if zoned else None,
        )
        composites.append(root)
        for g in range(8):
            ref = GroupRef(Dialect.UPSTREAM, "jobs", f"tree-{t}-g{g}")
            groups.append(PodGroup(ref=ref, min_member=8, priority=0, parent=root.ref.name))
            for m in range(8):
                created += 1
                pods.append(_member(ref, m, created))
        ref = GroupRef(Dialect.UPSTREAM, "jobs", f"flat-{t}")
        groups.append(PodGroup(ref=ref, min_member=64, priority=0, created=created))
        for m in range(64):
            created += 1
            pods.append(_member(ref, m, created))
    return ClusterState.build(
        scheduler_name="gangsched",
        nodes=node_list,
        pods=pods,
        groups=groups,
        composites=composites,
    )


def _member(ref: GroupRef, m: int, created: float) -> Pod:
    return Pod(
        namespace="jobs",
        name=f"{ref.name}-{m}",
        uid=f"{ref.name}-{m}",
        scheduler_name="gangsched",
        requests={"cpu": 1000, "memory": 2 * GIB},
        group=ref,
        created=created,
    )


def run(nodes: int, count: int, *, zoned: bool) -> dict[str, object]:
    state = build(nodes, count, zoned=zoned)
    sched = Scheduler(state)
    sched.enqueue_pending()
    times: dict[str, list[float]] = {"tree": [], "flat": []}
    strategies: dict[str, set[str]] = {"tree": set(), "flat": set()}
    failures = 0
    while True:
        started = time.perf_counter()
        report = sched.step(0.0)
        elapsed = time.perf_counter() - started
        if report is None:
            break
        kind = "tree" if report.gang.dialect is Dialect.COMPOSITE else "flat"
        if report.result != SCHEDULED or len(report.bound) != 64:
            failures += 1
            continue
        times[kind].append(elapsed)
        strategies[kind].add(report.strategy)

    def ms(samples: list[float]) -> dict[str, float]:
        return {
            "mean_ms": round(statistics.fmean(samples) * 1000, 1),
            "median_ms": round(statistics.median(samples) * 1000, 1),
            "max_ms": round(max(samples) * 1000, 1),
        }

    tree, flat = ms(times["tree"]), ms(times["flat"])
    return {
        "nodes": nodes,
        "zoned": zoned,
        "trees": len(times["tree"]),
        "flat_gangs": len(times["flat"]),
        "failures": failures,
        "tree_8x8": tree,
        "flat_64": flat,
        "ratio_median": round(tree["median_ms"] / flat["median_ms"], 2),
        "strategies": {k: sorted(v) for k, v in strategies.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--zoned", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(args.nodes, args.count, zoned=args.zoned), indent=2))


if __name__ == "__main__":
    main()
