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
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "autoscaling.json"
CASES = "scales_up_whole or kube_scheduler_gang or over_the_pool_limit or one_zone"


def git_commit() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip()


def run(out: Path, cases: str) -> dict[str, Any]:
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as figures:
        load_before = list(os.getloadavg())
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "autoscaling", "-k", cases,
             "tests/e2e/test_autoscaling.py"],
            cwd=ROOT,
            env={**os.environ, "GANGSCHED_AUTOSCALING_RESULTS": figures.name},
            check=False,
        )  # fmt: skip
        load_after = list(os.getloadavg())
        results = [json.loads(line) for line in Path(figures.name).read_text().splitlines()]
    data = {
        "meta": {
            "started": started,
            "git": git_commit(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "karpenter": "sigs.k8s.io/karpenter v1.13.0 ./kwok",
            "pytest_exit": proc.returncode,
        },
        "runs": [{"load_before": load_before, "load_after": load_after, "results": results}],
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
