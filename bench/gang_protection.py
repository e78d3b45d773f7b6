"""Running gangs under Karpenter's consolidation, protected and not, side by side in one run.

    flock /tmp/gangsched-bench.lock .venv/bin/python -m bench.gang_protection [--out FILE]

Runs tests/e2e/test_autoscaling_disruption.py (one control plane, one Karpenter v1.13 with its
kwok provider, one gangsched): the same consolidation of a cluster with a running gang and an
idle node, with gangsched's budget and with protection opted out, then a gang whose node dies.
The tests assert the behaviour; the seconds, node counts and Karpenter's events are kept here
with the load around the run (docs/concepts/gang-protection.md quotes them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any

from bench.autoscaling_runs import ROOT, run_cases
from bench.provenance import git_commit

OUT = ROOT / "bench" / "results" / "gang-protection.json"
TESTS = "tests/e2e/test_autoscaling_disruption.py"


def run(out: Path) -> dict[str, Any]:
    measured, code = run_cases([TESTS])
    data = {
        "meta": {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "git": git_commit(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "karpenter": "sigs.k8s.io/karpenter v1.13.0 ./kwok",
            "pytest_exit": code,
        },
        "runs": [measured],
    }
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = run(args.out)
    for result in data["runs"][0]["results"]:
        print(json.dumps(result, sort_keys=True))
    print(f"wrote {args.out} (pytest exited {data['meta']['pytest_exit']})")
    return 0 if data["meta"]["pytest_exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
