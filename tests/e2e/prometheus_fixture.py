"""A real Prometheus server for e2e tests, built from its Go module by `make test`
(`make prometheus-binaries`: hack/build-prometheus.sh, pinned in hack/prometheus/versions.env).

It runs as our own subprocess with its own configuration: it scrapes the given targets on
loopback every 2 seconds, evaluates the given rule files every second, keeps its TSDB in a
temporary directory and listens on a free loopback port. The binaries are taken from
hack/prometheus/bin (the link the make target leaves), else from PATH. A missing binary FAILS
the test with the command that builds it; it is never skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.processes import free_ports, log_tail, terminate, wait_ready

BUILT = Path(__file__).resolve().parents[2] / "hack" / "prometheus" / "bin"
INSTALL_HINT = "build it with `make prometheus-binaries` (`make test` does)"


def binary(name: str) -> str:
    """Path of `prometheus` or `promtool`, or fail the test saying how to build it."""
    built = BUILT / name
    if built.is_file():
        return str(built)
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not in {BUILT} nor on PATH: {INSTALL_HINT}", pytrace=False)
    return path


@dataclass
class Prometheus:
    process: subprocess.Popen[bytes]
    url: str
    dir: Path
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log, lines)

    def assert_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"prometheus exited with {self.process.returncode}:\n{self.log_tail()}")

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the `data` of a successful answer."""
        self.assert_alive()
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as exc:  # 400 for a bad query: show Prometheus' error
            body = json.loads(exc.read() or b"{}")
            raise AssertionError(f"GET {path} {params}: HTTP {exc.code}: {body}") from None
        assert body.get("status") == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result (vector or scalar as a one-element list)."""
        data = self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts

    def rules(self) -> list[dict[str, Any]]:
        groups = self.api("rules")["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def targets(self) -> list[dict[str, Any]]:
        targets: list[dict[str, Any]] = self.api("targets")["activeTargets"]
        return targets


def start(
    workdir: Path,
    *,
    targets: Sequence[str],
    rule_files: Sequence[Path] = (),
    job: str = "gangsched",
    timeout: float = 60.0,
) -> Prometheus:
    """Start Prometheus scraping `targets` (host:port, /metrics) every 2 seconds."""
    exe = binary("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    config = workdir / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                # A 2 s timeout: a 1 s one failed scrapes of a busy process on a loaded
                # machine, and two failed scrapes in a row fire GangschedDown (`for: 1s`).
                "global": {
                    "scrape_interval": "2s",
                    "scrape_timeout": "2s",
                    "evaluation_interval": "1s",
                },
                "rule_files": [str(path) for path in rule_files],
                "scrape_configs": [
                    {"job_name": job, "static_configs": [{"targets": list(targets)}]}
                ],
            }
        )
    )
    log = workdir / "prometheus.log"
    process = subprocess.Popen(
        [
            exe,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            "--storage.tsdb.retention.time=1h",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
            "--log.level=info",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    running = Prometheus(process, f"http://127.0.0.1:{port}", workdir, log)
    if wait_ready(f"{running.url}/-/ready", alive=running.assert_alive, timeout=timeout):
        return running
    stop(running)
    pytest.fail(f"prometheus was not ready within {timeout:.0f}s:\n{running.log_tail()}")


def stop(running: Prometheus) -> int | None:
    return terminate(running.process)


def promtool_check_rules(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("promtool"), "check", "rules", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
