"""`gangsched simulate` and `gangsched explain` with a wait for new capacity (issue 32 items
2 and 5): simulate has no autoscaler, so the wait expires in virtual time and the gang then
preempts; explain says the gang waits, until when, and whom it would preempt after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangsched.cli import main
from gangsched.core.api.capacity_wait import WAIT_FOR_CAPACITY_ANNOTATION

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "examples" / "seed-walkthrough.yaml"
VICTIMS = ["default/lp-pod-1", "default/lp-pod-2"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main([*args, "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


def config(tmp_path: Path, seconds: int) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"preemption": {"waitForCapacitySeconds": seconds}}))
    return str(path)


def annotated_seed(tmp_path: Path, value: str) -> str:
    docs = list(yaml.safe_load_all(SEED.read_text()))
    for doc in docs:
        if doc and doc.get("kind") == "PodGroup":
            doc["metadata"].setdefault("annotations", {})[WAIT_FOR_CAPACITY_ANNOTATION] = value
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_simulate_waits_then_preempts_when_no_capacity_arrives(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run(capsys, "simulate", str(SEED), "--config", config(tmp_path, 300))
    assert sorted(result["preempted"]) == VICTIMS
    steps = [s for s in result["timeline"] if s["gang"] == "default/hp-training-job"]
    first, then = steps[0], steps[1]
    assert first["result"] == "unschedulable" and "preempted" not in first
    assert "waiting up to 5m0s for new capacity before preempting" in first["message"]
    assert then["result"] == "waiting_on_preemption"
    assert "capacity did not arrive within 5m0s; preempting" in then["message"]
    assert sorted(then["preempted"]) == VICTIMS
    assert steps[-1]["result"] == "scheduled"


def test_the_annotation_overrides_the_configuration(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    at_once = run(
        capsys, "simulate", annotated_seed(tmp_path, "0"), "--config", config(tmp_path, 300)
    )
    first = at_once["timeline"][0]
    assert first["result"] == "waiting_on_preemption" and "waiting up to" not in first["message"]
    waits = run(capsys, "simulate", annotated_seed(tmp_path, "90"))
    assert "waiting up to 1m30s" in waits["timeline"][0]["message"]
    assert sorted(waits["preempted"]) == VICTIMS


def test_explain_says_the_gang_waits_for_new_capacity_and_until_when(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = "default/hp-training-job"
    result = run(capsys, "explain", target, "-f", annotated_seed(tmp_path, "600"))
    preemption = result["preemption"]
    assert preemption["waitingForCapacityUntil"] is not None
    assert preemption["waitingForCapacityUntil"] in preemption["message"]
    assert "waiting up to 10m0s for new capacity before preempting" in preemption["message"]
    assert sorted(v["pod"] for v in preemption["victims"]) == VICTIMS
    assert not preemption["nominations"]
    code = main(["explain", target, "-f", annotated_seed(tmp_path, "600")])
    text = capsys.readouterr().out
    assert code == 0
    assert "Preemption (mincost): would help, after a wait for new capacity" in text
    plain = run(capsys, "explain", target, "-f", str(SEED))
    assert plain["preemption"]["waitingForCapacityUntil"] is None
