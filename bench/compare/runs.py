"""One measured run of one workload under one scheduler, and the ceiling (a bare binder
that shows what the API server allows at all)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.compare.cluster import Env, announce_kept, prepare_cluster, stop_cluster
from bench.compare.latency import stages
from bench.compare.measure import (
    ApiCounts,
    MachineCpu,
    Watch,
    daemon_cpu_seconds,
    load_average,
    podgroup_phases,
    wait_running,
    wait_until,
)
from bench.compare.schedulers import (
    CO_PODGROUP_API,
    Launch,
    PySpy,
    Running,
    client_requests,
    prepare_launch,
    queued_pods,
    start,
    wait_ready,
)
from bench.compare.workloads import (
    LIST_FLOOR,
    NAMESPACE,
    Sizes,
    bench_node,
    bound_pods,
    build_workload,
    create_request,
    deadlock_capacity,
    pod,
)
from bench.harness import (
    Cluster,
    connect,
    create_nodes,
    percentile,
)
from gangsched.edge.kube import Kube

# ----------------------------------------------------------------------------------- runs
#: The longest a run waits, after its last bind, for every bound pod to run (and again for the
#: scheduler's writes to stop) before it reads the control plane's counters.
SETTLE_TIMEOUT_S = 30.0
#: How long the cluster at rest is sampled before each run (its CPU rate, ApiCounts.idle_rate).
IDLE_SAMPLE_S = 10.0


@dataclass
class Options:
    sizes: Sizes
    mode: str
    timeout: float
    profile: Path | None
    keep: bool = False
    profile_format: str = "raw"
    #: Profile only this long after exec (None: the whole run).
    profile_seconds: float | None = None
    #: A kept (d) cluster (--keep) to run on again instead of creating 50,000 pods anew.
    attach: Path | None = None
    #: Where each streamed run's per-pod times go (created, seen, bound), for a closer look.
    trace: Path | None = None
    #: Streamed (a)/(b): objects created per second, each PodGroup just before its members
    #: (0: all PodGroups, then all pods, as fast as the API server answers).
    rate: float = 0.0
    #: Merged into gangsched's configuration (--gangsched-config).
    gangsched_config: dict[str, Any] = field(default_factory=dict)


async def run_one(
    workload: str,
    scheduler: str,
    round_no: int,
    *,
    opts: Options,
    loadgen: Path,
    shared: dict[str, Any],
) -> dict[str, Any]:
    """One workload, one scheduler, on a fresh cluster (d: on the round's shared cluster)."""
    sizes = opts.sizes
    w = build_workload(workload, scheduler, sizes, seed=round_no)
    reuse = workload == "d"
    if reuse and "d" in shared:
        env, kube = shared["d"]
    elif reuse and opts.attach is not None:
        env, kube = await attach_d_cluster(opts.attach, loadgen, sizes)
        shared["d"] = (env, kube)
    else:
        cluster = Cluster.start()
        env = Env.of(cluster, loadgen)
        kube = await connect(cluster)
        await prepare_cluster(env, kube)
        await create_nodes(kube, w.nodes, cpu=w.node_cpu, memory=w.node_memory)
        if reuse:
            await env.post_all([create_request(p) for p in bound_pods(sizes)])
            await wait_running(kube)
            shared["d"] = (env, kube)
    if scheduler == LIST_FLOOR:
        return await run_list_floor(env, round_no)
    run_dir = env.cluster.dir / f"run-{workload}-{scheduler}-{round_no}"
    watch = Watch()
    running: Running | None = None
    spy: PySpy | None = None
    result: dict[str, Any] = {
        "workload": workload,
        "scheduler": scheduler,
        "round": round_no,
        "nodes": w.nodes,
        "gangs": len(w.gangs),
        "pods": sum(len(m) for m in w.gangs.values()),
        "load_before": load_average(),
    }
    try:
        if w.setup:  # (c): the low-priority pods, bound, and their All-mode groups
            await env.post_all([create_request(o) for o in w.setup])
            await wait_running(kube)
        launch = prepare_launch(env, scheduler, run_dir, gangsched_config=opts.gangsched_config)
        members_in_order = [p for members in w.gangs.values() for p in members]
        if workload == "x":
            # Members arrive interleaved (the first of every gang, then the second, ...), as
            # when many controllers create their gangs at once: the order that makes
            # member-by-member reservation hold part of many gangs.
            members_in_order = [
                p
                for i in range(max(len(m) for m in w.gangs.values()))
                for m in w.gangs.values()
                for p in m[i : i + 1]
            ]
        precreate = workload == "d" or (opts.mode == "precreate" and workload in "ab")
        result["mode"] = "precreate" if precreate else "streamed"
        paced = not precreate and opts.rate > 0 and workload in "ab"
        if paced:
            # Gang after gang, as controllers create them, at a rate the API server keeps up
            # with: the latency measured is then the scheduler's, not the API server's queue.
            gang_requests = [
                create_request(o)
                for group, members in zip(w.groups, w.gangs.values(), strict=True)
                for o in (group, *members)
            ]
            result["rate"] = opts.rate
        else:
            gang_requests = [create_request(g) for g in w.groups] + [
                create_request(p) for p in members_in_order
            ]
        # The cluster at rest, its nodes there and the run's objects not created yet: its CPU
        # rate is subtracted from the run's (ApiCounts.cost_since, the *_net figures). Sampled
        # after the creation, it also held the creation's aftermath (0.29-0.51 cores).
        at_rest = await asyncio.to_thread(ApiCounts.read, env)
        await asyncio.sleep(IDLE_SAMPLE_S)
        idle = (await asyncio.to_thread(ApiCounts.read, env)).idle_rate(at_rest)
        watch.start(kube)
        await asyncio.sleep(0.3)
        created: dict[str, float] = {}
        if precreate:
            created = await env.post_all(gang_requests)
            await asyncio.sleep(1.0)
        before = await asyncio.to_thread(ApiCounts.read, env)
        cpu_before = controller_cpu_before = 0.0
        machine_before, daemons_before = MachineCpu.read(), daemon_cpu_seconds(env)
        t_start = time.time()
        running = start(launch)
        if opts.profile is not None and launch.kind == "gangsched":
            opts.profile.mkdir(parents=True, exist_ok=True)
            suffix = "svg" if opts.profile_format == "flamegraph" else "txt"
            spy = PySpy(
                running.process.pid,
                opts.profile / f"{workload}-{scheduler}-{round_no}.{suffix}",
                opts.profile_format,
                seconds=opts.profile_seconds,
            )
        ready_at = await wait_ready(running, launch, timeout=max(180.0, opts.timeout))
        result["ready_s"] = round(ready_at - t_start, 3)
        if not precreate:
            await asyncio.sleep(2.0)  # informers synced on both sides before the burst
            cpu_before = running.cpu_seconds()
            controller_cpu_before = running.controller_cpu_seconds()
            machine_before, daemons_before = MachineCpu.read(), daemon_cpu_seconds(env)
            t_start = time.time()
            created = await env.post_all(gang_requests, rate=opts.rate if paced else 0.0)
        result["create_s"] = round(
            max(created.values(), default=t_start) - min(created.values(), default=t_start), 3
        )
        names = [p["metadata"]["name"] for members in w.gangs.values() for p in members]
        if workload == "x":
            # Never all: done once the gangs the room holds are bound whole, or the window ends.
            capacity = deadlock_capacity(sizes)
            result["gangs_room"] = capacity
            sampler = asyncio.create_task(in_flight_peak(launch, names, watch))
            done = await wait_until(
                lambda: complete_gangs(w.gangs, watch.bound_at) >= capacity, sizes.x_window_s, 0.1
            )
            await asyncio.sleep(2.0)
            sampler.cancel()
            peak = await asyncio.gather(sampler, return_exceptions=True)
            if isinstance(peak[0], int):
                result["pods_in_flight_peak"] = peak[0]
        else:
            done = await wait_until(
                lambda: all(n in watch.bound_at for n in names), opts.timeout, 0.1
            )
        machine_after = MachineCpu.read()
        if machine_before is not None and machine_after is not None:
            # From the scheduler's start (precreated) or the burst (streamed) to the last bind:
            # the whole machine, and the cores each process took of it.
            elapsed = max(machine_after.at - machine_before.at, 1e-9)
            used = {
                name: now - daemons_before[name] for name, now in daemon_cpu_seconds(env).items()
            }
            used["scheduler"] = running.cpu_seconds() - cpu_before
            used["controller"] = running.controller_cpu_seconds() - controller_cpu_before
            cores = {name: round(seconds / elapsed, 2) for name, seconds in used.items()}
            result["machine"] = {**machine_after.since(machine_before), "cores": cores}
        if workload == "c":  # victims still being deleted are counted too
            await asyncio.sleep(1.0)
        # Gangs left with some but not all members bound (what gang scheduling must avoid),
        # and pods a kube-scheduler holds in flight (reserved in Permit, not bound).
        result["gangs_partly_bound"] = sum(
            1
            for members in w.gangs.values()
            if 0 < sum(1 for p in members if p["metadata"]["name"] in watch.bound_at) < len(members)
        )
        queued = await asyncio.to_thread(queued_pods, launch)
        if queued is not None:
            unbound = sum(1 for n in names if n not in watch.bound_at and n not in watch.gone)
            result["pods_in_flight"] = max(unbound - queued, 0)
        # The control plane's cost is read once every bound pod runs (kwok's status write
        # done), not at the last bind: the same work on the cluster for every scheduler,
        # where a window ending at the last bind held more of those writes for a faster one.
        bound_names = [n for n in names if n in watch.bound_at and n not in watch.gone]
        await wait_until(
            lambda: all(n in watch.running_at for n in bound_names), SETTLE_TIMEOUT_S, 0.1
        )
        # ...and once the scheduler's own writes have stopped: what it defers behind its
        # binds (events, budgets, status) is its cost too.
        await writes_settled(launch)
        result["settled_s"] = round(time.time() - t_start, 3)
        after = await asyncio.to_thread(ApiCounts.read, env)
        result["client_requests"] = await asyncio.to_thread(client_requests, launch)
        result["rss_peak_mib"] = round(running.rss_peak_mib(), 1)
        result["cpu_s"] = round(running.cpu_seconds() - cpu_before, 2)
        result["cpu_s_total"] = round(running.cpu_seconds(), 2)
        if launch.controller is not None:  # Coscheduling as installed: its requests are counted
            result["controller"] = launch.controller.kind
            controller_cpu = running.controller_cpu_seconds()
            result["controller_cpu_s"] = round(controller_cpu - controller_cpu_before, 2)
            # How far its PodGroups' status got by the time the counters were read.
            result["podgroup_phases"] = await podgroup_phases(kube, CO_PODGROUP_API)
        binds = sorted(watch.bound_at[n] for n in names if n in watch.bound_at)
        bound = len(binds)
        result["complete"] = done
        result["pods_bound"] = bound
        if binds:
            result["first_bind_s"] = round(binds[0] - t_start, 3)
            result["last_bind_s"] = round(binds[-1] - t_start, 3)
            result["pods_per_s"] = round(bound / max(binds[-1] - t_start, 1e-9), 1)
            result["pods_per_s_binding"] = (
                round((bound - 1) / max(binds[-1] - binds[0], 1e-9), 1) if bound > 1 else 0.0
            )
        latencies = []
        for group, members in w.gangs.items():
            if not all(p["metadata"]["name"] in watch.bound_at for p in members):
                continue
            if precreate:
                last_created = t_start
            else:
                keys = [f"PodGroup/{group}"] + [f"Pod/{p['metadata']['name']}" for p in members]
                last_created = max(created[k] for k in keys)
            latencies.append(
                max(watch.bound_at[p["metadata"]["name"]] for p in members) - last_created
            )
        result["gangs_complete"] = len(latencies)
        result["latency_p50_s"] = round(percentile(latencies, 0.5), 3)
        result["latency_p99_s"] = round(percentile(latencies, 0.99), 3)
        result["latency_max_s"] = round(max(latencies, default=0.0), 3)
        if not precreate:
            gang_names = {g: [p["metadata"]["name"] for p in m] for g, m in w.gangs.items()}
            log = launch.log if launch.kind == "gangsched" else None
            spans = stages(gang_names, created, watch.seen_at, watch.bound_at, log)
            result.update({f"stage_{k}": v for k, v in spans.items()})
            if opts.trace is not None:
                opts.trace.mkdir(parents=True, exist_ok=True)
                times = {"created": created, "seen": watch.seen_at, "bound": watch.bound_at}
                trace = opts.trace / f"{workload}-{scheduler}-{round_no}.json"
                trace.write_text(json.dumps({**times, "gangs": gang_names}))
                if log is not None:
                    shutil.copy(log, trace.with_suffix(".log"))
        scheduler_requests, all_requests = after.since(before)
        result["api_requests"] = scheduler_requests
        result["api_requests_per_pod"] = round(scheduler_requests / max(bound, 1), 3)
        result["apiserver_request_total_delta"] = all_requests
        result.update(after.cost_since(before, pods=bound, idle=idle))
        for verb, count in result["client_requests"].items():  # since exec, by its own count
            result[f"requests_per_pod_{verb}"] = round(count / max(bound, 1), 3)
        if workload == "c":
            low = [o["metadata"]["name"] for o in w.setup if o["kind"] == "Pod"]
            result["low_pods"] = len(low)
            result["victims"] = sum(1 for n in low if n in watch.gone)
        if workload == "e":
            result.update(await claim_outcome(kube))
        result["load_after"] = load_average()
        return result
    finally:
        if spy is not None:
            spy.stop()
        if running is not None:
            running.stop()
        await watch.stop()
        if reuse:
            await cleanup_gangs(kube)
        else:
            await kube.close()
            if not opts.keep:
                stop_cluster(env.cluster)
            else:
                announce_kept(env.cluster)


async def writes_settled(launch: Launch, quiet_s: float = 2.0) -> None:
    """Until the scheduler's POST, PATCH and DELETE counts have not moved for `quiet_s`
    (lease renewals, PUTs, never stop), at most SETTLE_TIMEOUT_S."""

    def writes() -> float:
        counts = client_requests(launch)
        return sum(counts.get(verb, 0.0) for verb in ("POST", "PATCH", "DELETE"))

    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last = await asyncio.to_thread(writes)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_s:
        await asyncio.sleep(0.5)
        now = await asyncio.to_thread(writes)
        if now != last:
            last, quiet_since = now, time.monotonic()


async def in_flight_peak(launch: Launch, names: list[str], watch: Watch) -> int:
    """(x), a kube-scheduler: the most gang pods it held in flight (reserved in its cache, in
    Permit or binding, not yet bound) at any of its samples, every 0.5 s until cancelled,
    when the peak is returned; -1 for gangsched, which reserves nothing before its binds."""
    peak = -1
    try:
        while True:
            queued = await asyncio.to_thread(queued_pods, launch)
            if queued is None:
                return -1
            unbound = sum(1 for n in names if n not in watch.bound_at and n not in watch.gone)
            peak = max(peak, int(unbound - queued))
            await asyncio.sleep(0.5)
    except asyncio.CancelledError:
        return peak


def complete_gangs(gangs: dict[str, list[dict[str, Any]]], bound_at: dict[str, float]) -> int:
    return sum(
        1 for members in gangs.values() if all(p["metadata"]["name"] in bound_at for p in members)
    )


async def attach_d_cluster(directory: Path, loadgen: Path, sizes: Sizes) -> tuple[Env, Kube]:
    """A (d) cluster kept by an earlier run (`--keep`): creating 50,000 bound pods and waiting
    for kwok to run them takes over half an hour on this machine, the runs on it a minute.
    Refused unless it holds exactly the nodes and bound pods the sizes ask for."""
    cluster = Cluster.start(workdir=directory)  # cluster-up.sh leaves a healthy cluster alone
    env = Env.of(cluster, loadgen)
    kube = await connect(cluster)
    await cleanup_gangs(kube)  # an interrupted run may have left its gangs
    counts = {}
    for path in ("/api/v1/nodes", f"/api/v1/namespaces/{NAMESPACE}/pods"):
        page = await kube.get(path, limit=1)
        meta = page.get("metadata") or {}
        counts[path] = len(page.get("items") or []) + int(meta.get("remainingItemCount") or 0)
    want = {"/api/v1/nodes": sizes.d_nodes, f"/api/v1/namespaces/{NAMESPACE}/pods": sizes.d_bound}
    if counts != want:
        await kube.close()
        raise RuntimeError(f"--attach {directory}: holds {counts}, (d) needs {want}")
    return env, kube


#: What gangsched lists before its first decision on the bench cluster (every kind it
#: watches that the cluster serves; most are empty but for pods, nodes and namespaces).
FLOOR_PATHS = (
    "/api/v1/pods",
    "/api/v1/nodes",
    "/api/v1/namespaces",
    "/apis/scheduling.k8s.io/v1/priorityclasses",
    "/apis/policy/v1/poddisruptionbudgets",
    "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups",
    "/apis/scheduling.k8s.io/v1beta1/podgroups",
    "/api/v1/persistentvolumes",
    "/api/v1/persistentvolumeclaims",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/resourceclaims",
    "/apis/resource.k8s.io/v1/deviceclasses",
)


async def run_list_floor(env: Env, round_no: int) -> dict[str, Any]:
    """(d)'s floor: a bare Go client (bench/loadgen -list) listing what gangsched lists, all
    kinds at once, pages of 500, no compression, items split but not decoded: exec to the
    last page. No scheduler can bind before it has these objects."""
    result: dict[str, Any] = {
        "workload": "d",
        "scheduler": LIST_FLOOR,
        "round": round_no,
        "load_before": load_average(),
    }
    proc = await asyncio.create_subprocess_exec(
        str(env.loadgen),
        "-server",
        env.server,
        "-token",
        env.token,
        "-ca",
        str(env.ca),
        "-list",
        ",".join(FLOOR_PATHS),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"loadgen -list failed: {err.decode()[-2000:]}")
    listed = {}
    for line in out.decode().splitlines():
        path, objects, size, seconds = line.split("\t")
        listed[path] = {"objects": int(objects), "bytes": int(size), "seconds": float(seconds)}
    result["listed"] = listed
    result["first_bind_s"] = listed["total"]["seconds"]
    result["load_after"] = load_average()
    return result


async def claim_outcome(kube: Kube) -> dict[str, Any]:
    """(e): how many claims each scheduler allocated and reserved, and whether any device went
    to two claims (the claims, not the pods' phase, say whether DRA was done: kwok runs pods
    whatever their claims)."""
    claims = (await kube.get(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"))[
        "items"
    ]
    devices: list[tuple[str, str, str]] = []
    allocated = reserved = 0
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        if results:
            allocated += 1
        if status.get("reservedFor"):
            reserved += 1
        devices += [(r["driver"], r["pool"], r["device"]) for r in results]
    return {
        "claims": len(claims),
        "claims_allocated": allocated,
        "claims_reserved": reserved,
        "devices_allocated": len(devices),
        "devices_given_twice": len(devices) - len(set(devices)),
    }


async def cleanup_gangs(kube: Kube) -> None:
    """(d) between runs: drop the gangs (pods force-deleted) so the next run starts alike."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    await kube.request(
        "DELETE",
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        query={"labelSelector": "bench=gang"},
        body=body,
        timeout=300,  # a deletecollection among 50,000 pods outlasts the default 30 s
    )
    for api in (
        "scheduling.sigs.k8s.io/v1alpha1",
        "scheduling.k8s.io/v1beta1",
        "scheduling.x-k8s.io/v1alpha1",
    ):
        await kube.request("DELETE", f"/apis/{api}/namespaces/{NAMESPACE}/podgroups", body=body)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        left = await kube.get(
            f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector="bench=gang", limit=1
        )
        if not left.get("items"):
            return
        await asyncio.sleep(0.5)


async def python_binds(kube: Kube, binds: list[dict[str, Any]], concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def bind(b: dict[str, Any]) -> None:
        async with slots:
            await kube.post(b["path"], b["body"])

    await asyncio.gather(*(bind(b) for b in binds))


async def run_ceiling(opts: Options, loadgen: Path) -> dict[str, Any]:
    """A bare client binding pending pods to nodes as fast as the API server takes it: no
    scheduling, no cache, just pods/binding (the most any scheduler could do here)."""
    sizes = opts.sizes
    cluster = Cluster.start()
    env = Env.of(cluster, loadgen)
    kube = await connect(cluster)
    watch = Watch()
    try:
        await prepare_cluster(env, kube)
        await create_nodes(kube, sizes.a_nodes, cpu="32", memory="256Gi")
        result: dict[str, Any] = {
            "workload": "ceiling",
            "scheduler": "bare-binder",
            "pods": sizes.ceiling_pods,
            "load_before": load_average(),
        }
        for client, concurrency in (("go", 64), ("go", 256), ("python", 64)):
            pods = [
                pod("none", f"free-{client}{concurrency}-{i:05d}", role="free")
                for i in range(sizes.ceiling_pods)
            ]
            for p in pods:
                p["spec"]["schedulerName"] = "nobody"
            await env.post_all([create_request(p) for p in pods])
            await asyncio.sleep(1.0)
            names = [p["metadata"]["name"] for p in pods]
            binds = [
                {
                    "key": name,
                    "path": f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding",
                    "body": {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"kind": "Node", "name": bench_node(i % sizes.a_nodes)},
                    },
                }
                for i, name in enumerate(names)
            ]
            watch = Watch()
            watch.start(kube)
            await asyncio.sleep(0.3)
            started = time.time()
            if client == "go":
                await env.post_all(binds, concurrency=concurrency)
            else:
                await python_binds(kube, binds, concurrency)
            acked = time.time()
            bound_at = watch.bound_at
            await wait_until(lambda: all(n in bound_at for n in names), opts.timeout)  # noqa: B023
            await watch.stop()
            last = max(watch.bound_at.get(n, acked) for n in names)
            result[f"{client}{concurrency}_pods_per_s"] = round(
                len(names) / max(last - started, 1e-9), 1
            )
        result["pods_per_s"] = max(v for k, v in result.items() if k.endswith("_pods_per_s"))
        result["load_after"] = load_average()
        return result
    finally:
        await watch.stop()
        await kube.close()
        stop_cluster(cluster)
