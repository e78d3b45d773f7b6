"""Where a streamed gang's latency goes, from the creation of its last member to its last
bind: the stages read from the bench's own pod watch and, for gangsched, from its log.

For each gang whose members all bound, with C the moment the API server answered the last
member's create (the load generator's clock):

* `seen`: the bench's watch delivers that member (max over members of the first event
  seen, minus C): the watch delivery every scheduler waits for too;
* `decided`: gangsched's "cycle" log line with result "scheduled", minus C: delivery to
  gangsched, its queue, the loop's wake-up and the cycle;
* `answered`: the last "bound" log line of the gang's members minus `decided`: the binds'
  round trips (and their wait for a bind slot);
* `observed`: the last bind seen by the bench's watch minus the last answer: the bind's
  own watch delivery.

Kube-schedulers log no such lines: for them only `seen` is reported.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.harness import percentile


def gangsched_log(log: Path, events: Collection[str]) -> Iterator[tuple[dict[str, Any], float]]:
    """gangsched's JSON log lines whose event is one of `events`, each with its wall-clock
    time; other lines (a library's plain text) skipped."""
    if not log.exists():
        return
    with log.open(errors="replace") as lines:
        for line in lines:
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            event = entry.get("event")
            if event in events:
                yield entry, datetime.fromisoformat(entry["timestamp"]).timestamp()


def gangsched_trace(log: Path) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """From gangsched's JSON log: each group's first "scheduled" cycle and each pod's bind
    answer (wall-clock seconds), and how many "waiting" cycles each group went through."""
    decided: dict[str, float] = {}
    answered: dict[str, float] = {}
    waiting: dict[str, int] = {}
    for entry, at in gangsched_log(log, ("cycle", "bound")):
        if entry["event"] == "bound":
            answered[entry["pod"].rpartition("/")[2]] = at
        elif entry.get("result") == "scheduled":
            decided.setdefault(entry["group"].rpartition("/")[2], at)
        elif entry.get("result") == "waiting":
            name = entry["group"].rpartition("/")[2]
            waiting[name] = waiting.get(name, 0) + 1
    return decided, answered, waiting


def stages(
    gangs: dict[str, list[str]],
    created: dict[str, float],
    seen_at: dict[str, float],
    bound_at: dict[str, float],
    log: Path | None,
) -> dict[str, Any]:
    """p50 / p99 of each stage (module doc) over the gangs bound whole, in seconds.

    `gangs` maps each group's name to its members' names; `created` maps "Pod/<name>" and
    "PodGroup/<name>" to the create's answer."""
    decided, answered, waiting = gangsched_trace(log) if log is not None else ({}, {}, {})
    spans: dict[str, list[float]] = {"seen": [], "decided": [], "answered": [], "observed": []}
    waits: list[float] = []
    for group, members in gangs.items():
        if not all(m in bound_at for m in members):
            continue
        keys = [f"PodGroup/{group}"] + [f"Pod/{m}" for m in members]
        last_created = max(created[k] for k in keys if k in created)
        spans["seen"].append(max(seen_at.get(m, last_created) for m in members) - last_created)
        if group not in decided or not all(m in answered for m in members):
            continue
        last_answer = max(answered[m] for m in members)
        spans["decided"].append(decided[group] - last_created)
        spans["answered"].append(last_answer - decided[group])
        spans["observed"].append(max(bound_at[m] for m in members) - last_answer)
        waits.append(float(waiting.get(group, 0)))
    out: dict[str, Any] = {}
    for name, values in spans.items():
        if values:
            out[f"{name}_p50_s"] = round(percentile(values, 0.5), 3)
            out[f"{name}_p99_s"] = round(percentile(values, 0.99), 3)
    if waits:
        out["waiting_cycles_per_gang"] = round(sum(waits) / len(waits), 2)
    return out
