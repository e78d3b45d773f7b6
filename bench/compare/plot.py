"""bench/results/compare.png: per workload, each scheduler's time to the last bind."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.compare.workloads import SCHEDULERS, WORKLOADS, titles


def plot(document: dict[str, Any], runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = document["medians"]
    label = titles(document["meta"]["sizes"])
    workloads = [w for w in WORKLOADS if w in medians]
    panels = (
        ("pods_per_s", "pods bound per second (higher is better)"),
        ("latency_p99_s", "gang latency p99, s (lower is better)"),
        ("cpu_s", "scheduler CPU seconds (lower is better)"),
        ("rss_peak_mib", "scheduler peak RSS, MiB (lower is better)"),
    )
    colors = {
        "gangsched": "#1f77b4",
        "kube-scheduler": "#d62728",
        "gangsched-upstream": "#7fb2e5",
        "coscheduling": "#2ca02c",
    }
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    width = 0.8 / len(SCHEDULERS)
    for ax, (metric, title) in zip(axes.flat, panels, strict=True):
        for i, scheduler in enumerate(SCHEDULERS):
            xs, ys, lo, hi = [], [], [], []
            for j, workload in enumerate(workloads):
                values = [
                    float(r[metric])
                    for r in runs
                    if r["workload"] == workload and r["scheduler"] == scheduler and metric in r
                ]
                if not values:
                    continue
                med = statistics.median(values)
                xs.append(j + (i - 1) * width)
                ys.append(med)
                lo.append(med - min(values))
                hi.append(max(values) - med)
            if xs:
                ax.bar(
                    xs,
                    ys,
                    width,
                    yerr=[lo, hi],
                    capsize=3,
                    label=scheduler,
                    color=colors[scheduler],
                )
        if metric == "pods_per_s":
            ceiling = medians.get("ceiling", {}).get("bare-binder", {}).get("pods_per_s")
            if ceiling:
                ax.axhline(ceiling, color="gray", linestyle="--", linewidth=1)
                ax.text(
                    len(workloads) - 0.5,
                    ceiling,
                    f"bare binder {ceiling:.0f}/s",
                    ha="right",
                    va="bottom",
                    fontsize=8,
                    color="gray",
                )
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(
            [label[w].split(": ")[0].replace(", ", "\n") for w in workloads], fontsize=7
        )
        ax.set_title(title, fontsize=10)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("gangsched vs kube-scheduler v1.37.1 (medians, bars = min..max over rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
