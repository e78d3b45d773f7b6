"""The command line: rounds over workloads and schedulers, results saved after each run."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import yaml

import bench.compare as package
from bench.compare.cluster import announce_kept, loadgen_binary, stop_cluster
from bench.compare.measure import load_average
from bench.compare.plot import plot
from bench.compare.report import markdown, summarize
from bench.compare.runs import Options, run_ceiling, run_one
from bench.compare.schedulers import PY_SPY
from bench.compare.topology_run import run_topology
from bench.compare.workloads import LIST_FLOOR, SCHEDULERS, SIZES
from bench.harness import (
    HACK,
    ROOT,
)
from bench.provenance import git_commit

RESULTS = ROOT / "bench" / "results"


# ---------------------------------------------------------------------------------- main
async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    sizes = SIZES[args.size]
    for override in args.set or []:
        key, _, value = override.partition("=")
        current = getattr(sizes, key)
        sizes = replace(sizes, **{key: type(current)(value)})
    opts = Options(
        sizes=sizes,
        mode=args.mode,
        timeout=args.timeout,
        profile=args.profile,
        keep=args.keep,
        profile_format=args.profile_format,
        profile_seconds=args.profile_seconds,
        attach=args.attach,
        trace=args.trace,
        rate=args.rate,
        gangsched_config=gangsched_overrides(args.gangsched_config or []),
    )
    loadgen = loadgen_binary()
    workloads = [w for w in args.workloads.split(",") if w]
    schedulers = [s for s in args.schedulers.split(",") if s]
    runs: list[dict[str, Any]] = []
    out = Path(args.json)
    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git": git_commit(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kubernetes": (HACK / "k8s" / "versions.env")
        .read_text()
        .split("K8S_VERSION=")[1]
        .split()[0],
        "sizes": asdict(sizes),
        "mode": args.mode,
        "rate": args.rate,
        "rounds": args.rounds,
        **({"gangsched_config": opts.gangsched_config} if opts.gangsched_config else {}),
    }

    def save() -> dict[str, Any]:
        loads = [r["load_before"][0] for r in runs] + [
            r.get("load_after", [0])[0] for r in runs if "load_after" in r
        ]
        meta.update(
            load_min=min(loads, default=0.0),
            load_max=max(loads, default=0.0),
            load_median=statistics.median(loads) if loads else 0.0,
        )
        summary = summarize(runs)
        document = {"meta": meta, **summary, "runs": runs}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=1) + "\n")
        return document

    if args.ceiling:
        print(f"[compare] ceiling (load {load_average()})", file=sys.stderr)
        runs.append(await run_ceiling(opts, loadgen))
        print(json.dumps(runs[-1]), file=sys.stderr)
        save()
    shared: dict[str, Any] = {}
    try:
        for round_no in range(args.first_round, args.first_round + args.rounds):
            for workload in workloads:
                floor = [LIST_FLOOR] if workload == "d" and args.floor else []
                for scheduler in floor + scheduler_order(schedulers, round_no):
                    print(
                        f"[compare] round {round_no} ({workload}) {scheduler}",
                        f"load {load_average()}",
                        file=sys.stderr,
                    )
                    try:
                        if workload == "t":
                            result = await run_topology(
                                scheduler,
                                round_no,
                                sizes=sizes,
                                timeout=opts.timeout,
                                loadgen=loadgen,
                                keep=opts.keep,
                            )
                        else:
                            result = await run_one(
                                workload,
                                scheduler,
                                round_no,
                                opts=opts,
                                loadgen=loadgen,
                                shared=shared,
                            )
                    except Exception as exc:  # record the failure, go on with the others
                        result = {
                            "workload": workload,
                            "scheduler": scheduler,
                            "round": round_no,
                            "error": repr(exc),
                            "load_before": load_average(),
                        }
                    brief = {
                        k: v for k, v in result.items() if k != "apiserver_request_total_delta"
                    }
                    print(json.dumps(brief), file=sys.stderr)
                    runs.append(result)
                    save()
            await close_shared(shared, opts)  # a fresh (d) cluster every round
    finally:
        await close_shared(shared, opts)
    document = save()
    md = markdown(document, meta)
    Path(args.markdown).write_text(md)
    print(md)
    if args.plot:
        plot(document, runs, Path(args.plot))
    return document


async def close_shared(shared: dict[str, Any], opts: Options) -> None:
    if "d" in shared:
        env, kube = shared.pop("d")
        await kube.close()
        if not opts.keep and opts.attach is None:
            stop_cluster(env.cluster)
        else:
            announce_kept(env.cluster)


def scheduler_order(schedulers: list[str], round_no: int) -> list[str]:
    """The schedulers of round `round_no` (from 1), rotated one place a round: the first
    scheduler of a workload runs right after another workload's last (or the ceiling), and on
    this VM one run's speed follows the minutes around it (bench/README.md), so a fixed order
    would give one scheduler the same neighbours every round. Numbered by the round, not by
    its place in this invocation, so that `--first-round` resumes the pattern."""
    if not schedulers:
        return []
    turn = (round_no - 1) % len(schedulers)
    return schedulers[turn:] + schedulers[:turn]


def gangsched_overrides(settings: list[str]) -> dict[str, Any]:
    """`--gangsched-config gangHealth.protectRunningGangs=false` as nested configuration: a
    dotted field, a YAML value."""
    out: dict[str, Any] = {}
    for setting in settings:
        field, sep, value = setting.partition("=")
        if not sep or not field:
            raise SystemExit(f"--gangsched-config {setting!r}: expected FIELD=VALUE")
        *parents, leaf = field.split(".")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = yaml.safe_load(value)
    return out


def render(args: argparse.Namespace) -> None:
    """Table and plot again from a results file (no runs)."""
    document = json.loads(Path(args.json).read_text())
    md = markdown(document, document["meta"])
    Path(args.markdown).write_text(md)
    print(md)
    if args.plot:
        plot(document, document["runs"], Path(args.plot))


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare", description=(package.__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--first-round",
        type=int,
        default=1,
        help="number of the first round (the round is the trace's seed: 2 resumes at seed 2)",
    )
    parser.add_argument("--workloads", default="a,b,c,d")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--size", choices=sorted(SIZES), default="default")
    parser.add_argument(
        "--set", action="append", metavar="FIELD=VALUE", help="override one size (e.g. a_gangs=500)"
    )
    parser.add_argument(
        "--gangsched-config",
        action="append",
        metavar="FIELD=VALUE",
        help="set one field of gangsched's configuration, dotted, the value in YAML (e.g. "
        "gangHealth.protectRunningGangs=false); recorded in the results' meta",
    )
    parser.add_argument(
        "--mode",
        choices=["streamed", "precreate"],
        default="streamed",
        help="(a)/(b): create gangs while the scheduler runs, or before starting it",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="N",
        help="streamed (a)/(b): create N objects a second, each gang's PodGroup then its pods "
        "(default: every PodGroup, then every pod, as fast as the API server answers)",
    )
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--no-ceiling", dest="ceiling", action="store_false")
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="(d) without its list floor (a bare client listing the same objects first)",
    )
    parser.add_argument(
        "--profile", type=Path, help="py-spy raw profiles of gangsched into this directory"
    )
    parser.add_argument(
        "--profile-seconds",
        type=float,
        metavar="S",
        help="profile only the first S seconds after exec (e.g. up to the last bind, without "
        "the half minute of writes and reviews that follows the binds)",
    )
    parser.add_argument(
        "--profile-format",
        choices=["raw", "flamegraph"],
        default="raw",
        help="py-spy's output: collapsed stacks (.txt) or a flame graph (.svg)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave each run's control plane running (logs, objects); stop it as printed",
    )
    parser.add_argument(
        "--attach",
        type=Path,
        metavar="DIR",
        help="(d) on a cluster kept by an earlier --keep run (same sizes) instead of a new one",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        metavar="DIR",
        help="streamed runs: each pod's create, first-seen and bind times (and gangsched's log)",
    )
    parser.add_argument("--json", default=str(RESULTS / "compare.json"))
    parser.add_argument("--markdown", default=str(RESULTS / "compare.md"))
    parser.add_argument("--plot", default=str(RESULTS / "compare.png"))
    parser.add_argument(
        "--render", action="store_true", help="only redo --markdown/--plot from --json"
    )
    args = parser.parse_args()
    if args.render:
        render(args)
        return
    if args.profile and not PY_SPY.exists():
        parser.error("--profile needs py-spy beside this Python: pip install -e '.[bench]'")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
