"""Warm failover at (d)'s size (issue 17): two gangsched replicas with leader election on a
kept (d) cluster, both synced; the leader is killed with SIGKILL (it cannot release the
lease) and a gang is created at once. The goal: the follower, whose caches are full, binds
within the lease's expiry + 1 s.

Expiry is the lease's last renewTime (written by the leader, same machine clock) plus its
leaseDurationSeconds, read from the Lease after the kill. A follower cannot lead before the
lease expires (client-go's rule, which gangsched keeps: edge/leader.py), so "bind - expiry"
is what a warm follower adds: noticing expiry, acquiring, and one gang cycle and bind.

    python -m bench.compare.failover --attach DIR [--set d_nodes=5000 --set d_bound=50000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.compare.cluster import Env, loadgen_binary
from bench.compare.measure import Watch, load_average, wait_until
from bench.compare.runs import attach_d_cluster, cleanup_gangs
from bench.compare.schedulers import sa_token, write_kubeconfig
from bench.compare.workloads import SIZES, build_workload, create_request
from bench.harness import SchedulerProcess
from devtools import gangsched as gangsched_process
from devtools.processes import wait_ready_async
from gangsched.edge.kube import Kube

LEASE = "/apis/coordination.k8s.io/v1/namespaces/gangsched-system/leases/gangsched"


def replica(env: Env, run_dir: Path, identity: str) -> tuple[SchedulerProcess, str]:
    """One gangsched replica with leader election on (the shipped timings: lease 15 s,
    renew deadline 10 s, retry 2 s); returns it and its readiness URL."""
    kubeconfig = run_dir / f"{identity}.kubeconfig"
    write_kubeconfig(env, kubeconfig, sa_token(env, "gangsched-system", "gangsched"), "gangsched")
    # 64, not bench.compare's 256: this measures the takeover (how long binds stop), and its
    # recorded figures (bench/results) were taken with 64; more binds in flight would change
    # the throughput either side of the gap, not the gap.
    settings = gangsched_process.listen_config(bindConcurrency=64, leaderElection={"enabled": True})
    log = run_dir / f"{identity}.log"
    process = gangsched_process.start(
        kubeconfig=kubeconfig,
        config=settings,
        config_path=run_dir / f"{identity}.yaml",
        log=log,
        identity=identity,
    )
    url = gangsched_process.metrics_url(settings)
    return SchedulerProcess(process, url, log), f"{url}/readyz"


def lease_expiry(lease: dict[str, Any]) -> tuple[str, float]:
    """(holder, the wall-clock second its lease expires)."""
    spec = lease.get("spec") or {}
    renewed = datetime.fromisoformat(str(spec["renewTime"]).replace("Z", "+00:00"))
    return str(spec.get("holderIdentity", "")), renewed.timestamp() + float(
        spec["leaseDurationSeconds"]
    )


def led_at(log: Path) -> float | None:
    """When the replica's log says it took the lead."""
    for line in log.read_text(errors="replace").splitlines():
        if '"leadership"' in line and '"leading": true' in line:
            stamp = json.loads(line)["timestamp"]
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return None


async def failover(env: Env, kube: Kube, sizes: Any, round_no: int) -> dict[str, Any]:
    run_dir = env.cluster.dir / f"failover-{round_no}"
    run_dir.mkdir(parents=True, exist_ok=True)
    w = build_workload("d", "gangsched", sizes, seed=round_no)
    group = w.groups[0]
    name = group["metadata"]["name"]
    members = w.gangs[name]
    result: dict[str, Any] = {"round": round_no, "load_before": load_average()}
    replicas: dict[str, tuple[SchedulerProcess, str]] = {}
    watch = Watch()
    try:
        for identity in ("replica-a", "replica-b"):
            replicas[identity] = replica(env, run_dir, identity)
        started = time.time()
        for identity, (process, ready) in replicas.items():
            if not await wait_ready_async(ready, alive=process.alive, timeout=600):
                raise TimeoutError(f"{identity} not ready")
            result[f"{identity}_ready_s"] = round(time.time() - started, 3)
        await asyncio.sleep(5.0)  # both warm: synced and watching
        holder, _ = lease_expiry(await kube.get(LEASE))
        follower = next(i for i in replicas if i != holder)
        watch.start(kube)
        await asyncio.sleep(0.5)
        replicas[holder][0].process.send_signal(signal.SIGKILL)
        killed = time.time()
        await env.post_all([create_request(group)] + [create_request(p) for p in members])
        created = time.time()
        _, expiry = lease_expiry(await kube.get(LEASE))  # its last renewal, before the kill
        names = [p["metadata"]["name"] for p in members]
        done = await wait_until(lambda: all(n in watch.bound_at for n in names), 120, 0.05)
        follower_process, _ = replicas[follower]
        led = led_at(follower_process.log)
        result.update(
            killed_leader=holder,
            complete=done,
            lease_expiry_after_kill_s=round(expiry - killed, 3),
            gang_created_after_kill_s=round(created - killed, 3),
            follower_led_after_expiry_s=round(led - expiry, 3) if led else None,
            rss_peak_mib_follower=round(follower_process.rss_peak_mib(), 1),
        )
        if done:
            first, last = (
                min(watch.bound_at[n] for n in names),
                max(watch.bound_at[n] for n in names),
            )
            result.update(
                first_bind_after_expiry_s=round(first - expiry, 3),
                last_bind_after_expiry_s=round(last - expiry, 3),
                last_bind_after_kill_s=round(last - killed, 3),
                met=last - expiry <= 1.0,
            )
        result["load_after"] = load_average()
        return result
    finally:
        await watch.stop()
        for process, _ in replicas.values():
            process.stop()
        await cleanup_gangs(kube)
        with contextlib.suppress(Exception):  # the next round starts without a holder
            await kube.request("DELETE", LEASE)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    sizes = SIZES["default"]
    for override in args.set or []:
        key, _, value = override.partition("=")
        sizes = replace(sizes, **{key: type(getattr(sizes, key))(value)})
    env, kube = await attach_d_cluster(args.attach, loadgen_binary(), sizes)
    results = []
    try:
        for round_no in range(1, args.rounds + 1):
            results.append(await failover(env, kube, sizes, round_no))
            print(json.dumps(results[-1]), flush=True)
            document = {"attach": str(args.attach), "set": args.set or [], "runs": results}
            Path(args.json).write_text(json.dumps(document, indent=1) + "\n")
    finally:
        await kube.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare.failover")
    parser.add_argument("--attach", type=Path, required=True, help="a kept (d) cluster")
    parser.add_argument("--set", action="append", metavar="FIELD=VALUE")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", default="failover.json")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
