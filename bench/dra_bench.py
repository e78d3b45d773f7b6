"""Benchmark of DRA allocation in the gang cycle (not a test).

Cluster: N nodes, each with one ResourceSlice of 8 GPUs (driver gpu.example.com) in one
NVLink domain per node, 80 GiB each, plus a few nodes with 40 GiB GPUs the selector rejects.
Gangs of P pods, each pod with its own claim (from one template, as the resourceclaim
controller makes them) for 8 GPUs with a request selector on memory and matchAttribute on
the NVLink domain. Each gang is scheduled through the same Scheduler `gangsched run` uses,
one after the other, so later gangs see earlier gangs' devices taken.

Reports the first gang cycle (everything cold: inventory built, CEL compiled, devices
evaluated) and the following ones (warm), in milliseconds, beside the same gangs without
claims (baseline). The built cluster is frozen out of the garbage collector's reach first,
as `gangsched run` does once its caches have synced.
Each cycle is timed twice: wall time, and the CPU time of this process (the cycle is
single-threaded and synchronous), which a machine shared with other work inflates far less.

    .venv/bin/python -m bench.dra_bench [--nodes 1000] [--pods 64] [--gangs 8]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from fractions import Fraction
from pathlib import Path

from bench import background
from bench.background import GIB
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, AllocateClaim
from gangsched.core.dra.model import (
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    ExactRequest,
    MatchAttribute,
    ResourceClaim,
    ResourceSlice,
)
from gangsched.core.dra.state import DraState
from gangsched.core.model import Dialect, GroupRef, Pod, PodClaim, PodGroup
from gangsched.core.scheduler import Scheduler

DRIVER = "gpu.example.com"
SELECTOR = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'


def build(nodes: int, pods_per_gang: int, gangs: int, *, claims: bool = True) -> ClusterState:
    node_list = background.nodes(nodes, cpu=128_000, memory=1024 * GIB, zone_label=None)
    slices = []
    for i, node in enumerate(node_list):
        name = node.name
        memory = 40 if i % 50 == 0 else 80  # 2% of nodes have GPUs the selector rejects
        slices.append(
            ResourceSlice(
                name=f"{name}-gpus",
                driver=DRIVER,
                pool=name,
                generation=1,
                slice_count=1,
                node_name=name,
                devices=[
                    Device(
                        name=f"gpu-{d}",
                        attributes={
                            f"{DRIVER}/model": "H100",
                            f"{DRIVER}/nvlinkDomain": f"{name}-nvl0",
                            f"{DRIVER}/index": d,
                        },
                        capacity={f"{DRIVER}/memory": Fraction(memory * GIB)},
                    )
                    for d in range(8)
                ],
            )
        )
    spec = ClaimSpec(
        requests=(
            DeviceRequest(
                name="gpus",
                exactly=ExactRequest(name="gpus", class_name="gpu", selectors=(SELECTOR,), count=8),
            ),
        ),
        constraints=(MatchAttribute(f"{DRIVER}/nvlinkDomain"),),
    )
    pods, resource_claims, groups = [], [], []
    for g in range(gangs):
        ref = GroupRef(Dialect.SIGS, "train", f"job-{g}")
        groups.append(PodGroup(ref=ref, min_member=pods_per_gang, created=float(g)))
        for p in range(pods_per_gang):
            name = f"job-{g}-{p}"
            resource_claims.append(ResourceClaim(namespace="train", name=f"{name}-gpu", spec=spec))
            pod_claims = (
                (PodClaim(name="gpu", template_name="gpus", generated_name=f"{name}-gpu"),)
                if claims
                else ()
            )
            pods.append(
                Pod(
                    namespace="train",
                    name=name,
                    uid=f"u-{name}",
                    scheduler_name="gangsched",
                    requests={"cpu": 8000, "memory": 64 * GIB},
                    group=ref,
                    created=float(g),
                    claims=pod_claims,
                )
            )
    gpu_class = DeviceClass(name="gpu", selectors=(f'device.driver == "{DRIVER}"',))
    dra = DraState.build(classes=[gpu_class], slices=slices, claims=resource_claims)
    return ClusterState.build(
        scheduler_name="gangsched", nodes=node_list, pods=pods, groups=groups, extensions=[dra]
    )


def run(nodes: int, pods_per_gang: int, gangs: int, *, claims: bool = True) -> dict[str, object]:
    cluster = build(nodes, pods_per_gang, gangs, claims=claims)
    # As `gangsched run` does once its caches have synced (edge/operator.py), before its
    # first cycle: what the cache holds leaves the collector's reach, without a collection.
    # Otherwise the first cycle paid a full collection over the objects this build left.
    gc.freeze()
    scheduler = Scheduler(cluster)
    scheduler.enqueue_pending()
    cycles: list[float] = []
    cpu_cycles: list[float] = []
    devices: set[tuple[str, str, str]] = set()
    while True:
        started, cpu_started = time.perf_counter(), time.process_time()
        report = scheduler.step(0.0)
        if report is None:
            break
        cycles.append(time.perf_counter() - started)
        cpu_cycles.append(time.process_time() - cpu_started)
        assert report.result == SCHEDULED, report.message
        for decision in report.decisions:
            if isinstance(decision, AllocateClaim) and decision.allocation is not None:
                for result in decision.allocation.results:
                    assert result.device_id not in devices, "device allocated twice"
                    devices.add(result.device_id)
    assert len(devices) == (pods_per_gang * gangs * 8 if claims else 0)
    warm = [c * 1000 for c in cycles[1:]]
    warm_cpu = [c * 1000 for c in cpu_cycles[1:]]
    return {
        "nodes": nodes,
        "pods_per_gang": pods_per_gang,
        "gpus_per_pod": 8,
        "gangs": len(cycles),
        "first_cycle_ms": round(cycles[0] * 1000, 1),
        "warm_cycle_ms_mean": round(statistics.fmean(warm), 1) if warm else None,
        "warm_cycle_ms_max": round(max(warm), 1) if warm else None,
        "first_cycle_cpu_ms": round(cpu_cycles[0] * 1000, 1),
        "warm_cycle_cpu_ms_mean": round(statistics.fmean(warm_cpu), 1) if warm_cpu else None,
        "warm_cycle_cpu_ms_max": round(max(warm_cpu), 1) if warm_cpu else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=64, help="pods per gang (8 GPUs each)")
    parser.add_argument("--gangs", type=int, default=8)
    parser.add_argument("--json", default="", help="also write the result here")
    args = parser.parse_args()
    # Side by side with the same gangs without claims: the machine is shared and noisy, so
    # the ratio says more than either figure alone.
    result = {
        "dra": run(args.nodes, args.pods, args.gangs),
        "baseline_without_claims": run(args.nodes, args.pods, args.gangs, claims=False),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
