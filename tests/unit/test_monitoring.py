"""deploy/monitoring: the derived objects are up to date, and every metric the dashboard and
the alert rules use is one gangsched exports (tests/e2e/test_observability.py runs them all
on a real Prometheus)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest

from gangsched.edge.metrics import Metrics

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
METRIC = re.compile(r"\b((?:gangsched|scheduler|process)_[a-z_]+)\b")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def exported() -> dict[str, str]:
    """Metric name -> type, as `gangsched run` serves them."""
    text = generate_latest(Metrics().registry).decode()
    return {
        line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE")
    }


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return data


def exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load((MONITORING / "prometheus-rules.yaml").read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def unknown_metrics(expr: str, types: dict[str, str]) -> list[str]:
    missing = []
    for name in METRIC.findall(expr):
        if name in types:
            continue
        base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s)), "")
        if types.get(base) != "histogram":
            missing.append(name)
    return missing


def test_derived_objects_are_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(MONITORING / "sync.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_prometheus_rule_and_config_map_carry_the_sources() -> None:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == yaml.safe_load((MONITORING / "prometheus-rules.yaml").read_text())
    config_map = yaml.safe_load((MONITORING / "grafana-dashboard-configmap.yaml").read_text())
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["gangsched.json"]) == dashboard()


def test_dashboard_and_rules_use_only_exported_metrics() -> None:
    types = exported()
    for expr in exprs() + [rule["expr"] for rule in rules()]:
        assert not unknown_metrics(expr, types), expr


def test_dashboard_covers_the_issue_list() -> None:
    text = "\n".join(exprs())
    for metric in (
        "gangsched_pods_bound_total",
        "scheduler_podgroup_schedule_attempts_total",
        "scheduler_podgroup_scheduling_attempt_duration_seconds_bucket",
        "scheduler_pending_pods",
        "scheduler_waiting_gang_group_number",
        "scheduler_workload_preemption_attempts_total",
        "scheduler_workload_preemption_victims",
        "scheduler_preemption_evaluation_duration_seconds_bucket",
        "gangsched_binding_duration_seconds_bucket",
        "gangsched_binding_errors_total",
        "gangsched_informer_relists_total",
        "gangsched_leader",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ):
        assert metric in text, metric
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"


def test_every_alert_has_severity_summary_and_for() -> None:
    names = [rule["alert"] for rule in rules()]
    assert len(names) == len(set(names))
    for rule in rules():
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"]
        assert rule["for"]


def test_service_monitor_selects_the_metrics_port() -> None:
    monitor = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def samples(metrics: Metrics, name: str) -> dict[tuple[str, ...], float]:
    text = generate_latest(metrics.registry).decode()
    out = {}
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            labels = tuple(re.findall(r'="([^"]*)"', line.split("}")[0] if "{" in line else ""))
            out[labels] = float(line.rsplit(" ", 1)[1])
    return out


def test_pending_group_series_follow_the_pending_groups() -> None:
    m = Metrics()
    m.set_pending_groups({("a", "x"): (12.0, 5), ("a", "y"): (3.0, None)})
    assert samples(m, "gangsched_podgroup_pending_seconds") == {("a", "x"): 12.0, ("a", "y"): 3.0}
    assert samples(m, "gangsched_podgroup_schedule_timeout_seconds") == {("a", "x"): 5.0}
    m.set_pending_groups({("a", "y"): (4.0, 30)})
    assert samples(m, "gangsched_podgroup_pending_seconds") == {("a", "y"): 4.0}
    assert samples(m, "gangsched_podgroup_schedule_timeout_seconds") == {("a", "y"): 30.0}
    m.set_pending_groups({})
    assert not samples(m, "gangsched_podgroup_pending_seconds")
    assert not samples(m, "gangsched_podgroup_schedule_timeout_seconds")


def test_known_label_values_exist_before_the_first_event() -> None:
    m = Metrics()
    assert set(samples(m, "gangsched_binding_errors_total")) == {
        ("conflict",),
        ("not_found",),
        ("other",),
    }
    assert ("cannot_help",) in samples(m, "scheduler_workload_preemption_attempts_total")


def test_every_preemption_evaluation_is_timed() -> None:
    from gangsched.core.scheduler import PreemptionOutcome
    from gangsched.edge.operator import TimedPreemptor

    class Inner:
        def preempt(self, *_: object) -> PreemptionOutcome:
            return PreemptionOutcome(started=False, message="preemption cannot help: x")

    m = Metrics()
    timed = TimedPreemptor(Inner(), m)
    timed.preempt(None, None, None, None)  # type: ignore[arg-type]
    count = samples(m, "scheduler_preemption_evaluation_duration_seconds_count")
    assert count == {(): 1.0}
