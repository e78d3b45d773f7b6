"""Medians over rounds and the markdown table of bench/results/compare.md."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
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
#: What a run cost the control plane per bound pod (bench/compare/measure.py ApiCounts).
COST = (
    "apiserver_cpu_ms_per_pod",
    "apiserver_cpu_ms_per_pod_net",
    "etcd_cpu_ms_per_pod",
    "etcd_cpu_ms_per_pod_net",
    "apiserver_idle_cpu_per_s",
    "window_s",
    "watch_events_per_pod",
    "watch_kib_per_pod",
)
#: Per-run keys that vary with the run (the scheduler's verbs, the latency stages of
#: bench/compare/latency.py, the machine's cores from `machine_keys`): their medians are kept
#: too.
PREFIXES = ("requests_per_pod_", "stage_", "machine_")
#: The processes of a run's `machine` figures, in the machine table's order (measure.py's
#: DAEMONS, then the scheduler and a peer's controller), with their column titles.
MACHINE_PROCESSES = (
    ("kube-apiserver", "API server"),
    ("etcd", "etcd"),
    ("kwok", "kwok"),
    ("kube-controller-manager", "controller manager"),
    ("scheduler", "scheduler"),
    ("controller", "its controller"),
)
#: The scheduler each ratio row divides by, and the key of its ratios in the summary.
PEERS = (("kube-scheduler", "ratios"), ("coscheduling", "ratios_coscheduling"))


def machine_keys(run: dict[str, Any]) -> dict[str, float]:
    """A run's `machine` figures (busy and stolen cores, and each process's, from the
    scheduler's exec to its last bind) as flat keys, so that their medians are kept."""
    machine = run.get("machine") or {}
    flat = {
        f"machine_{key}": float(machine[key])
        for key in ("busy_cores", "steal_cores")
        if key in machine
    }
    for process, cores in (machine.get("cores") or {}).items():
        flat[f"machine_cores_{process}"] = float(cores)
    return flat


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    medians: dict[str, dict[str, dict[str, float]]] = {}
    for run in runs:
        medians.setdefault(run["workload"], {}).setdefault(run["scheduler"], {})
    for workload, per in medians.items():
        for scheduler in per:
            mine = [
                {**r, **machine_keys(r)}
                for r in runs
                if r["workload"] == workload and r["scheduler"] == scheduler
            ]
            varying = sorted({k for r in mine for k in r if k.startswith(PREFIXES)})
            for metric in (*METRICS, *OUTCOME, *COST, *varying, "complete", "settled_s"):
                values = [float(r[metric]) for r in mine if metric in r]
                if values:
                    per[scheduler][metric] = round(statistics.median(values), 3)
            per[scheduler]["rounds"] = len(mine)
    ratios: dict[str, dict[str, dict[str, float]]] = {key: {} for _, key in PEERS}
    for workload, per in medians.items():
        for peer, key in PEERS:
            ours, theirs = per.get("gangsched"), per.get(peer)
            if not ours or not theirs:
                continue
            ratios[key][workload] = {
                m: round(ours[m] / theirs[m], 3)
                for m in (*METRICS, *COST)
                if m in ours and m in theirs and theirs[m]
            }
    floor = medians.get("d", {}).get(LIST_FLOOR, {}).get("first_bind_s")
    over_floor = {
        scheduler: round(m["first_bind_s"] - floor, 3)
        for scheduler, m in medians.get("d", {}).items()
        if floor is not None and scheduler != LIST_FLOOR and "first_bind_s" in m
    }
    return {"medians": medians, **ratios, "first_bind_over_floor_s": over_floor}


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def paced(meta: dict[str, Any]) -> str:
    """How a streamed run's objects were created, when paced (`--rate`)."""
    rate = meta.get("rate") or 0
    if meta.get("mode") != "streamed" or not rate:
        return ""
    return f", paced at {rate:g} objects/s (each PodGroup, then its pods)"


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        f"Medians over {meta['rounds']} rounds; load average (1 min) during the runs: "
        f"{meta['load_min']:.2f}-{meta['load_max']:.2f} (median {meta['load_median']:.2f}) on "
        f"{meta['cpus']} CPUs. Ratio = gangsched / kube-scheduler (or / coscheduling). "
        f"Mode: {meta['mode']}{paced(meta)} "
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
    medians = summary["medians"]
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
        for peer, key in PEERS:
            r = summary.get(key, {}).get(workload)
            if not r:
                continue
            name = "**ratio**" if peer == "kube-scheduler" else f"**ratio vs {peer}**"
            lines.append(
                f"| {label[workload]} | {name} | **{fmt(r.get('pods_per_s'), 2)}x** | "
                f"{fmt(r.get('latency_p50_s'), 2)} / {fmt(r.get('latency_p99_s'), 2)} | "
                f"{fmt(r.get('first_bind_s'), 2)} / {fmt(r.get('last_bind_s'), 2)} | "
                f"{fmt(r.get('victims'), 2)} | {fmt(r.get('api_requests_per_pod'), 2)} | "
                f"{fmt(r.get('cpu_s'), 2)} / {fmt(r.get('cpu_s_total'), 2)} | "
                f"{fmt(r.get('rss_peak_mib'), 2)} |"
            )
    lines += cost_table(medians, label) + machine_table(medians, label)
    lines += stages_table(medians, label)
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


def measured(medians: dict[str, Any], key: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Each workload's schedulers, in the tables' order, whose medians hold `key` (their runs
    measured what a table shows): (workload, scheduler, medians)."""
    for workload in WORKLOADS:
        for scheduler in SCHEDULERS:
            m = medians.get(workload, {}).get(scheduler)
            if m and key in m:
                yield workload, scheduler, m


def outcome_table(medians: dict[str, Any], label: dict[str, str]) -> list[str]:
    """Gangs at the end of each run (only for results that counted them)."""
    rows = []
    for workload, scheduler, m in measured(medians, "gangs_partly_bound"):
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


def cost_table(medians: dict[str, Any], label: dict[str, str]) -> list[str]:
    """What each scheduler's run cost the control plane per bound pod (only for results that
    measured it): the API server's and etcd's CPU, the watch events the API server sent, and
    the scheduler's own requests by verb (its client counters, since exec)."""
    rows = []
    settled = False  # measured to the settled cluster (later runs), or to the last bind
    net = False  # with the cluster's idle rate subtracted (later runs)
    for workload, scheduler, m in measured(medians, "apiserver_cpu_ms_per_pod"):
        settled = settled or "settled_s" in m
        verbs = ", ".join(
            f"{key.removeprefix('requests_per_pod_')} {m[key]:.2f}"
            for key in sorted(m)
            if key.startswith("requests_per_pod_") and m[key] >= 0.005
        )
        net = net or "apiserver_cpu_ms_per_pod_net" in m
        rows.append(
            f"| {label[workload]} | {scheduler} | {cpu_cell(m, 'apiserver')} "
            f"| {cpu_cell(m, 'etcd')} | "
            f"{fmt(m.get('watch_events_per_pod'), 1)} / {fmt(m.get('watch_kib_per_pod'), 1)} "
            f"| {fmt(m.get('api_requests_per_pod'), 2)} | {verbs or '-'} |"
        )
    if not rows:
        return []
    return [
        "",
        "The control plane's cost per bound pod "
        + (
            "from the scheduler's exec until every bound pod runs and the scheduler's "
            "writes have stopped for 2 s "
            if settled
            else "over the measured window "
        )
        + "(everything on the "
        "cluster counts: the load generator's creates, kwok's status writes and the bench's "
        "watch are the same for every scheduler, so the differences are the schedulers'): "
        "CPU ms of the kube-apiserver and etcd processes (`/proc/<pid>/stat`), watch events "
        "and KiB the API server sent (`apiserver_watch_events_sizes`), the scheduler's "
        "requests (its FlowSchema's count) and, by verb, its own client counters since exec "
        "(watches and lists are GETs)."
        + (
            " CPU is given as gross / net: net of what the cluster at rest spends over the "
            "same window (its rate sampled for 10 s before each run, on the cluster with its "
            "nodes only: kwok's 1,000 node leases alone keep the API server busy), since the "
            "window ends when the scheduler's "
            "writes stop, not when its work is done."
            if net
            else ""
        ),
        "",
        "| workload | scheduler | API server CPU ms / pod | etcd CPU ms / pod "
        "| watch events / KiB per pod | requests / pod | by verb / pod |",
        "|---|---|---:|---:|---:|---:|---|",
        *rows,
    ]


def machine_table(medians: dict[str, Any], label: dict[str, str]) -> list[str]:
    """Where the machine's cores went while each scheduler worked (only for results that
    measured it, since session 23): on a machine the runs saturate, a scheduler that takes
    fewer cores leaves more to the API server that binds its pods."""
    rows = []
    for workload, scheduler, m in measured(medians, "machine_busy_cores"):
        cells = " | ".join(
            fmt(m.get(f"machine_cores_{process}"), 2) for process, _ in MACHINE_PROCESSES
        )
        rows.append(
            f"| {label[workload]} | {scheduler} | {fmt(m.get('machine_busy_cores'), 2)} | "
            f"{fmt(m.get('machine_steal_cores'), 2)} | {cells} |"
        )
    if not rows:
        return []
    titles = " | ".join(title for _, title in MACHINE_PROCESSES)
    return [
        "",
        "The machine's cores from the scheduler's exec to its last bind (`machine` in each "
        "run): busy and stolen (`/proc/stat`), then each process's CPU seconds over the same "
        "window (`/proc/<pid>/stat`); its controller is scheduler-plugins' beside Coscheduling.",
        "",
        f"| workload | scheduler | busy | stolen | {titles} |",
        "|---|---|" + "---:|" * (2 + len(MACHINE_PROCESSES)),
        *rows,
    ]


def cpu_cell(m: dict[str, Any], process: str) -> str:
    """A process's CPU ms per pod, gross, and net of the idle rate where measured."""
    gross = fmt(m.get(f"{process}_cpu_ms_per_pod"), 2)
    net = m.get(f"{process}_cpu_ms_per_pod_net")
    return gross if net is None else f"{gross} / {fmt(net, 2)}"


#: bench/compare/latency.py's stages, in the order a gang goes through them.
STAGES = ("seen", "decided", "answered", "observed")


def stages_table(medians: dict[str, Any], label: dict[str, str]) -> list[str]:
    """Where streamed gang latency goes (bench/compare/latency.py), p50 / p99 per stage."""
    rows = []
    for workload, scheduler, m in measured(medians, "stage_seen_p50_s"):
        cells = " | ".join(
            f"{fmt(m.get(f'stage_{s}_p50_s'), 2)} / {fmt(m.get(f'stage_{s}_p99_s'), 2)}"
            for s in STAGES
        )
        rows.append(
            f"| {label[workload]} | {scheduler} | {cells} | "
            f"{fmt(m.get('latency_p50_s'), 2)} / {fmt(m.get('latency_p99_s'), 2)} |"
        )
    if not rows:
        return []
    return [
        "",
        "Where streamed gang latency goes, p50 / p99 in seconds (bench/compare/latency.py): "
        "the last member's create answered to the bench's watch seeing it; to gangsched's "
        "decision (its log); its binds answered after the decision; the last bind seen by "
        "the bench's watch after the last answer. Kube-schedulers log no decision: only the "
        "first stage.",
        "",
        "| workload | scheduler | created -> seen | created -> decided | decided -> binds "
        "answered | answered -> bind seen | gang latency |",
        "|---|---|---:|---:|---:|---:|---:|",
        *rows,
    ]
