"""Benchmark of the gang queue draining a burst (not a test).

`--gangs` gangs are queued at once, a share of them (`--unschedulable`) tried and left
unschedulable, as gangs waiting for room are; then the rest is taken one at a time, as the
scheduling loop takes them: a pop, the gang done, and the loop's question of when the next
backoff ends (`next_ready_at`, which decides how long it sleeps). Reported: the CPU time of the
drain, per gang popped. Before the queue kept its timers and an index by state, each pop and
each `next_ready_at` looked at every gang, so a drain grew with the square of the burst.

    .venv/bin/python -m bench.queue_bench [--gangs 1000,5000,20000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

from bench.provenance import git_commit
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.queue import SchedulingQueue


def drain(gangs: int, unschedulable: int) -> tuple[float, int]:
    """CPU seconds to drain the burst, and how many gangs were popped."""
    queue = SchedulingQueue()
    refs = [GroupRef(Dialect.SIGS, "default", f"gang-{i:06d}") for i in range(gangs)]
    for i, ref in enumerate(refs):
        queue.add(ref, priority=i % 3, created=float(i))
    for _ in range(unschedulable):
        ref_popped = queue.pop(0.0)
        assert ref_popped is not None
        queue.unschedulable(ref_popped, 0.0)
    started = time.process_time()
    popped = 0
    while (taken := queue.pop(1.0)) is not None:
        queue.done(taken)
        queue.next_ready_at()
        popped += 1
    return time.process_time() - started, popped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gangs", default="1000,5000,20000")
    parser.add_argument("--unschedulable", type=float, default=0.5, help="share left waiting")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    meta = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git": git_commit(changes_in=("gangsched/core/queue.py",)),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "unschedulable_share": args.unschedulable,
    }
    rows = []
    for gangs in (int(n) for n in args.gangs.split(",")):
        seconds, popped = drain(gangs, int(gangs * args.unschedulable))
        row = {
            "gangs": gangs,
            "popped": popped,
            "drain_ms": round(seconds * 1000, 1),
            "us_per_gang": round(seconds * 1e6 / max(popped, 1), 1),
        }
        print(json.dumps(row))
        rows.append(row)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"meta": meta, "runs": rows}, out, indent=2)
            out.write("\n")


if __name__ == "__main__":
    main()
