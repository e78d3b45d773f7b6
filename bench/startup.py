"""gangsched's first bind after exec, precreated, many launches on one cluster (not a test).

A round of `bench.compare --mode precreate` gives one first-bind figure per scheduler for three
minutes of machine time, and on this 2-core machine two rounds of the same commit differ by
0.5 s or more (issue 30: 1.99-2.78 s on (a)): too coarse to tell a start-up change of 0.1-0.3 s
from the noise. Here one cluster holds workload (a) or (b), precreated, and gangsched is started
on it again and again, alternating between the trees given (`--tree`, e.g. a git worktree of a
change and one of its parent), and killed once the bench's watch sees its first bind; the pods
it bound meanwhile are deleted and created again, pending, before the next launch. Each launch
reports the first bind seen after exec and, from gangsched's log, when its caches synced (and
the CPU it had used by then), its first cycle ended and its first bind was answered.

    .venv/bin/python -m bench.startup --workload a --launches 8 --tree /tmp/wt-base --tree .

Figures are medians per tree, with the machine's load; the trees' launches interleave, so a
change of load shifts them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.compare.cluster import Env, loadgen_binary, prepare_cluster, stop_cluster
from bench.compare.latency import gangsched_log
from bench.compare.measure import Watch, load_average, wait_until
from bench.compare.schedulers import prepare_launch
from bench.compare.workloads import NAMESPACE, Sizes, build_workload, create_request
from bench.harness import Cluster, connect, create_nodes
from gangsched.edge.kube import Kube, KubeError

#: gangsched's log line once its caches have synced (gangsched.edge.operator).
SYNCED = "caches synced; scheduling"
#: The longest one launch may take to bind its first pod.
FIRST_BIND_TIMEOUT_S = 60.0
#: Quiet time between a launch's repair and the next exec (the controller manager's and
#: kwok's work on the deleted and recreated pods done).
SETTLE_S = 5.0
#: How long a launch's watch is given to connect before the exec.
WATCH_START_S = 0.5


@dataclass
class Launch:
    tree: Path
    first_bind_s: float | None = None
    synced_s: float | None = None
    first_cycle_s: float | None = None
    #: gangsched's CPU seconds at its sync: start-up's own cost.
    synced_cpu_s: float | None = None
    #: Its first bind answered (its log): without the watch's delivery, which lags when the
    #: API server is busy with the previous launch's repair.
    first_bound_s: float | None = None
    bound_before_kill: int = 0
    load: list[float] = field(default_factory=list)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--workload", choices=("a", "b"), default="a")
    parser.add_argument("--launches", type=int, default=6, help="per tree")
    parser.add_argument(
        "--tree",
        action="append",
        type=Path,
        help="a gangsched checkout to start (repeat to compare; default: this one)",
    )
    parser.add_argument("--json", type=Path, help="write every launch and the medians here")
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy raw profiles of each launch up to its first bind into this directory "
        "(the figures are then py-spy's too: profile and measure in separate runs)",
    )
    return parser.parse_args()


@dataclass
class LogTimes:
    """From gangsched's log, in seconds after exec: its caches synced (and the CPU seconds it
    had used by then), its first cycle ended, its first bind was answered."""

    synced_s: float | None = None
    synced_cpu_s: float | None = None
    first_cycle_s: float | None = None
    first_bound_s: float | None = None


def log_times(log: Path, t_exec: float) -> LogTimes:
    times = LogTimes()
    for entry, at in gangsched_log(log, (SYNCED, "cycle", "bound")):
        event, seconds = entry["event"], round(at - t_exec, 3)
        if event == SYNCED:
            times.synced_s, times.synced_cpu_s = seconds, entry.get("cpu_seconds")
        elif event == "cycle" and times.synced_s is not None and times.first_cycle_s is None:
            times.first_cycle_s = seconds
        elif event == "bound" and times.first_bound_s is None:
            times.first_bound_s = seconds
    return times


async def _repair(kube: Kube, env: Env, pods: dict[str, dict[str, Any]]) -> int:
    """The pods bound by the last launch deleted and created again, pending, and gangsched's
    budgets deleted. Returns how many were bound."""
    namespace = f"/api/v1/namespaces/{NAMESPACE}/pods"
    listed = await kube.get(namespace, fieldSelector="spec.nodeName!=")
    bound = sorted(item["metadata"]["name"] for item in listed.get("items", []))
    budgets_path = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets"
    budgets = await kube.get(budgets_path)
    paths = [f"{namespace}/{name}" for name in bound] + [
        f"{budgets_path}/{item['metadata']['name']}" for item in budgets.get("items", [])
    ]
    for path in paths:
        try:
            await kube.delete(path, {"gracePeriodSeconds": 0})
        except KubeError as exc:
            if not exc.not_found:
                raise
    for name in bound:
        deadline = time.monotonic() + 60.0
        while True:
            try:
                await kube.get(f"{namespace}/{name}")
            except KubeError as exc:
                if exc.not_found:
                    break
                raise
            if time.monotonic() > deadline:
                raise SystemExit(f"bench.startup: pod {name} was not deleted within 60 s")
            await asyncio.sleep(0.05)
    await env.post_all([create_request(pods[name]) for name in bound])
    return len(bound)


def _stop(process: subprocess.Popen[bytes], *, profiling: bool) -> None:
    """Killed at once; under py-spy, interrupted first so that it writes its profile."""
    if profiling:
        os.killpg(process.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _binds_since(watch: Watch, t_exec: float) -> list[float]:
    """Binds the watch saw after exec (it also notes the nodeName of pods being deleted)."""
    return [at for at in watch.bound_at.values() if at >= t_exec]


async def _launch(
    env: Env, tree: Path, run_dir: Path, watch: Watch, profile: Path | None = None
) -> Launch:
    # bench.compare's launch (its kubeconfig, RBAC identity and config), run from `tree`.
    prepared = prepare_launch(env, "gangsched", run_dir)
    log = prepared.log
    result = Launch(tree=tree, load=load_average())
    argv = prepared.argv
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        spy = str(Path(sys.executable).parent / "py-spy")
        out_file = profile / f"{run_dir.name}.txt"
        argv = [spy, "record", "--format", "raw", "--rate", "250", "-o", str(out_file), "--", *argv]
    t_exec = time.time()
    with log.open("wb") as out:
        # Unbuffered: the launch is killed, and its log must hold the lines up to the kill.
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tree,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # py-spy and gangsched stopped together
        )
    try:
        seen = await wait_until(
            lambda: bool(_binds_since(watch, t_exec)), FIRST_BIND_TIMEOUT_S, 0.01
        )
    finally:
        _stop(process, profiling=profile is not None)
    if seen:
        result.first_bind_s = round(min(_binds_since(watch, t_exec)) - t_exec, 3)
    times = log_times(log, t_exec)
    result.synced_s, result.synced_cpu_s = times.synced_s, times.synced_cpu_s
    result.first_cycle_s, result.first_bound_s = times.first_cycle_s, times.first_bound_s
    return result


async def _main(args: argparse.Namespace) -> int:
    trees = [tree.resolve() for tree in (args.tree or [Path.cwd()])]
    for tree in trees:  # as installed: modules compiled (bench.compare does the same)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / "gangsched")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    sizes = Sizes()
    workload = build_workload(args.workload, "gangsched", sizes, seed=1)
    pods = {p["metadata"]["name"]: p for members in workload.gangs.values() for p in members}
    cluster = Cluster.start()
    env = Env.of(cluster, loadgen_binary())
    kube = await connect(cluster)
    launches: list[Launch] = []
    try:
        await prepare_cluster(env, kube)
        await create_nodes(kube, workload.nodes, cpu=workload.node_cpu, memory=workload.node_memory)
        await env.post_all([create_request(g) for g in workload.groups])
        await env.post_all([create_request(p) for p in pods.values()])
        await asyncio.sleep(SETTLE_S)
        for number in range(args.launches):
            for index, tree in enumerate(trees):
                run_dir = cluster.dir / f"launch-{number}-{index}"
                # A watch of its own, from now: one watch for every launch kept each pod's
                # first bind ever, so a later launch was seen binding only pods no earlier
                # launch had bound, later and later (up to every pod, by the eighth launch).
                watch = Watch()
                watch.start(kube)
                await asyncio.sleep(WATCH_START_S)
                try:
                    launch = await _launch(env, tree, run_dir, watch, args.profile)
                finally:
                    await watch.stop()
                launch.bound_before_kill = await _repair(kube, env, pods)
                launches.append(launch)
                print(json.dumps({**launch.__dict__, "tree": str(tree)}), flush=True)
                await asyncio.sleep(SETTLE_S)
    finally:
        await kube.close()
        stop_cluster(cluster)
    summary = summarize(launches, trees)
    for tree, medians in summary.items():
        print(f"{tree}: {medians}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "workload": args.workload,
                    "cpus": os.cpu_count(),
                    "medians": summary,
                    "launches": [{**x.__dict__, "tree": str(x.tree)} for x in launches],
                },
                indent=1,
            )
        )
    return 0


def summarize(launches: list[Launch], trees: list[Path]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for tree in trees:
        mine = [x for x in launches if x.tree == tree]
        medians: dict[str, float | None] = {}
        for key in ("first_bind_s", "first_bound_s", "synced_s", "first_cycle_s", "synced_cpu_s"):
            values = [getattr(x, key) for x in mine if getattr(x, key) is not None]
            medians[key] = round(statistics.median(values), 3) if values else None
        loads = [x.load[0] for x in mine if x.load]
        medians["load_min"] = min(loads, default=None)
        medians["load_max"] = max(loads, default=None)
        out[str(tree)] = medians
    return out


def main() -> int:
    return asyncio.run(_main(_parse()))


if __name__ == "__main__":
    sys.exit(main())
