"""Benchmark of the volume plugins in the gang cycle (not a test): 64-pod gangs with 2 PVCs
per pod at 5,000 nodes.

Cluster as bench/core_bench.py (32 CPU nodes, 10 running pods each, 4 zones). Each workload
schedules `--gangs` gangs of 64 pods, one cycle each, through the same Scheduler as `gangsched
run`, after carrying out the previous gang's volume decisions as simulate does:

- `none`: the same gangs without volumes (the baseline the others are compared with);
- `dynamic`: 2 unbound WaitForFirstConsumer claims per pod, a CSI class provisioning in two
  of the four zones (allowedTopologies);
- `static`: 2 unbound claims per pod of a local class, 2 local PVs on every node (10,000 PVs
  with hostname node affinity): static matching, smallest PV that fits;
- `bound`: 2 claims per pod already bound to zonal PVs (node affinity on the zone label).

Each cycle is timed twice: wall time (the cycle's own clock) and the CPU time of this
process, which a machine shared with other work inflates far less; the ratios to `none` are
printed for both.

    .venv/bin/python -m bench.volumes_bench [--nodes 5000] [--gangs 10] \
        [--json bench/results/volumes.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench import background
from bench.background import GIB
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, BindVolume, SelectNode
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.core.model import Dialect, GroupRef, Pod, PodGroup, PodVolumeClaim
from gangsched.core.scheduler import Scheduler
from gangsched.core.volumes.book import VolumeBook
from gangsched.core.volumes.model import (
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gangsched.simulate.volumes import carry_out

WORKLOADS = ("none", "dynamic", "static", "bound")
ZONE = "topology.kubernetes.io/zone"


def _zone_term(zones: tuple[str, ...]) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_expressions=(Requirement(ZONE, "In", zones),)),)


def build(workload: str, nodes: int, gangs: int) -> ClusterState:
    node_list = background.nodes(nodes, zone_label=ZONE)
    pods = background.running_pods(nodes)
    book = VolumeBook()
    book.classes["csi"] = StorageClass(
        "csi",
        provisioner="csi.example.com",
        binding_mode="WaitForFirstConsumer",
        allowed_topologies=_zone_term(("zone-0", "zone-1")),
    )
    book.classes["local"] = StorageClass(
        "local", provisioner="kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer"
    )
    volumes: list[PersistentVolume] = []
    if workload == "static":
        for i in range(nodes):
            hostname = NodeSelectorTerm(
                match_expressions=(Requirement("kubernetes.io/hostname", "In", (f"node-{i:05d}",)),)
            )
            for j in range(2):
                volumes.append(
                    PersistentVolume(
                        name=f"local-{i:05d}-{j}",
                        storage_class="local",
                        capacity=(100 + 50 * j) * GIB,
                        access_modes=frozenset({"ReadWriteOnce"}),
                        node_affinity=(hostname,),
                    )
                )
    groups: list[PodGroup] = []
    for g in range(gangs):
        ref = GroupRef(Dialect.SIGS, "bench", f"gang-{g}")
        groups.append(PodGroup(ref=ref, min_member=64, created=float(g)))
        for m in range(64):
            name = f"g{g}-m{m}"
            claims: list[PodVolumeClaim] = []
            if workload != "none":
                for c in range(2):
                    claim_name = f"{name}-c{c}"
                    claims.append(PodVolumeClaim(volume=f"v{c}", claim=claim_name))
                    bound = workload == "bound"
                    book.upsert_claim(
                        PersistentVolumeClaim(
                            namespace="bench",
                            name=claim_name,
                            uid=f"u-{claim_name}",
                            storage_class="csi" if workload == "dynamic" else "local",
                            access_modes=frozenset({"ReadWriteOnce"}),
                            request=(50 + 40 * c) * GIB,
                            volume_name=f"pv-{claim_name}" if bound else "",
                            bind_completed=bound,
                        )
                    )
                    if bound:
                        volumes.append(
                            PersistentVolume(
                                name=f"pv-{claim_name}",
                                storage_class="zonal",
                                capacity=100 * GIB,
                                access_modes=frozenset({"ReadWriteOnce"}),
                                node_affinity=_zone_term((f"zone-{(g + c) % 4}", "zone-3")),
                                claim_ref=ClaimRef("bench", claim_name, f"u-{claim_name}"),
                                phase="Bound",
                            )
                        )
            pods.append(
                Pod(
                    namespace="bench",
                    name=name,
                    uid=f"u-{name}",
                    scheduler_name="gangsched",
                    group=ref,
                    requests={"cpu": 4000, "memory": 8 * GIB},
                    created=float(g) + m / 100,
                    volume_claims=tuple(claims),
                )
            )
    book.replace_volumes(volumes)
    return ClusterState.build(
        scheduler_name="gangsched", nodes=node_list, pods=pods, groups=groups, extensions=[book]
    )


def run(workload: str, nodes: int, gangs: int) -> dict[str, object]:
    started = time.perf_counter()
    cluster = build(workload, nodes, gangs)
    build_seconds = time.perf_counter() - started
    scheduler = Scheduler(cluster)
    scheduler.enqueue_pending(0.0)
    cycles: list[float] = []
    cpu: list[float] = []
    scheduled = 0
    while True:
        cpu_started = time.process_time()
        report = scheduler.step(0.0)
        if report is None:
            break
        cpu.append(time.process_time() - cpu_started)
        cycles.append(report.algorithm_seconds)
        scheduled += report.result == SCHEDULED
        for decision in report.decisions:
            if isinstance(decision, BindVolume | SelectNode):
                carry_out(decision, cluster)
    return {
        "workload": workload,
        "nodes": nodes,
        "gangs": gangs,
        "scheduled": scheduled,
        "build_seconds": round(build_seconds, 2),
        "cycle_median_ms": round(statistics.median(cycles) * 1000, 2),
        "cycle_max_ms": round(max(cycles) * 1000, 2),
        # CPU time of this process per cycle (single-threaded and synchronous): far less
        # inflated than wall time on a machine shared with other work.
        "cycle_cpu_median_ms": round(statistics.median(cpu) * 1000, 2),
        "cycle_cpu_max_ms": round(max(cpu) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=10)
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    for workload in args.workloads:
        result = run(workload, args.nodes, args.gangs)
        results.append(result)
        print(json.dumps(result))
    base = next((r for r in results if r["workload"] == "none"), None)
    if base is not None:
        for result in results:
            median = float(str(result["cycle_median_ms"]))
            ratio = median / float(str(base["cycle_median_ms"]))
            cpu = float(str(result["cycle_cpu_median_ms"]))
            cpu_ratio = cpu / float(str(base["cycle_cpu_median_ms"]))
            print(
                f"{result['workload']:>8}: {median} ms per 64-pod cycle, x{ratio:.2f}; "
                f"CPU {cpu} ms, x{cpu_ratio:.2f}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
