"""Workload (t): a stream of rack-constrained gangs of mixed priority on a rack cluster.

20 racks x 16 kwok nodes (8 CPU, label `bench.example.com/rack`); gangs of 2-32 pods of
2 CPU (4 per node, 64 per rack), each constrained to one rack (upstream
`spec.schedulingConstraints.topology`, ours `spec.topology.required`), 70% at priority
bench-low and 30% at bench-high, created in waves of `t_wave` gangs (the same random order
for both schedulers in a round) adding up to more than the cluster holds, so the
high-priority waves preempt.

With `--set t_pods_first=1` a wave's pods are created before its PodGroups, and the wave
starts when the PodGroups are created: neither scheduler can start a gang without its
PodGroup, so the wave's time is the scheduler's, without the creation of the pods.

With `--set t_lifetime=N` gangs also finish: before wave k is created, every gang of wave
k - N with all its members running is deleted (a finished job). The cluster then drains as
well as fills, so whole racks can stay free; they are sampled once each wave has settled
(`racks_free_per_wave`), before the next departures.

A wave is created once the previous one has settled (`t_settle_s`): no bind or deletion for
that long and no preemption under way (no pending pod nominated). Both schedulers then face
the same pending gangs at every wave, whatever their speed. With waves on a wall clock
(`--set t_settle_s=0`: one wave every `t_wave_s` seconds), the victims counted how far a
scheduler lagged behind the arrivals (one that is still working through the low waves when
the high ones come admits the high ones first from its queue and preempts nothing), not what
its preemption chose. The run ends when no pod has been bound or deleted for `t_quiet_s`
seconds (or at the timeout). Measured from the pods at the end:

* gangs admitted: every member bound and none deleted (a gang that lost a member to
  preemption is not admitted), finished ones (`t_lifetime`) included;
* gangs broken: some members still bound, others preempted (the rest make no progress);
* pods/s: pods bound per second of scheduling, summed per wave from the wave's creation to
  its last bind (the settling pauses left out); first creation to last bind with clock waves;
* over the creation floor (settled waves): per wave, its last bind after the API server
  answered the wave's last create, summed (creating ~200 pods takes a good part of a wave);
* victims: gang pods that were bound and then deleted (preempted), finished ones left out;
* whole racks free: racks where no node holds a gang pod;
* largest placeable gang: the most 2-CPU pods one rack still has room for;
* racks per admitted gang (1 when the constraint is honoured), over the gangs still running.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from typing import Any

from bench.compare.cluster import Env, announce_kept, prepare_cluster, stop_cluster
from bench.compare.measure import Watch, load_average
from bench.compare.schedulers import prepare_launch, start, wait_ready
from bench.compare.workloads import NAMESPACE, Sizes, create_request, pod, pod_group
from bench.harness import Cluster, SchedulerProcess, connect, create_nodes
from gangsched.edge.kube import Kube

RACK = "bench.example.com/rack"
POD_CPU = 2


def rack_of(index: int, sizes: Sizes) -> str:
    return f"rack-{index // sizes.t_rack_nodes:02d}"


def build_gangs(
    scheduler: str, sizes: Sizes, seed: int
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    rng = random.Random(seed)
    gangs = []
    for g in range(sizes.t_gangs):
        size = rng.randint(sizes.t_min, sizes.t_max)
        klass = "bench-high" if rng.random() < sizes.t_high_share else "bench-low"
        name = f"tgang-{g:03d}"
        group = pod_group(scheduler, name, size, priority_class=klass, topology_key=RACK)
        members = [
            pod(
                scheduler,
                f"{name}-{m:02d}",
                group=name,
                cpu=str(POD_CPU),
                memory="1Gi",
                priority_class=klass,
            )
            for m in range(size)
        ]
        gangs.append((group, members))
    return gangs


async def run_topology(
    scheduler: str, round_no: int, *, sizes: Sizes, timeout: float, loadgen: Any, keep: bool
) -> dict[str, Any]:
    nodes = sizes.t_racks * sizes.t_rack_nodes
    gangs = build_gangs(scheduler, sizes, seed=round_no)
    cluster = Cluster.start()
    env = Env.of(cluster, loadgen)
    kube = await connect(cluster)
    watch = Watch()
    running: SchedulerProcess | None = None
    result: dict[str, Any] = {
        "workload": "t",
        "scheduler": scheduler,
        "round": round_no,
        "nodes": nodes,
        "gangs": len(gangs),
        "pods": sum(len(m) for _, m in gangs),
        "load_before": load_average(),
    }
    try:
        await prepare_cluster(env, kube)
        await create_nodes(
            kube,
            nodes,
            cpu="8",
            memory="64Gi",
            labels=lambda i: {RACK: rack_of(i, sizes)},
        )
        run_dir = env.cluster.dir / f"run-t-{scheduler}-{round_no}"
        launch = prepare_launch(env, scheduler, run_dir)
        watch.start(kube)
        await asyncio.sleep(0.3)
        running = start(launch)
        await wait_ready(running, launch)
        await asyncio.sleep(2.0)
        cpu_before = running.cpu_seconds()
        t_start = time.time()
        deadline = t_start + timeout
        wave_starts: list[float] = []
        wave_created: list[float] = []
        waves = [gangs[i : i + sizes.t_wave] for i in range(0, len(gangs), sizes.t_wave)]
        finished: set[str] = set()
        free_per_wave: list[int] = []
        for index, wave in enumerate(waves):
            departures = sizes.t_lifetime and index >= sizes.t_lifetime
            if departures:
                free_per_wave.append(await racks_free_now(kube, sizes))
                # The wave starts with its departures: a gang that waited for their room
                # binds inside the wave that freed it, not the one before.
                wave_starts.append(time.time())
                finished |= await finish(kube, waves[index - sizes.t_lifetime], watch)
            pods = [create_request(p) for _, members in wave for p in members]
            if sizes.t_pods_first:
                await env.post_all(pods)
                pods = []
            if not departures:
                wave_starts.append(time.time())
            answered = await env.post_all([create_request(g) for g, _ in wave] + pods)
            wave_created.append(max(answered.values(), default=wave_starts[-1]))
            if sizes.t_settle_s > 0:
                await settle(watch, quiet=sizes.t_settle_s, deadline=deadline)
            else:
                await asyncio.sleep(sizes.t_wave_s)
        await settle(watch, quiet=sizes.t_quiet_s, deadline=deadline)
        result["cpu_s"] = round(running.cpu_seconds() - cpu_before, 2)
        result["waves"] = "settled" if sizes.t_settle_s > 0 else "clock"
        result["pods_first"] = bool(sizes.t_pods_first)
        result["lifetime_waves"] = sizes.t_lifetime
        result.update(
            await measure(
                kube,
                gangs,
                watch,
                sizes,
                wave_starts=wave_starts,
                wave_created=wave_created,
                finished=finished,
            )
        )
        if sizes.t_lifetime:
            free_per_wave.append(result["racks_fully_free"])
            result["racks_free_per_wave"] = free_per_wave
            result["gangs_finished"] = sum(
                all(p["metadata"]["name"] in finished for p in members) for _, members in gangs
            )
        result["load_after"] = load_average()
        return result
    finally:
        if running is not None:
            running.stop()
        await watch.stop()
        await kube.close()
        if keep:
            announce_kept(env.cluster)
        else:
            stop_cluster(env.cluster)


async def finish(
    kube: Kube, wave: list[tuple[dict[str, Any], list[dict[str, Any]]]], watch: Watch
) -> set[str]:
    """Delete the gangs of `wave` whose members all run (finished jobs); their pod names."""
    done: set[str] = set()
    for _, members in wave:
        names = [p["metadata"]["name"] for p in members]
        if all(n in watch.bound_at and n not in watch.gone for n in names):
            done.update(names)
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    await asyncio.gather(
        *(kube.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{n}", body) for n in sorted(done))
    )
    return done


def node_racks(sizes: Sizes) -> dict[str, str]:
    return {
        f"bench-node-{i:05d}": rack_of(i, sizes) for i in range(sizes.t_racks * sizes.t_rack_nodes)
    }


def rack_room(items: list[dict[str, Any]], sizes: Sizes) -> tuple[int, int]:
    """From a list of the bench's pods: racks where no node holds a pod, and the most 2-CPU
    pods one rack still has room for."""
    node_rack = node_racks(sizes)
    used: dict[str, int] = defaultdict(int)
    for p in items:
        node = p["spec"].get("nodeName")
        if node in node_rack and not p["metadata"].get("deletionTimestamp"):
            used[node] += POD_CPU
    room: dict[str, int] = defaultdict(int)
    for node, rack in node_rack.items():
        room[rack] += (8 - used.get(node, 0)) // POD_CPU
    return sizes.t_racks - len({node_rack[n] for n in used}), max(room.values(), default=0)


async def racks_free_now(kube: Kube, sizes: Sizes) -> int:
    items = (await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
    return rack_room(items, sizes)[0]


async def settle(watch: Watch, *, quiet: float, deadline: float) -> None:
    """Until no pod was bound or deleted for `quiet` seconds and no preemption is under way
    (a pending pod nominated to a node), or the deadline."""
    seen, last_change = (-1, -1), time.time()
    while time.time() < deadline:
        now = (len(watch.bound_at), len(watch.gone))
        if now != seen or watch.nominated:
            seen, last_change = now, time.time()
        elif time.time() - last_change >= quiet:
            return
        await asyncio.sleep(0.5)


def scheduling_seconds(binds: list[float], wave_starts: list[float], *, settled: bool) -> float:
    """Seconds spent scheduling: per wave, its creation to its last bind before the next wave
    (settled waves), or the first creation to the last bind (clock waves overlap)."""
    if not binds:
        return 0.0
    if not settled:
        return binds[-1] - wave_starts[0]
    return sum(max(inside) - created for created, inside in in_waves(binds, wave_starts) if inside)


def in_waves(times: list[float], wave_starts: list[float]) -> list[tuple[float, list[float]]]:
    """Per wave: its creation time and the `times` between it and the next wave."""
    ends = [*wave_starts[1:], float("inf")]
    return [
        (created, [t for t in times if created <= t < end])
        for created, end in zip(wave_starts, ends, strict=True)
    ]


def wave_breakdown(
    binds: list[float], deletions: list[float], wave_starts: list[float], wave_created: list[float]
) -> list[dict[str, Any]]:
    """Per settled wave, from its creation: seconds until the API server had answered every
    create (`created_s`, the floor no scheduler can beat), to its first and last bind, binds
    and deletions (victims going) inside it: where a wave's scheduling time goes."""
    out = []
    for (created, inside), (_, gone), answered in zip(
        in_waves(binds, wave_starts), in_waves(deletions, wave_starts), wave_created, strict=True
    ):
        out.append(
            {
                "created_s": round(answered - created, 2),
                "binds": len(inside),
                "first_bind_s": round(min(inside) - created, 2) if inside else None,
                "last_bind_s": round(max(inside) - created, 2) if inside else None,
                "deletions": len(gone),
                "last_deletion_s": round(max(gone) - created, 2) if gone else None,
            }
        )
    return out


async def measure(
    kube: Kube,
    gangs: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    watch: Watch,
    sizes: Sizes,
    *,
    wave_starts: list[float],
    wave_created: list[float],
    finished: set[str],
) -> dict[str, Any]:
    items = (await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
    live = {
        p["metadata"]["name"]: p["spec"].get("nodeName")
        for p in items
        if not p["metadata"].get("deletionTimestamp")
    }
    node_rack = node_racks(sizes)
    t_start = wave_starts[0]
    admitted = admitted_pods = running = spans = broken = 0
    high_admitted = 0
    for group, members in gangs:
        names = [p["metadata"]["name"] for p in members]
        placed = [live.get(n) for n in names]
        if names and all(n in finished for n in names):
            admitted += 1  # finished (t_lifetime): it ran whole
            high_admitted += group["spec"].get("priorityClassName") == "bench-high"
        elif all(placed):
            admitted += 1
            running += 1
            admitted_pods += len(names)
            spans += len({node_rack[str(n)] for n in placed})
            high_admitted += group["spec"].get("priorityClassName") == "bench-high"
        elif any(placed) and any(n in watch.gone for n in names):
            broken += 1
    gang_pods = {p["metadata"]["name"] for _, members in gangs for p in members}
    victims = sum(
        1 for n in gang_pods if n in watch.gone and n in watch.bound_at and n not in finished
    )
    free_racks, largest = rack_room(items, sizes)
    binds = sorted(t for n, t in watch.bound_at.items() if n in gang_pods)
    busy = scheduling_seconds(binds, wave_starts, settled=sizes.t_settle_s > 0)
    preempted = sorted(t for n, t in watch.gone_at.items() if n not in finished)
    per_wave = (
        wave_breakdown(binds, preempted, wave_starts, wave_created) if sizes.t_settle_s > 0 else []
    )
    return {
        "gangs_admitted": admitted,
        "high_gangs_admitted": high_admitted,
        "gangs_broken": broken,
        "pods_running": admitted_pods,
        "pods_bound_total": len(binds),
        "pods_per_s": round(len(binds) / max(busy, 1e-9), 1) if binds else 0.0,
        "scheduling_s": round(busy, 2),
        "victims": victims,
        "racks_fully_free": free_racks,
        "largest_placeable_gang": largest,
        "racks_per_admitted_gang": round(spans / running, 3) if running else None,
        "last_bind_s": round(binds[-1] - t_start, 2) if binds else None,
        "per_wave": per_wave,
        # Per wave, its last bind after the API server answered its last create, summed:
        # the scheduling time the creation floor does not hide.
        "over_creation_s": round(
            sum(max(w["last_bind_s"] - w["created_s"], 0.0) for w in per_wave if w["binds"]), 2
        ),
    }
