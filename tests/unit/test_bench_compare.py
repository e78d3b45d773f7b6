"""bench/compare's latency stages, control-plane cost and the tables that report them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.compare.latency import stages
from bench.compare.main import gangsched_overrides, scheduler_order
from bench.compare.measure import ApiCounts, MachineCpu, process_cpu_seconds
from bench.compare.report import markdown, summarize


def log_line(event: str, at: str, **fields: object) -> str:
    return json.dumps({"event": event, "timestamp": at, **fields}) + "\n"


def test_stages_split_a_gang_latency_at_the_decision_and_the_answers(tmp_path: Path) -> None:
    log = tmp_path / "gangsched.log"
    log.write_text(
        "kopf something unrelated\n"
        + log_line("cycle", "1970-01-01T00:00:10.5Z", group="bench/g", result="waiting")
        + log_line("cycle", "1970-01-01T00:00:11.25Z", group="bench/g", result="scheduled")
        + log_line("bound", "1970-01-01T00:00:11.5Z", pod="bench/p1", group="bench/g")
        + log_line("bound", "1970-01-01T00:00:11.75Z", pod="bench/p2", group="bench/g")
    )
    created = {"PodGroup/g": 9.0, "Pod/p1": 10.0, "Pod/p2": 11.0}
    seen = {"p1": 10.1, "p2": 11.125}
    bound = {"p1": 11.6, "p2": 12.0}
    out = stages({"g": ["p1", "p2"], "unbound": ["p3"]}, created, seen, bound, log)
    assert out == {
        "seen_p50_s": 0.125,
        "seen_p99_s": 0.125,
        "decided_p50_s": 0.25,
        "decided_p99_s": 0.25,
        "answered_p50_s": 0.5,
        "answered_p99_s": 0.5,
        "observed_p50_s": 0.25,
        "observed_p99_s": 0.25,
        "waiting_cycles_per_gang": 1.0,
    }
    # A kube-scheduler logs no decisions: only the watch's stage.
    assert set(stages({"g": ["p1", "p2"]}, created, seen, bound, None)) == {
        "seen_p50_s",
        "seen_p99_s",
    }


def test_cost_per_pod_from_two_readings(tmp_path: Path) -> None:
    before = ApiCounts(10, {}, {"apiserver": 5.0, "etcd": 1.0}, 100, 1024 * 100)
    after = ApiCounts(40, {}, {"apiserver": 8.0, "etcd": 1.5}, 400, 1024 * 400)
    cost = after.cost_since(before, pods=100)
    assert cost["apiserver_cpu_ms_per_pod"] == 30.0
    assert cost["etcd_cpu_ms_per_pod"] == 5.0
    assert cost["watch_events_per_pod"] == 3.0
    assert cost["watch_kib_per_pod"] == 3.0
    assert "apiserver_cpu_ms_per_pod_net" not in cost  # no idle rate measured

    # Net of the cluster at rest: 0.5 API server CPU s per s over the run's 4 s window.
    at_rest = ApiCounts(0, {}, {"apiserver": 3.0, "etcd": 0.9}, 0, 0, at=0.0)
    before.at, after.at = 4.0, 8.0
    idle = before.idle_rate(at_rest)
    assert idle == pytest.approx({"apiserver": 0.5, "etcd": 0.025})
    net = after.cost_since(before, pods=100, idle=idle)
    assert net["apiserver_cpu_ms_per_pod"] == 30.0
    assert net["apiserver_cpu_ms_per_pod_net"] == 10.0  # (3.0 - 0.5 * 4) / 100
    assert net["etcd_cpu_ms_per_pod_net"] == 4.0  # (0.5 - 0.025 * 4) / 100
    assert net["window_s"] == 4.0
    pid = tmp_path / "me.pid"
    pid.write_text(f"{os.getpid()}\n")
    assert process_cpu_seconds(pid) > 0
    assert process_cpu_seconds(tmp_path / "missing.pid") == 0.0


def report_meta(*, mode: str, rounds: int) -> dict[str, object]:
    """A results file's meta as `markdown` reads it: a quiet 2-CPU machine, no sizes."""
    return {
        "rounds": rounds,
        "load_min": 1.0,
        "load_max": 1.0,
        "load_median": 1.0,
        "cpus": 2,
        "mode": mode,
        "sizes": {},
    }


def test_report_has_coscheduling_ratios_cost_and_stages() -> None:
    def run(scheduler: str, latency: float, cpu_ms: float) -> dict[str, object]:
        return {
            "workload": "a",
            "scheduler": scheduler,
            "round": 1,
            "pods_per_s": 100.0,
            "latency_p50_s": latency,
            "latency_p99_s": 2 * latency,
            "apiserver_cpu_ms_per_pod": cpu_ms,
            "etcd_cpu_ms_per_pod": 1.0,
            "watch_events_per_pod": 20.0,
            "watch_kib_per_pod": 25.0,
            "api_requests_per_pod": 1.4,
            "requests_per_pod_POST": 1.33,
            "stage_seen_p50_s": 0.1,
            "stage_seen_p99_s": 0.3,
            "load_before": [1.0],
        }

    runs = [run("gangsched", 0.5, 10.0), run("coscheduling", 2.0, 20.0)]
    summary = summarize(runs)
    assert summary["ratios_coscheduling"]["a"]["latency_p50_s"] == 0.25
    assert summary["ratios_coscheduling"]["a"]["apiserver_cpu_ms_per_pod"] == 0.5
    assert summary["ratios"] == {}
    meta = report_meta(mode="streamed", rounds=1)
    text = markdown(summary, meta)
    assert "| **ratio vs coscheduling** | **1.00x** | 0.25 / 0.25 |" in text
    assert "| gangsched | 10.00 | 1.00 | 20.0 / 25.0 | 1.40 | POST 1.33 |" in text
    assert "| coscheduling | 0.10 / 0.30 | - / - | - / - | - / - | 2.00 / 4.00 |" in text
    assert "paced" not in text
    assert "Mode: streamed, paced at 100 objects/s" in markdown(summary, {**meta, "rate": 100.0})
    assert "paced" not in markdown(summary, {**meta, "rate": 100.0, "mode": "precreate"})
    assert "over the measured window" in text
    settled = summarize([{**r, "settled_s": 30.0} for r in runs])
    assert "until every bound pod runs" in markdown(settled, meta)
    netted = summarize([{**r, "apiserver_cpu_ms_per_pod_net": 4.0} for r in runs])
    shown = markdown(netted, meta)
    assert "| gangsched | 10.00 / 4.00 | 1.00 | 20.0 / 25.0 |" in shown
    assert "net of what the cluster at rest spends" in shown


def test_report_has_the_machines_cores_as_medians_of_the_rounds() -> None:
    """Each run's `machine` figures become medians per scheduler and a table of cores; results
    from before they were measured have no such table."""

    def run(scheduler: str, round_no: int, apiserver: float) -> dict[str, object]:
        return {
            "workload": "b",
            "scheduler": scheduler,
            "round": round_no,
            "pods_per_s": 100.0,
            "load_before": [1.0],
            "machine": {
                "busy_cores": 1.9,
                "steal_cores": 0.01 * round_no,
                "cores": {"kube-apiserver": apiserver, "etcd": 0.2, "scheduler": 0.5},
            },
        }

    runs = [run("gangsched", 1, 0.9), run("gangsched", 2, 1.0), run("gangsched", 3, 0.5)]
    runs.append(run("coscheduling", 1, 0.7))
    summary = summarize(runs)
    ours = summary["medians"]["b"]["gangsched"]
    assert ours["machine_cores_kube-apiserver"] == 0.9
    assert ours["machine_steal_cores"] == 0.02
    meta = report_meta(mode="precreate", rounds=3)
    text = markdown(summary, meta)
    assert "| gangsched | 1.90 | 0.02 | 0.90 | 0.20 | - | - | 0.50 | - |" in text
    assert "| coscheduling | 1.90 | 0.01 | 0.70 | 0.20 | - | - | 0.50 | - |" in text
    before = summarize([{k: v for k, v in r.items() if k != "machine"} for r in runs])
    assert "machine's cores" not in markdown(before, meta)


def test_gangsched_config_overrides_are_dotted_fields_with_yaml_values() -> None:
    assert gangsched_overrides(
        ["gangHealth.protectRunningGangs=false", "bindConcurrency=64", "gangHealth.grace=1.5"]
    ) == {"gangHealth": {"protectRunningGangs": False, "grace": 1.5}, "bindConcurrency": 64}
    for bad in ("bindConcurrency", "=3"):
        with pytest.raises(SystemExit, match="FIELD=VALUE"):
            gangsched_overrides([bad])


def test_machine_cpu_over_a_window_in_busy_and_stolen_cores(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks
    stat.write_text("cpu  1000 0 500 8000 100 0 0 50 0 0\ncpu0 1 2 3\n")
    before = MachineCpu.read(stat)
    stat.write_text("cpu  1100 0 550 8030 100 0 0 70 0 0\ncpu0 1 2 3\n")
    after = MachineCpu.read(stat)
    assert before is not None and after is not None
    # 200 ticks in all: 150 busy, 20 stolen, 30 idle; over a window as long as 100 ticks
    # (two cores' worth), so 1.5 busy cores and 0.2 stolen.
    hz = os.sysconf("SC_CLK_TCK")
    window = MachineCpu(
        at=before.at + 100 / hz, busy=after.busy, steal=after.steal, total=after.total
    )
    assert window.since(before) == {"busy_cores": 1.5, "steal_cores": 0.2}
    assert MachineCpu.read(tmp_path / "missing") is None


def test_each_scheduler_leads_a_round_in_turn() -> None:
    """Rounds rotate the order, numbered from the round itself (so --first-round resumes it):
    over as many rounds as schedulers, each runs first once."""
    names = ["gangsched", "kube-scheduler", "coscheduling"]
    orders = [scheduler_order(names, r) for r in (1, 2, 3, 4)]
    assert orders[0] == names
    assert [o[0] for o in orders[:3]] == names
    assert orders[3] == orders[0]
    assert all(sorted(o) == sorted(names) for o in orders)
    assert scheduler_order(names, 5) == scheduler_order(names[1:] + names[:1], 1)
    assert scheduler_order([], 2) == []
