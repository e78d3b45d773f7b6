"""Regression check: the core benchmarks at a reduced size against a recorded baseline.

    python -m bench.check                  # `make bench-check`: exit 1 on a regression
    python -m bench.check --record         # measure and write bench/results/bench-check.json
    python -m bench.check --benches core,dra --tolerance 2

Runs the workloads of bench/core_bench.py, preemption_bench.py, topology_bench.py,
dra_bench.py and volumes_bench.py at the sizes in SIZES, each bench in a fresh subprocess,
each workload ``--repeats`` times on a freshly built cluster. A time is the CPU time of this
process (``time.process_time``) over the measured cycles or decisions, not wall time: the
cycle is synchronous and single-threaded, and CPU time is far less sensitive to the other
work on a shared machine. Each time is the median of the repeats.

Compared with the baseline (recorded on this machine by ``--record``, with its date, commit
and load average): a time more than ``--tolerance`` times (default 3) its baseline is a
regression; a correctness-bearing figure (gangs scheduled, victims, devices allocated...)
must equal its baseline exactly; a metric of the baseline that is not measured, or one
measured that the baseline lacks, fails too (re-record after changing what is measured).
Prints baseline / now / ratio of every metric, then names each failure.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from bench import core_bench, dra_bench, preemption_bench, topology_bench, volumes_bench
from bench.provenance import git_commit
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, AllocateClaim, BindVolume, SelectNode
from gangsched.core.model import GroupRef
from gangsched.core.preemption import KEP, MINCOST
from gangsched.core.scheduler import CycleReport, Scheduler
from gangsched.simulate.volumes import carry_out

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "bench" / "results" / "bench-check.json"
BENCHES = ("core", "preemption", "topology", "dra", "volumes")
DEFAULT_TOLERANCE = 3.0
DEFAULT_REPEATS = 5
#: A time's ratio is taken over at least this many milliseconds, so that a metric of a few
#: milliseconds cannot fail on the noise of one.
FLOOR_MS = 5.0

#: The reduced sizes (the benches' defaults are 5-10x larger).
SIZES: dict[str, dict[str, int]] = {
    "core": {"nodes": 2000, "small": 600, "large": 30, "constrained": 4},
    "preemption": {"nodes": 2000, "random": 200},
    "topology": {"nodes": 2000, "racks": 100, "gangs": 40},
    "dra": {"nodes": 1000, "pods": 64, "gangs": 6},
    "volumes": {"nodes": 2000, "gangs": 6},
}

Exact = int | float | str | bool | None
T = TypeVar("T")


@dataclass
class Measured:
    """One bench's figures: CPU milliseconds (compared within the tolerance) and exact
    values (compared for equality)."""

    times: dict[str, float]
    exact: dict[str, Exact]


# --------------------------------------------------------------------------- measuring
def cycles(
    state: ClusterState, after: Callable[[CycleReport], None] | None = None
) -> list[tuple[CycleReport, float]]:
    """Every gang cycle until the queue is empty, with its CPU seconds (``after`` runs
    outside the measured time: e.g. carrying out volume decisions)."""
    scheduler = Scheduler(state)
    scheduler.enqueue_pending(0.0)
    out: list[tuple[CycleReport, float]] = []
    while True:
        started = time.process_time()
        report = scheduler.step(0.0)
        cpu = time.process_time() - started
        if report is None:
            return out
        out.append((report, cpu))
        if after is not None:
            after(report)


def frozen(build: Callable[[], T]) -> T:
    """The built cluster moved out of the collector's reach, as `gangsched run` does once
    synced: no cycle pays a full collection over the cache."""
    gc.unfreeze()
    gc.collect()
    state = build()
    gc.freeze()
    return state


def repeated(measure: Callable[[], Measured], repeats: int) -> Measured:
    """Each time the median over ``repeats`` runs; exact values the same in every run."""
    runs = [measure() for _ in range(repeats)]
    for run in runs[1:]:
        if run.exact != runs[0].exact:
            changed = sorted(k for k in run.exact if run.exact[k] != runs[0].exact.get(k))
            raise SystemExit(f"exact figures differ between repeats: {', '.join(changed)}")
    times = {k: round(statistics.median(r.times[k] for r in runs), 2) for k in runs[0].times}
    return Measured(times, runs[0].exact)


def ms(seconds: Iterable[float]) -> float:
    return sum(seconds) * 1000


def core(size: dict[str, int]) -> Measured:
    state = frozen(
        lambda: core_bench.build(size["nodes"], size["small"], size["large"], size["constrained"])[
            0
        ]
    )
    by_kind: dict[str, list[tuple[CycleReport, float]]] = {}
    for report, cpu in cycles(state):
        by_kind.setdefault(report.gang.name.rsplit("-", 1)[0], []).append((report, cpu))
    times: dict[str, float] = {}
    exact: dict[str, Exact] = {}
    for kind, runs in sorted(by_kind.items()):
        times[f"core.{kind}.cpu_ms"] = ms(cpu for _, cpu in runs)
        exact[f"core.{kind}.scheduled"] = sum(r.result == SCHEDULED for r, _ in runs)
        exact[f"core.{kind}.pods_bound"] = sum(len(r.bound) for r, _ in runs)
    return Measured(times, exact)


def preemption(size: dict[str, int]) -> Measured:
    shapes: dict[str, Callable[[], tuple[ClusterState, GroupRef]]] = {
        "a": preemption_bench.shape_a,
        "b": partial(preemption_bench.shape_b, size["nodes"]),
        "d": partial(preemption_bench.shape_d, size["nodes"]),
        "e": preemption_bench.shape_e,
    }
    times: dict[str, float] = {}
    exact: dict[str, Exact] = {}
    for name, build in shapes.items():
        state, key = frozen(build)
        for strategy in (KEP, MINCOST):
            run = preemption_bench.run_once(state, key, strategy)
            prefix = f"preemption.{name}.{strategy}"
            times[f"{prefix}.decision_cpu_ms"] = run.decision_cpu_ms
            outcome = run.outcome
            exact[f"{prefix}.started"] = outcome.started
            exact[f"{prefix}.victims"] = len(outcome.victims)
            exact[f"{prefix}.victim_groups"] = len({p.group for p in outcome.victims if p.group})
            exact[f"{prefix}.nominated"] = preemption_bench._nominated(outcome)
    gc.unfreeze()
    started = time.process_time()
    rnd = preemption_bench.bench_random(size["random"])
    times["preemption.c.random_cpu_ms"] = (time.process_time() - started) * 1000
    for figure in ("preempted", "mincost_strictly_cheaper", "mincost_costlier"):
        exact[f"preemption.c.{figure}"] = rnd[figure]  # type: ignore[assignment]
    for figure in ("mean_victims", "mean_groups_disrupted", "mean_pdb_violations"):
        values = rnd[figure]
        assert isinstance(values, dict)
        for strategy in (KEP, MINCOST):
            exact[f"preemption.c.{strategy}.{figure}"] = values[strategy]
    return Measured(times, exact)


def topology(size: dict[str, int]) -> Measured:
    times: dict[str, float] = {}
    exact: dict[str, Exact] = {}
    for label, constrained in (("rack", True), ("unconstrained", False)):
        state = frozen(
            partial(
                topology_bench.build,
                size["nodes"],
                size["racks"],
                size["gangs"],
                constrained=constrained,
            )
        )
        runs = cycles(state)
        one_rack = 0
        for report, _ in runs:
            if report.result == SCHEDULED:
                racks = {
                    state.snapshot.nodes[state.snapshot.index[b.node]].labels[topology_bench.RACK]
                    for b in report.bound
                }
                one_rack += len(racks) == 1
        times[f"topology.{label}.cpu_ms"] = ms(cpu for _, cpu in runs)
        exact[f"topology.{label}.scheduled"] = sum(r.result == SCHEDULED for r, _ in runs)
        exact[f"topology.{label}.in_one_rack"] = one_rack
        exact[f"topology.{label}.domains_evaluated"] = sum(
            len(r.topology.evaluations) for r, _ in runs if r.topology is not None
        )
    return Measured(times, exact)


def dra(size: dict[str, int]) -> Measured:
    times: dict[str, float] = {}
    exact: dict[str, Exact] = {}
    for label, claims in (("claims", True), ("no_claims", False)):
        state = frozen(
            partial(dra_bench.build, size["nodes"], size["pods"], size["gangs"], claims=claims)
        )
        runs = cycles(state)
        devices = [
            result.device_id
            for report, _ in runs
            for decision in report.decisions
            if isinstance(decision, AllocateClaim) and decision.allocation is not None
            for result in decision.allocation.results
        ]
        times[f"dra.{label}.cpu_ms"] = ms(cpu for _, cpu in runs)
        exact[f"dra.{label}.scheduled"] = sum(r.result == SCHEDULED for r, _ in runs)
        exact[f"dra.{label}.devices"] = len(devices)
        exact[f"dra.{label}.devices_distinct"] = len(set(devices))
    return Measured(times, exact)


def volumes(size: dict[str, int]) -> Measured:
    times: dict[str, float] = {}
    exact: dict[str, Exact] = {}
    for workload in volumes_bench.WORKLOADS:
        state = frozen(partial(volumes_bench.build, workload, size["nodes"], size["gangs"]))

        def carry(report: CycleReport, state: ClusterState = state) -> None:
            for decision in report.decisions:
                if isinstance(decision, BindVolume | SelectNode):
                    carry_out(decision, state)

        runs = cycles(state, carry)
        times[f"volumes.{workload}.cpu_ms"] = ms(cpu for _, cpu in runs)
        exact[f"volumes.{workload}.scheduled"] = sum(r.result == SCHEDULED for r, _ in runs)
        exact[f"volumes.{workload}.bound"] = sum(len(r.bound) for r, _ in runs)
    return Measured(times, exact)


MEASURES: dict[str, Callable[[dict[str, int]], Measured]] = {
    "core": core,
    "preemption": preemption,
    "topology": topology,
    "dra": dra,
    "volumes": volumes,
}


class BenchFailed(Exception):
    """A bench's interpreter exited with an error (its stderr in ``detail``)."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


def run_bench(name: str, repeats: int) -> tuple[Measured, float]:
    """``name`` measured in a fresh interpreter; its figures and the wall seconds it took."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "bench.check", "--run", name, "--repeats", str(repeats)],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-1:] or [f"exit status {out.returncode}"]
        raise BenchFailed(f"{name}: the bench failed: {tail[0]}", out.stderr)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return Measured(data["times"], data["exact"]), time.perf_counter() - started


# --------------------------------------------------------------------------- comparing
#: A metric on one side only.
MISSING: Any = object()


@dataclass(frozen=True)
class Row:
    metric: str
    baseline: Any
    now: Any
    #: now / baseline for a time (over FLOOR_MS at least), None for an exact value.
    ratio: float | None
    failure: str | None = None
    #: An exact figure (compared for equality), not a time.
    exact: bool = False


def compare(baseline: Measured, now: Measured, tolerance: float = DEFAULT_TOLERANCE) -> list[Row]:
    """Every metric of either side, in order, with why it fails (``failure``) if it does."""
    rows = []
    for name in sorted(baseline.times.keys() | now.times.keys()):
        base, cur = baseline.times.get(name), now.times.get(name)
        if base is None or cur is None:
            why = "not measured" if cur is None else "not in the baseline (re-record)"
            rows.append(Row(name, base, cur, None, f"{name}: {why}"))
            continue
        ratio = max(cur, FLOOR_MS) / max(base, FLOOR_MS)
        failure = None
        if ratio > tolerance:
            failure = (
                f"{name}: {cur:,.1f} ms CPU is {ratio:.2f}x the baseline {base:,.1f} ms "
                f"(tolerance {tolerance:g}x)"
            )
        rows.append(Row(name, base, cur, ratio, failure))
    for name in sorted(baseline.exact.keys() | now.exact.keys()):
        was, got = baseline.exact.get(name, MISSING), now.exact.get(name, MISSING)
        failure = None
        if got is MISSING:
            failure = f"{name}: not measured"
        elif was is MISSING:
            failure = f"{name}: not in the baseline (re-record)"
        elif got != was:
            failure = f"{name}: {got!r}, the baseline has {was!r} (must be equal)"
        rows.append(
            Row(
                name,
                None if was is MISSING else was,
                None if got is MISSING else got,
                None,
                failure,
                exact=True,
            )
        )
    return rows


def table(rows: Sequence[Row]) -> list[str]:
    def cell(value: Any, exact: bool) -> str:
        if value is None:
            return "-"
        if isinstance(value, float) and not exact:
            return f"{value:,.1f}"
        return str(value)

    width = max(len(r.metric) for r in rows) if rows else 6
    lines = [
        f"{'metric':<{width}} {'baseline':>12} {'now':>12} {'ratio':>7}  ",
        "-" * (width + 44),
    ]
    for r in rows:
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else ("=" if r.failure is None else "")
        was, got = cell(r.baseline, r.exact), cell(r.now, r.exact)
        lines.append(
            f"{r.metric:<{width}} {was:>12} {got:>12} {ratio:>7}  " + ("FAIL" if r.failure else "")
        )
    return lines


# ------------------------------------------------------------------------------- files
def load_baseline(path: Path) -> tuple[Measured, dict[str, Any]]:
    data = json.loads(path.read_text())
    return Measured(data["times"], data["exact"]), data


def restrict(measured: Measured, benches: Iterable[str]) -> Measured:
    keep = tuple(f"{b}." for b in benches)
    return Measured(
        {k: v for k, v in measured.times.items() if k.startswith(keep)},
        {k: v for k, v in measured.exact.items() if k.startswith(keep)},
    )


# -------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    parser.add_argument("--benches", default=",".join(BENCHES), help="comma-separated subset")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument("--record", action="store_true", help="write the baseline instead")
    parser.add_argument("--json", type=Path, help="also write this run's figures here")
    parser.add_argument("--run", choices=BENCHES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.run:
        measured = repeated(partial(MEASURES[args.run], SIZES[args.run]), args.repeats)
        print(json.dumps({"times": measured.times, "exact": measured.exact}))
        return 0

    benches = [b.strip() for b in args.benches.split(",") if b.strip()]
    unknown = sorted(set(benches) - set(BENCHES))
    if unknown:
        parser.error(f"unknown benches: {', '.join(unknown)}")
    baseline: Measured | None = None
    if not args.record:
        if not args.baseline.exists():
            print(f"bench-check: no baseline {args.baseline}: run with --record", file=sys.stderr)
            return 2
        baseline, data = load_baseline(args.baseline)
        if data.get("sizes") != SIZES or data.get("repeats") != args.repeats:
            print(
                f"bench-check: {args.baseline} was recorded at other sizes or repeats: "
                "re-record it (--record)",
                file=sys.stderr,
            )
            return 2
        baseline = restrict(baseline, benches)
        meta = data.get("meta", {})
        print(
            f"bench-check: baseline {meta.get('started', '?')}, commit {meta.get('git', '?')}, "
            f"load {meta.get('load_min', '?')}-{meta.get('load_max', '?')}; "
            f"tolerance {args.tolerance:g}x on CPU time, exact figures equal"
        )
    load_before = os.getloadavg()[0]
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.perf_counter()
    now = Measured({}, {})
    durations = {}
    broken: list[str] = []
    for name in benches:
        try:
            measured, seconds = run_bench(name, args.repeats)
        except BenchFailed as error:
            print(error.detail, file=sys.stderr)
            broken.append(str(error))
            continue
        now.times.update(measured.times)
        now.exact.update(measured.exact)
        durations[name] = round(seconds, 1)
        print(f"bench-check: {name} measured in {seconds:.1f}s", flush=True)
    total = time.perf_counter() - started
    loads = (load_before, os.getloadavg()[0])
    print(
        f"bench-check: {total:.0f}s in all, load average {loads[0]:.1f} before, "
        f"{loads[1]:.1f} after"
    )
    record = {
        "meta": {
            "started": started_at,
            "git": git_commit(changes_in=("gangsched", "bench")),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_min": round(min(loads), 2),
            "load_max": round(max(loads), 2),
            "seconds": round(total, 1),
            "bench_seconds": durations,
        },
        "sizes": SIZES,
        "repeats": args.repeats,
        "times": now.times,
        "exact": now.exact,
    }
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    if broken and args.record:
        print("bench-check: " + "; ".join(broken), file=sys.stderr)
        return 1
    if args.record:
        args.baseline.write_text(json.dumps(record, indent=2) + "\n")
        print(f"bench-check: wrote {args.baseline}")
        return 0
    assert baseline is not None
    rows = compare(baseline, now, args.tolerance)
    print("\n".join(table(rows)))
    ratios = [r.ratio for r in rows if r.ratio is not None]
    failures = broken + [r.failure for r in rows if r.failure]
    if ratios:
        print(f"bench-check: CPU time ratios {min(ratios):.2f}-{max(ratios):.2f}")
    if failures:
        print(f"bench-check: {len(failures)} regression(s):", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    print("bench-check: no regression")
    return 0


if __name__ == "__main__":
    sys.exit(main())
