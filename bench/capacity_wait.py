"""Grow before you evict under Karpenter, measured: the two cases of
tests/e2e/test_autoscaling_grow.py, side by side, `--repeat` times.

    flock /tmp/gangsched-bench.lock .venv/bin/python -m bench.capacity_wait [--repeat N]

A gang that fits only by preempting two low-priority pods, once with
`gangsched.io/wait-for-capacity-seconds` (it waits for the nodes Karpenter adds) and once
without (it preempts at once), on one control plane with one Karpenter per run. Kept per case:
seconds from the gang's last member to its last bind, NodeClaims added for it, victims, and
what gangsched's new-capacity metrics saw; with the load around each run. The tests assert the
behaviour only; the seconds are kept here.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from bench.autoscaling_runs import ROOT, run_cases
from bench.provenance import git_commit

OUT = ROOT / "bench" / "results" / "capacity-wait.json"
TESTS = "tests/e2e/test_autoscaling_grow.py"


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per case: the runs' seconds to bind, NodeClaims added and victims, in run order."""
    cases: dict[str, dict[str, list[Any]]] = {}
    for run in runs:
        for result in run["results"]:
            case = cases.setdefault(
                result["case"],
                {"seconds_last_member_to_last_bind": [], "nodeclaims": [], "victims": []},
            )
            case["seconds_last_member_to_last_bind"].append(
                result["seconds_last_member_to_last_bind"]
            )
            case["nodeclaims"].append(result["nodeclaims_added_for_the_gang"])
            case["victims"].append(len(result["victims"]))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    runs, exits = [], []
    for _ in range(args.repeat):
        run, code = run_cases([TESTS])
        runs.append(run)
        exits.append(code)
    data = {
        "meta": {
            "started": started,
            "git": git_commit(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "karpenter": "sigs.k8s.io/karpenter v1.13.0 ./kwok",
            "pytest_exits": exits,
        },
        "summary": summary(runs),
        "runs": runs,
    }
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(json.dumps(data["summary"], indent=1, sort_keys=True))
    print(f"wrote {args.out} (pytest exits {exits})")
    return 0 if all(code == 0 for code in exits) else 1


if __name__ == "__main__":
    sys.exit(main())
