"""One pytest run of Karpenter e2e cases with the figures they record, for the three benches
that run them (bench.autoscaling, bench.capacity_wait, bench.gang_protection): each case
appends one JSON line to the file GANGSCHED_AUTOSCALING_RESULTS names, and the run keeps the
machine's load on either side, since a figure on this shared machine means little without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_cases(pytest_args: list[str]) -> tuple[dict[str, Any], int]:
    """The run (load before and after, the cases' figures) and pytest's exit code."""
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as figures:
        load_before = list(os.getloadavg())
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "autoscaling", *pytest_args],
            cwd=ROOT,
            env={**os.environ, "GANGSCHED_AUTOSCALING_RESULTS": figures.name},
            check=False,
        )
        load_after = list(os.getloadavg())
        results = [json.loads(line) for line in Path(figures.name).read_text().splitlines()]
    run = {"load_before": load_before, "load_after": load_after, "results": results}
    return run, proc.returncode
