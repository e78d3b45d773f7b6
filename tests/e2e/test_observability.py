"""The dashboard and the alert rules, proven on a real Prometheus scraping `gangsched run`.

One workload runs for the whole module on its own kwok nodes: a gang that fits, a gang that
waits for members, a gang that needs preemption (two low-priority victims) and a gang that can
never fit (its scheduleTimeoutSeconds is 5). A Prometheus server (tests/e2e/prometheus_fixture)
scrapes gangsched every 2 seconds and evaluates deploy/monitoring/prometheus-rules.yaml with
every `for:` cut to 1s (6s for GangschedDown). Then: promtool accepts the rules, every target of
every dashboard panel returns data, the pending-too-long alert fires for the gang that cannot fit
(and only for it), and the scheduler-health alerts stay quiet.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO_ROOT, Cluster
from .k8s import Kube, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .prometheus_fixture import Prometheus, promtool_check_rules
from .prometheus_fixture import start as start_prometheus
from .prometheus_fixture import stop as stop_prometheus
from .scene import Scene

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

MONITORING = REPO_ROOT / "deploy" / "monitoring"
RULES = MONITORING / "prometheus-rules.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
HIGH, LOW = "obs-high", "obs-low"
PENDING_ALERT = "GangschedPodGroupPendingTooLong"

#: Grafana's variables, as an "All" selection and a 1-minute rate window would expand them.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "5m",
    "$job": ".*",
    "$instance": ".*",
    "$namespace": ".*",
}


def rules_for_test(workdir: Path) -> Path:
    """The shipped rules with every `for:` cut to 1s (thresholds stay as shipped: the gang
    that cannot fit sets its own scheduleTimeoutSeconds), GangschedDown's to 6s: one scrape
    that timed out on a loaded machine leaves no series for a scrape interval, which is not
    gangsched being down (its 5m absorbs that in production)."""
    data = yaml.safe_load(RULES.read_text())
    for group in data["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "6s" if rule["alert"] == "GangschedDown" else "1s"
    path = workdir / "rules-for-test.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def expand(expr: str) -> str:
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    assert "$" not in expr, f"unexpanded Grafana variable in {expr}"
    return expr


def dashboard_targets() -> list[tuple[str, str]]:
    """(panel title / refId, expanded expr) for every target of every panel."""
    dashboard = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((f"{panel['title']} / {target['refId']}", expand(target["expr"])))
    return out


# ------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("observability")


@pytest.fixture(scope="module")
def prometheus(gangsched: Gangsched, workdir: Path) -> Iterator[Prometheus]:  # noqa: F811
    target = gangsched.metrics_url.removeprefix("http://")
    running = start_prometheus(
        workdir / "prometheus", targets=[target], rule_files=[rules_for_test(workdir)]
    )
    try:
        yield running
    finally:
        code = stop_prometheus(running)
        assert code == 0, f"prometheus exited {code}:\n{running.log_tail()}"


async def populate(workload: Scene, sched: Gangsched) -> None:
    """Gangs that fit, wait, preempt and cannot fit, on two 4-CPU nodes of their own."""
    await workload.start(wait_nodes_ready=True)
    # Victims: 3 of 4 CPUs on each node, placed by "another scheduler".
    await workload.victims_on_every_node("3", priority_class=LOW)
    # Fits whole in what is left (0.5 CPU per node); low priority, so it is no victim
    # candidate cheaper than the victims themselves.
    await workload.gang("fits", 2, "500m", priority_class_name=LOW)
    await workload.wait_bound(["fits-0", "fits-1"], timeout=90)
    # Kept in one domain of the hostname label (one node): the topology metrics and panels.
    await workload.group("racked", 2, topology={"required": "kubernetes.io/hostname"})
    for i in range(2):
        await workload.create_pod(
            workload.pod(f"racked-{i}", "100m", "racked", priority_class_name=LOW)
        )
    await workload.wait_bound(["racked-0", "racked-1"], timeout=90)
    # Waits for members: 1 of minMember 3.
    await workload.gang("short", 1, "100m", min_member=3, priority_class_name=LOW)
    # Can never fit (8 CPUs per pod on 4-CPU nodes): unschedulable, preemption cannot help.
    await workload.group("stuck", 2, scheduleTimeoutSeconds=5)
    for i in range(2):
        await workload.create_pod(
            workload.pod(f"stuck-{i}", "8", "stuck", priority_class_name=HIGH)
        )
    # Needs both victims gone: preemption evicts them and the gang binds.
    await workload.gang("hp", 2, "3", priority_class_name=HIGH)
    sched.assert_alive()
    await workload.wait_bound(["hp-0", "hp-1"], timeout=120)
    pods = await workload.pods()
    assert "victim-0" not in pods or pods["victim-0"]["metadata"].get("deletionTimestamp")


@pytest.fixture(scope="module")
async def workload(
    cluster: Cluster,
    gangsched: Gangsched,  # noqa: F811
    prometheus: Prometheus,
) -> AsyncIterator[Scene]:
    """Runs while Prometheus scrapes (it is started first)."""
    kube = await Kube.from_kubeconfig(cluster.kubeconfig)
    load = Scene(kube, "obs", priority_classes={HIGH: 1_000_000, LOW: 1_000})
    try:
        await populate(load, gangsched)
        yield load
    finally:
        try:
            await load.stop()
        finally:
            await kube.close()


async def poll(check: Any, *, timeout: float, what: str, interval: float = 1.0) -> Any:
    """Run the blocking `check` off the event loop until it returns something truthy."""
    return await wait_for(
        lambda: asyncio.to_thread(check), timeout=timeout, interval=interval, what=what
    )


# ---------------------------------------------------------------------------------- tests
async def test_promtool_accepts_the_shipped_and_the_test_rules(workdir: Path) -> None:
    for path in (RULES, rules_for_test(workdir)):
        proc = await asyncio.to_thread(promtool_check_rules, path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert re.search(r"SUCCESS: \d+ rules found", proc.stdout), proc.stdout


async def test_prometheus_scrapes_gangsched_and_loads_every_rule(
    prometheus: Prometheus, workload: Scene
) -> None:
    def scraped() -> bool:
        targets = prometheus.targets()
        return bool(targets) and all(t["health"] == "up" for t in targets)

    await poll(scraped, timeout=60, what="gangsched target up")
    shipped = {
        rule["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for rule in g["rules"]
    }

    def evaluated() -> list[dict[str, Any]] | None:
        rules = prometheus.rules()
        ok = {rule["name"] for rule in rules if rule.get("health") == "ok"}
        return rules if ok >= shipped else None

    rules = await poll(evaluated, timeout=60, what="every rule evaluated without error")
    assert {rule["name"] for rule in rules} == shipped


async def test_every_dashboard_query_returns_data(prometheus: Prometheus, workload: Scene) -> None:
    targets = dashboard_targets()
    assert len(targets) >= 30
    empty: list[str] = []

    def all_answer() -> bool:
        empty[:] = [f"{name}: {expr}" for name, expr in targets if not prometheus.query(expr)]
        return not empty

    try:
        await poll(all_answer, timeout=120, interval=2.0, what="data for every panel")
    except TimeoutError:
        pytest.fail("dashboard targets without data:\n" + "\n".join(empty), pytrace=False)
    # The data is the workload's: its gangs were bound, its preemption counted. Prometheus
    # holds what its last scrape saw, which may predate the workload's last steps: poll until
    # the counters reach what the workload did (they only grow).
    minimum = {
        "sum(gangsched_pods_bound_total)": 4,
        'sum(scheduler_workload_preemption_attempts_total{result="started"})': 1,
        "sum(scheduler_workload_preemption_victims_sum)": 2,
        # "hp" (started) and "stuck" (cannot help)
        "sum(scheduler_preemption_evaluation_duration_seconds_count)": 2,
    }
    short: dict[str, str] = {}

    def counted() -> bool:
        short.clear()
        for expr, least in minimum.items():
            result = prometheus.query(expr)
            value = float(result[0]["value"][1]) if result else float("nan")
            if not value >= least:
                short[expr] = f"{value} < {least}"
        return not short

    try:
        await poll(counted, timeout=60, what="the workload's counts")
    except TimeoutError:
        pytest.fail(f"counters short of the workload: {short}", pytrace=False)
    pending_groups: set[str] = set()

    def pending() -> bool:
        result = prometheus.query(
            f'gangsched_podgroup_pending_seconds{{namespace="{workload.ns}"}}'
        )
        pending_groups.clear()
        pending_groups.update(r["metric"]["podgroup"] for r in result)
        return pending_groups >= {"stuck", "short"}

    try:
        await poll(pending, timeout=60, what="stuck and short pending")
    except TimeoutError:
        pytest.fail(f"pending PodGroups: {pending_groups}", pytrace=False)
    assert "fits" not in pending_groups


async def test_a_gang_pending_past_its_timeout_fires_the_alert(
    prometheus: Prometheus, workload: Scene
) -> None:
    def firing() -> list[dict[str, Any]]:
        return [
            alert
            for alert in prometheus.alerts()
            if alert["labels"].get("alertname") == PENDING_ALERT
            and alert["labels"].get("namespace") == workload.ns
            and alert["state"] == "firing"
        ]

    alerts = await poll(firing, timeout=90, what=f"{PENDING_ALERT} firing")
    assert {a["labels"]["podgroup"] for a in alerts} == {"stuck"}, alerts
    [alert] = alerts
    assert alert["labels"]["severity"] == "warning"
    assert f"gangsched explain {workload.ns}/stuck" in alert["annotations"]["description"]
    assert float(alert["value"]) > 5  # pending seconds, past scheduleTimeoutSeconds
    # "short" waits for members but is far from the 15-minute default: not firing.


async def test_scheduler_health_alerts_stay_quiet(prometheus: Prometheus, workload: Scene) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # a few evaluations with the workload in place
        await asyncio.sleep(1)
    quiet = {"GangschedDown", "GangschedNoLeader", "GangschedSchedulingStalled"}
    firing = [
        a["labels"]["alertname"]
        for a in await asyncio.to_thread(prometheus.alerts)
        if a["labels"]["alertname"] in quiet and a["state"] == "firing"
    ]
    assert not firing, firing
    leader = await asyncio.to_thread(prometheus.query, "max(gangsched_leader)")
    assert float(leader[0]["value"][1]) == 1
