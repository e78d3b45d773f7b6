"""bench.startup's reading of a launch: the times it takes from gangsched's log, and the
medians per tree."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bench.startup import Launch, LogTimes, log_times, summarize


def _line(event: str, at: float, **fields: object) -> str:
    stamp = datetime.fromtimestamp(at, tz=UTC).isoformat().replace("+00:00", "Z")
    return json.dumps({"event": event, "timestamp": stamp, **fields})


def test_log_times_are_the_sync_the_first_cycle_after_it_and_the_first_bind(tmp_path: Path) -> None:
    t_exec = 1_800_000_000.0
    log = tmp_path / "gangsched.log"
    log.write_text(
        "\n".join(
            [
                "not json: a warning from a library",
                _line("listed", t_exec + 0.9, resource="pods"),
                _line("cycle", t_exec + 1.0, group="early"),  # not after the sync: ignored
                _line("caches synced; scheduling", t_exec + 1.5, cpu_seconds=1.25),
                _line("cycle", t_exec + 1.625, group="bench/gang-0000"),
                _line("cycle", t_exec + 1.75, group="bench/gang-0001"),
                _line("bound", t_exec + 1.875, pod="bench/gang-0000-0"),
                _line("bound", t_exec + 2.0, pod="bench/gang-0000-1"),
            ]
        )
    )
    assert log_times(log, t_exec) == LogTimes(
        synced_s=1.5, synced_cpu_s=1.25, first_cycle_s=1.625, first_bound_s=1.875
    )


def test_log_times_without_a_sync_are_unknown(tmp_path: Path) -> None:
    log = tmp_path / "gangsched.log"
    log.write_text(_line("listed", 10.0) + "\n")
    assert log_times(log, 9.0) == LogTimes()


def test_summary_takes_medians_per_tree_and_skips_unknowns() -> None:
    base, change = Path("/base"), Path("/change")
    launches = [
        Launch(tree=base, first_bind_s=2.0, synced_s=1.5, first_cycle_s=1.6, load=[1.0]),
        Launch(tree=change, first_bind_s=1.0, synced_s=0.8, first_cycle_s=None, load=[3.0]),
        Launch(tree=base, first_bind_s=3.0, synced_s=2.5, first_cycle_s=2.6, load=[2.0]),
        Launch(tree=base, first_bind_s=None, synced_s=None, first_cycle_s=None, load=[4.0]),
    ]
    summary = summarize(launches, [base, change])
    assert summary[str(base)] == {
        "first_bind_s": 2.5,
        "first_bound_s": None,
        "synced_s": 2.0,
        "first_cycle_s": 2.1,
        "synced_cpu_s": None,
        "load_min": 1.0,
        "load_max": 4.0,
    }
    assert summary[str(change)]["first_bind_s"] == 1.0
    assert summary[str(change)]["first_cycle_s"] is None
