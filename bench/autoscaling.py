"""gangsched and kube-scheduler's gang scheduling side by side under the same Karpenter.

    flock /tmp/gangsched-bench.lock .venv/bin/python -m bench.autoscaling [--out FILE]

Runs the autoscaling e2e cases that measure (tests/e2e/test_autoscaling.py: a 16-pod gang of
4 CPU on an empty NodePool, under gangsched and under kube-scheduler with GenericWorkload, one
after the other on one control plane with one Karpenter) and keeps their figures: seconds from
the gang's last member to its first NodeClaim and to its last bind, NodeClaims, nodes used,
Karpenter's provisioning decisions, and what the members said before the last one arrived.
The tests assert the behaviour only; the seconds are kept here, with the load around the run.
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

OUT = ROOT / "bench" / "results" / "autoscaling.json"
CASES = "scales_up_whole or kube_scheduler_gang or over_the_pool_limit or one_zone"


def run(out: Path, cases: str) -> dict[str, Any]:
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    measured, code = run_cases(["-k", cases, "tests/e2e/test_autoscaling.py"])
    data = {
        "meta": {
            "started": started,
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
    parser.add_argument("-k", dest="cases", default=CASES, help="pytest -k of the cases")
    args = parser.parse_args()
    data = run(args.out, args.cases)
    for result in data["runs"][0]["results"]:
        print(json.dumps(result, sort_keys=True))
    print(f"wrote {args.out} (pytest exited {data['meta']['pytest_exit']})")
    return 0 if data["runs"][0]["results"] else 1


if __name__ == "__main__":
    sys.exit(main())
