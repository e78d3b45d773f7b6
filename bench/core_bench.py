"""Benchmark of the pure scheduling core (not a test): the cost of one gang cycle.

Cluster: N nodes (32 CPU, 128 GiB, 110 pods) with 10 running pods each (mixed sizes), then
1,000 gangs of 3 pods and 100 gangs of 64 pods, scheduled one cycle at a time through the
same Scheduler that `gangsched run` uses. Reports per-cycle average and p99, pods/s, and peak
RSS, at several cluster sizes so the growth of cost with nodes is visible.

Constrained gangs (`--constrained N`, default 10): N gangs of 64 whose members repel each
other (required pod anti-affinity on the hostname) and N gangs of 64 spread over the zones
(topology spread, maxSkew 1, DoNotSchedule), among the same running pods. Their cycles read
the snapshot's incremental per-node pod counts; `--before FILE` copies the constrained figures
of an earlier run (e.g. one made before the counts were incremental) into each row as
`before`, so the two stand side by side.

    .venv/bin/python -m bench.core_bench [--nodes 1000 5000 10000] [--json bench/results/core.json]

Each size runs in a fresh subprocess so peak RSS is per size, not cumulative.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import background
from bench.background import GIB
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED
from gangsched.core.labels import LabelSelector
from gangsched.core.model import (
    Dialect,
    GroupRef,
    Pod,
    PodAffinityTerm,
    PodGroup,
    TopologySpreadConstraint,
)
from gangsched.core.scheduler import Scheduler


def build(nodes: int, small: int, large: int, constrained: int = 0) -> tuple[ClusterState, float]:
    started = time.perf_counter()
    node_list = background.nodes(nodes)
    pods = background.running_pods(nodes)
    groups: list[PodGroup] = []
    created = 0.0
    shapes = [(f"gang{size}", count, size) for count, size in ((small, 3), (large, 64))]
    shapes += [(kind, constrained, 64) for kind in CONSTRAINED]
    for prefix, count, size in shapes:
        for g in range(count):
            ref = GroupRef(Dialect.SIGS, "jobs", f"{prefix}-{g}")
            groups.append(PodGroup(ref=ref, min_member=size, created=created))
            for m in range(size):
                created += 1
                pods.append(member(prefix, ref, m, created))
    state = ClusterState.build(
        scheduler_name="gangsched", nodes=node_list, pods=pods, groups=groups
    )
    return state, time.perf_counter() - started


#: Gang name prefixes of the constrained workloads.
CONSTRAINED = ("anti-affinity", "spread")


def member(kind: str, ref: GroupRef, m: int, created: float) -> Pod:
    """A gang member of 1 CPU; in the constrained kinds it repels its gang's other members
    (one per host) or spreads with them over the zones."""
    pod = Pod(
        namespace="jobs",
        name=f"{ref.name}-{m}",
        uid=f"{ref.name}-{m}",
        scheduler_name="gangsched",
        labels={"app": ref.name},
        requests={"cpu": 1000, "memory": 2 * GIB},
        group=ref,
        created=created,
    )
    selector = LabelSelector(match_labels=(("app", ref.name),))
    if kind == "anti-affinity":
        pod.anti_affinity = (PodAffinityTerm(selector, "kubernetes.io/hostname"),)
    elif kind == "spread":
        pod.spread = (TopologySpreadConstraint(1, "zone", "DoNotSchedule", selector),)
    return pod


def run_one(nodes: int, small: int, large: int, constrained: int) -> dict[str, object]:
    state, build_seconds = build(nodes, small, large, constrained)
    sched = Scheduler(state)
    sched.enqueue_pending()
    per_size: dict[int | str, list[float]] = {3: [], 64: []}
    failures = 0
    started = time.perf_counter()
    pods_bound = 0
    while True:
        t0 = time.perf_counter()
        report = sched.step(0.0)
        elapsed = time.perf_counter() - t0
        if report is None:
            break
        kind = report.gang.name.rsplit("-", 1)[0]
        size: int | str = kind if kind in CONSTRAINED else len(report.pods)
        per_size.setdefault(size, []).append(elapsed)
        if report.result == SCHEDULED:
            pods_bound += len(report.bound)
        else:
            failures += 1
    total = time.perf_counter() - started
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def stats(samples: list[float]) -> dict[str, float]:
        if not samples:
            return {}
        ordered = sorted(samples)
        return {
            "cycles": len(samples),
            "avg_ms": round(statistics.fmean(samples) * 1000, 3),
            "p50_ms": round(ordered[len(ordered) // 2] * 1000, 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        }

    return {
        "nodes": nodes,
        "running_pods": nodes * 10,
        "build_seconds": round(build_seconds, 2),
        "gangs_of_3": stats(per_size.get(3, [])),
        "gangs_of_64": stats(per_size.get(64, [])),
        "constrained_gangs_of_64": {kind: stats(per_size.get(kind, [])) for kind in CONSTRAINED},
        "unscheduled_gangs": failures,
        "pods_bound": pods_bound,
        "pods_per_second": round(pods_bound / total, 1) if total else 0.0,
        "schedule_seconds": round(total, 2),
        "peak_rss_mib": round(rss_mib, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--small", type=int, default=1000, help="gangs of 3 pods")
    parser.add_argument("--large", type=int, default=100, help="gangs of 64 pods")
    parser.add_argument(
        "--constrained", type=int, default=10, help="gangs of 64 per constrained kind"
    )
    parser.add_argument(
        "--before", type=Path, help="an earlier core.json whose constrained figures to keep"
    )
    parser.add_argument("--json", default="bench/results/core.json")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.small, args.large, args.constrained)))
        return
    before = {}
    if args.before:
        for row in json.loads(args.before.read_text()):
            figures = row.get("constrained_gangs_of_64", {})
            before[row["nodes"]] = {kind: figures[kind] for kind in CONSTRAINED if kind in figures}
    results = []
    for nodes in args.nodes:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.core_bench",
                "--one",
                str(nodes),
                "--small",
                str(args.small),
                "--large",
                str(args.large),
                "--constrained",
                str(args.constrained),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if nodes in before:
            row["constrained_gangs_of_64"]["before"] = before[nodes]
        results.append(row)
        g3, g64 = row["gangs_of_3"], row["gangs_of_64"]
        print(
            f"{nodes:>6} nodes {row['running_pods']:>7} running | gang of 3: avg "
            f"{g3.get('avg_ms')} ms p99 {g3.get('p99_ms')} ms | gang of 64: avg "
            f"{g64.get('avg_ms')} ms p99 {g64.get('p99_ms')} ms | {row['pods_per_second']} pods/s"
            f" | RSS {row['peak_rss_mib']} MiB | unscheduled {row['unscheduled_gangs']}"
        )
        for kind, figures in row["constrained_gangs_of_64"].items():
            if kind in CONSTRAINED:
                print(f"{'':>6} constrained gang of 64, {kind}: avg {figures.get('avg_ms')} ms")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
