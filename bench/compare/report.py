"""Medians over rounds and the markdown table of bench/results/compare.md."""

from __future__ import annotations

import statistics
from typing import Any

from bench.compare.workloads import LIST_FLOOR, SCHEDULERS, WORKLOADS, titles

# ------------------------------------------------------------------------------- summary
METRICS = (
    "pods_per_s",
    "pods_per_s_binding",
    "latency_p50_s",
    "latency_p99_s",
    "first_bind_s",
    "last_bind_s",
    "victims",
    "api_requests_per_pod",
    "cpu_s",
    "cpu_s_total",
    "rss_peak_mib",
)
#: How the gangs ended (medians too, no ratio): bound whole, partly bound, pods a
#: kube-scheduler still holds reserved in Permit (Coscheduling's weak spot).
OUTCOME = ("gangs_complete", "gangs_partly_bound", "pods_in_flight", "pods_in_flight_peak")


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    medians: dict[str, dict[str, dict[str, float]]] = {}
    for run in runs:
        medians.setdefault(run["workload"], {}).setdefault(run["scheduler"], {})
    for workload, per in medians.items():
        for scheduler in per:
            mine = [r for r in runs if r["workload"] == workload and r["scheduler"] == scheduler]
            for metric in (*METRICS, *OUTCOME, "complete"):
                values = [float(r[metric]) for r in mine if metric in r]
                if values:
                    per[scheduler][metric] = round(statistics.median(values), 3)
            per[scheduler]["rounds"] = len(mine)
    ratios: dict[str, dict[str, float]] = {}
    for workload, per in medians.items():
        ours, theirs = per.get("gangsched"), per.get("kube-scheduler")
        if not ours or not theirs:
            continue
        ratios[workload] = {
            m: round(ours[m] / theirs[m], 3)
            for m in METRICS
            if m in ours and m in theirs and theirs[m]
        }
    floor = medians.get("d", {}).get(LIST_FLOOR, {}).get("first_bind_s")
    over_floor = {
        scheduler: round(m["first_bind_s"] - floor, 3)
        for scheduler, m in medians.get("d", {}).items()
        if floor is not None and scheduler != LIST_FLOOR and "first_bind_s" in m
    }
    return {"medians": medians, "ratios": ratios, "first_bind_over_floor_s": over_floor}


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        f"Medians over {meta['rounds']} rounds; load average (1 min) during the runs: "
        f"{meta['load_min']:.2f}-{meta['load_max']:.2f} (median {meta['load_median']:.2f}) on "
        f"{meta['cpus']} CPUs. Ratio = gangsched / kube-scheduler. Mode: {meta['mode']} "
        "for (a) and (b), streamed for (c), precreate for (d) (see bench/README.md).",
        "",
        *tables(summary, meta["sizes"]),
    ]
    return "\n".join(lines) + "\n"


def tables(summary: dict[str, Any], sizes: dict[str, Any], *, outcome: bool = True) -> list[str]:
    """The table of medians and ratios, then how the gangs ended (unless ``outcome`` is
    false) and (d)'s floor: the body of compare.md, also rendered into bench/README.md by
    `python -m bench.report`."""
    lines = [
        "| workload | scheduler | pods/s | gang latency p50 / p99 (s) | first / last bind (s) "
        "| victims | API req / pod | CPU s (run / total) | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    medians, ratios = summary["medians"], summary["ratios"]
    ceiling = medians.get("ceiling", {}).get("bare-binder", {}).get("pods_per_s")
    label = titles(sizes)
    for workload in (*WORKLOADS, "ceiling"):
        per = medians.get(workload)
        if not per:
            continue
        for scheduler in (LIST_FLOOR, *SCHEDULERS, "bare-binder"):
            m = per.get(scheduler)
            if m is None:
                continue
            share = (
                f" ({m['pods_per_s'] / ceiling:.0%} of ceiling)"
                if ceiling and "pods_per_s" in m and workload in "ab"
                else ""
            )
            incomplete = "" if m.get("complete", 1) else " (incomplete)"
            lines.append(
                f"| {label[workload]} | {scheduler}{incomplete} | "
                f"{fmt(m.get('pods_per_s'))}{share} | "
                f"{fmt(m.get('latency_p50_s'), 2)} / {fmt(m.get('latency_p99_s'), 2)} | "
                f"{fmt(m.get('first_bind_s'), 2)} / {fmt(m.get('last_bind_s'), 2)} | "
                f"{fmt(m.get('victims'), 0)} | {fmt(m.get('api_requests_per_pod'), 2)} | "
                f"{fmt(m.get('cpu_s'), 1)} / {fmt(m.get('cpu_s_total'), 1)} | "
                f"{fmt(m.get('rss_peak_mib'), 0)} |"
            )
        r = ratios.get(workload)
        if r:
            lines.append(
                f"| {label[workload]} | **ratio** | **{fmt(r.get('pods_per_s'), 2)}x** | "
                f"{fmt(r.get('latency_p50_s'), 2)} / {fmt(r.get('latency_p99_s'), 2)} | "
                f"{fmt(r.get('first_bind_s'), 2)} / {fmt(r.get('last_bind_s'), 2)} | "
                f"{fmt(r.get('victims'), 2)} | {fmt(r.get('api_requests_per_pod'), 2)} | "
                f"{fmt(r.get('cpu_s'), 2)} / {fmt(r.get('cpu_s_total'), 2)} | "
                f"{fmt(r.get('rss_peak_mib'), 2)} |"
            )
    if outcome:
        lines += outcome_table(medians, label)
    over = summary.get("first_bind_over_floor_s") or {}
    if over:
        lines += [
            "",
            f"(d) first bind minus the {LIST_FLOOR} (a bare client listing the same objects, "
            "same round): " + ", ".join(f"{s} {v:+.2f} s" for s, v in over.items()),
        ]
    return lines


def outcome_table(medians: dict[str, Any], label: dict[str, str]) -> list[str]:
    """Gangs at the end of each run (only for results that counted them)."""
    rows = []
    for workload in WORKLOADS:
        for scheduler in SCHEDULERS:
            m = medians.get(workload, {}).get(scheduler)
            if not m or "gangs_partly_bound" not in m:
                continue
            rows.append(
                f"| {label[workload]} | {scheduler} | {fmt(m.get('gangs_complete'), 0)} | "
                f"{fmt(m.get('gangs_partly_bound'), 0)} | {fmt(m.get('pods_in_flight'), 0)} | "
                f"{peak(m.get('pods_in_flight_peak'))} |"
            )
    if not rows:
        return []
    return [
        "",
        "Gangs at the end of the run: bound whole, partly bound (some members bound, not all), "
        "and gang pods a kube-scheduler holds in flight (pending, in none of its queues: "
        "reserved in Permit; '-' for gangsched, which reserves nothing before its binds); "
        "for (x) also the most gang pods held in flight at any 0.5 s sample during the run "
        "(an upper bound: a pod just created and not yet in the scheduler's queue counts).",
        "",
        "| workload | scheduler | gangs bound whole | gangs partly bound | pods held in Permit "
        "| peak pods in flight |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
    ]


def peak(value: float | None) -> str:
    return "-" if value is None or value < 0 else fmt(value, 0)
