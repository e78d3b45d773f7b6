"""bench/check.py's comparison (issue 30 goal 6): a time beyond the tolerance fails, one
within passes, a changed exact figure fails, a metric on one side only fails. Synthetic
figures: nothing is measured here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import check
from bench.check import Measured, compare


def baseline() -> Measured:
    return Measured(
        times={"core.gang3.cpu_ms": 100.0, "preemption.a.kep.decision_cpu_ms": 40.0},
        exact={"core.gang3.scheduled": 300, "preemption.a.kep.victims": 1000},
    )


def failures(now: Measured, tolerance: float = 3.0) -> list[str]:
    return [r.failure for r in compare(baseline(), now, tolerance) if r.failure]


def test_the_same_figures_pass() -> None:
    rows = compare(baseline(), baseline())
    assert [r.failure for r in rows] == [None] * 4
    assert sorted(r.ratio for r in rows if r.ratio is not None) == [1.0, 1.0]


def test_slower_within_the_tolerance_passes() -> None:
    now = baseline()
    now.times["core.gang3.cpu_ms"] = 290.0
    now.times["preemption.a.kep.decision_cpu_ms"] = 10.0  # faster is never a failure
    assert failures(now) == []


def test_slower_beyond_the_tolerance_fails_and_names_the_metric() -> None:
    now = baseline()
    now.times["core.gang3.cpu_ms"] = 310.0
    [failure] = failures(now)
    assert failure.startswith("core.gang3.cpu_ms: ")
    assert "3.10x" in failure
    assert failures(now, tolerance=4.0) == []


def test_a_tiny_time_is_compared_over_the_floor() -> None:
    base = Measured({"dra.x.cpu_ms": 1.0}, {})
    [row] = compare(base, Measured({"dra.x.cpu_ms": 4.0}, {}))
    assert row.failure is None and row.ratio == pytest.approx(1.0)
    [row] = compare(base, Measured({"dra.x.cpu_ms": 20.0}, {}))
    assert row.failure is not None and row.ratio == pytest.approx(20.0 / check.FLOOR_MS)


def test_a_changed_exact_figure_fails_however_small() -> None:
    now = baseline()
    now.exact["preemption.a.kep.victims"] = 1001
    [failure] = failures(now)
    assert failure == "preemption.a.kep.victims: 1001, the baseline has 1000 (must be equal)"


def test_a_metric_not_measured_fails() -> None:
    now = baseline()
    del now.times["core.gang3.cpu_ms"]
    del now.exact["core.gang3.scheduled"]
    assert failures(now) == [
        "core.gang3.cpu_ms: not measured",
        "core.gang3.scheduled: not measured",
    ]


def test_a_metric_the_baseline_lacks_fails() -> None:
    now = baseline()
    now.times["topology.rack.cpu_ms"] = 1.0
    now.exact["topology.rack.scheduled"] = 20
    assert failures(now) == [
        "topology.rack.cpu_ms: not in the baseline (re-record)",
        "topology.rack.scheduled: not in the baseline (re-record)",
    ]


def test_the_table_shows_every_metric_and_marks_failures() -> None:
    now = baseline()
    now.times["core.gang3.cpu_ms"] = 400.0
    lines = check.table(compare(baseline(), now))
    assert len(lines) == 2 + 4
    [slow] = [line for line in lines if line.startswith("core.gang3.cpu_ms")]
    assert slow.split()[1:] == ["100.0", "400.0", "4.00", "FAIL"]
    [same] = [line for line in lines if line.startswith("core.gang3.scheduled")]
    assert same.split()[1:] == ["300", "300", "="]


def test_restrict_keeps_the_named_benches() -> None:
    kept = check.restrict(baseline(), ["core"])
    assert list(kept.times) == ["core.gang3.cpu_ms"]
    assert list(kept.exact) == ["core.gang3.scheduled"]


def test_main_exits_1_naming_the_regression(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench-check.json"
    path.write_text(
        json.dumps(
            {
                "meta": {},
                "sizes": check.SIZES,
                "repeats": check.DEFAULT_REPEATS,
                "times": baseline().times,
                "exact": baseline().exact,
            }
        )
    )
    slow = baseline()
    slow.times["preemption.a.kep.decision_cpu_ms"] = 400.0

    def run_bench(name: str, repeats: int) -> tuple[Measured, float]:
        return check.restrict(slow, [name]), 0.1

    monkeypatch.setattr(check, "run_bench", run_bench)
    assert check.main(["--baseline", str(path), "--benches", "core"]) == 0
    assert check.main(["--baseline", str(path)]) == 1
    err = capsys.readouterr().err
    assert "preemption.a.kep.decision_cpu_ms: 400.0 ms CPU is 10.00x" in err
    assert check.main(["--baseline", str(path), "--tolerance", "20"]) == 0
    assert check.main(["--baseline", str(path), "--repeats", "2"]) == 2


def test_a_bench_that_fails_fails_the_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench-check.json"
    path.write_text(
        json.dumps(
            {
                "sizes": check.SIZES,
                "repeats": check.DEFAULT_REPEATS,
                "times": baseline().times,
                "exact": baseline().exact,
            }
        )
    )

    def run_bench(name: str, repeats: int) -> tuple[Measured, float]:
        if name == "preemption":
            raise check.BenchFailed("preemption: the bench failed: AssertionError", "Traceback")
        return check.restrict(baseline(), [name]), 0.1

    monkeypatch.setattr(check, "run_bench", run_bench)
    assert check.main(["--baseline", str(path)]) == 1
    err = capsys.readouterr().err
    assert "preemption: the bench failed: AssertionError" in err
    assert "preemption.a.kep.victims: not measured" in err
    assert check.main(["--baseline", str(path), "--record"]) == 1
    assert json.loads(path.read_text())["times"] == baseline().times


def test_the_committed_baseline_is_at_the_current_sizes() -> None:
    data = json.loads(check.BASELINE.read_text())
    assert data["sizes"] == check.SIZES
    assert data["repeats"] == check.DEFAULT_REPEATS
    assert {name.split(".")[0] for name in data["times"]} == set(check.BENCHES)
    assert all(value > 0 for value in data["times"].values())
