"""bench/compare's launch of Coscheduling as installed: scheduler-plugins' controller beside
the scheduler, started and stopped with it, its requests counted in the column."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from bench.compare import schedulers
from bench.compare.measure import podgroup_phases
from bench.compare.schedulers import (
    CO_CONTROLLER,
    CO_PODGROUP_API,
    Launch,
    client_requests,
    controller_launch,
    controller_synced,
    requests_by_verb,
    start,
)
from bench.harness import SchedulerProcess
from gangsched.edge.kube import Kube

CLIENT_GO_SCRAPE = """\
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 4
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 10
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 7
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 1
"""
CONTROLLER_SCRAPE = """\
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 2000
"""
GANGSCHED_SCRAPE = """\
gangsched_api_requests_total{verb="POST",resource="pods/binding",code="201"} 3000
gangsched_api_requests_total{verb="PATCH",resource="podgroups/status",code="200"} 1000
rest_client_requests_total{method="GET"} 99
"""


def test_controller_launch_is_the_charts_command_on_loopback_ports(tmp_path: Path) -> None:
    launch = controller_launch(
        binary=Path("/cache/bin") / CO_CONTROLLER,
        kubeconfig=tmp_path / "controller.kubeconfig",
        run_dir=tmp_path,
        metrics_port=20001,
        probe_port=20002,
    )
    assert launch.argv == [
        f"/cache/bin/{CO_CONTROLLER}",
        "--kubeconfig",
        str(tmp_path / "controller.kubeconfig"),
        "--metricsAddr",
        "127.0.0.1:20001",
        "--probeAddr",
        "127.0.0.1:20002",
    ]
    # The chart leaves leader election off (its default): no flag turns it on.
    assert "--enableLeaderElection" not in launch.argv
    assert launch.metrics_url == "http://127.0.0.1:20001"
    assert launch.ready_url == "http://127.0.0.1:20002/readyz"
    assert launch.log == tmp_path / f"{CO_CONTROLLER}.log"
    assert launch.controller is None


def test_requests_by_verb_reads_client_go_or_gangsched_counters() -> None:
    assert requests_by_verb(CLIENT_GO_SCRAPE, gangsched=False) == {
        "GET": 4.0,
        "POST": 10.0,
        "PATCH": 8.0,
    }
    assert requests_by_verb(GANGSCHED_SCRAPE, gangsched=True) == {
        "POST": 3000.0,
        "PATCH": 1000.0,
    }


def test_coscheduling_requests_include_its_controllers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scrapes = {"https://scheduler": CLIENT_GO_SCRAPE, "http://controller": CONTROLLER_SCRAPE}
    monkeypatch.setattr(
        schedulers, "scheduler_metrics_text", lambda launch: scrapes[launch.metrics_url]
    )
    controller = Launch([], tmp_path / "c.log", "http://controller", "", CO_CONTROLLER)
    alone = Launch([], tmp_path / "s.log", "https://scheduler", "", "coscheduling")
    assert client_requests(alone) == {"GET": 4.0, "POST": 10.0, "PATCH": 8.0}
    beside = Launch(
        [], tmp_path / "s.log", "https://scheduler", "", "coscheduling", controller=controller
    )
    assert client_requests(beside) == {"GET": 7.0, "POST": 10.0, "PATCH": 2008.0}


def test_controller_counts_as_synced_once_its_podgroup_workers_start(tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    assert not controller_synced(log)  # not written yet
    log.write_text(
        'I1128 "msg"="Starting EventSource" "controller"="podgroup"\n'
        'I1128 "msg"="Starting workers" "controller"="elasticquota" "worker count"=1\n'
    )
    assert not controller_synced(log)
    with log.open("a") as out:
        out.write('I1128 "msg"="Starting workers" "controller"="podgroup" "worker count"=1\n')
    assert controller_synced(log)


def sleeper(tmp_path: Path, name: str, *, controller: Launch | None = None) -> Launch:
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    return Launch(argv, tmp_path / f"{name}.log", "", "", name, controller=controller)


def test_start_runs_the_controller_beside_the_scheduler_and_stops_both(tmp_path: Path) -> None:
    launch = sleeper(tmp_path, "coscheduling", controller=sleeper(tmp_path, CO_CONTROLLER))
    running = start(launch)
    try:
        assert running.controller is not None
        assert running.controller.process.pid != running.process.pid
        assert running.controller.log == tmp_path / f"{CO_CONTROLLER}.log"
        running.alive()  # both up: no error
    finally:
        running.stop()
    assert running.process.returncode is not None
    assert running.controller.process.returncode is not None


def test_a_controller_that_exits_fails_the_run(tmp_path: Path) -> None:
    controller = Launch(
        [sys.executable, "-c", "print('no kind ElasticQuota')"],
        tmp_path / f"{CO_CONTROLLER}.log",
        "",
        "",
        CO_CONTROLLER,
    )
    running = start(sleeper(tmp_path, "coscheduling", controller=controller))
    try:
        assert running.controller is not None
        running.controller.process.wait(timeout=30)
        with pytest.raises(RuntimeError, match="no kind ElasticQuota"):
            running.alive()
    finally:
        running.stop()


def test_other_schedulers_start_alone(tmp_path: Path) -> None:
    running = start(sleeper(tmp_path, "kube-scheduler"))
    try:
        assert running.controller is None
        assert running.controller_cpu_seconds() == 0.0
    finally:
        running.stop()


class ListingKube:
    """Answers the one LIST podgroup_phases makes, and remembers its path."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.paths: list[str] = []

    async def get(self, path: str) -> dict[str, Any]:
        self.paths.append(path)
        return {"items": self.items}


def test_podgroup_phases_count_how_far_the_status_writer_got() -> None:
    kube = ListingKube(
        [
            {"status": {"phase": "Running", "running": 3}},
            {"status": {"phase": "Pending"}},
            {"status": {"phase": "Pending"}},
            {"metadata": {"name": "never-written"}},
        ]
    )
    phases = asyncio.run(podgroup_phases(cast(Kube, kube), CO_PODGROUP_API))
    assert phases == {"Running": 1, "Pending": 2, "": 1}
    assert kube.paths == ["/apis/scheduling.x-k8s.io/v1alpha1/namespaces/bench/podgroups"]


def test_a_scheduler_that_cannot_start_leaves_no_controller_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[SchedulerProcess] = []
    real = schedulers.exec_process

    def recording(launch: Launch) -> SchedulerProcess:
        process = real(launch)
        started.append(process)
        return process

    monkeypatch.setattr(schedulers, "exec_process", recording)
    missing = Launch(
        [str(tmp_path / "no-such-scheduler")],
        tmp_path / "s.log",
        "",
        "",
        "coscheduling",
        controller=sleeper(tmp_path, CO_CONTROLLER),
    )
    with pytest.raises(OSError):
        start(missing)
    assert len(started) == 1  # the controller
    assert started[0].process.poll() is not None
