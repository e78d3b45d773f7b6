"""Launching gangsched, kube-scheduler or scheduler-plugins' Coscheduling for one run:
everything but the exec is prepared beforehand, so the clock that starts at exec measures the
scheduler and nothing else. Coscheduling runs as its chart installs it: the scheduler and
scheduler-plugins' controller (which writes the PodGroups' status), started and stopped
together, both counted in its column."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.compare.cluster import CO_CONTROLLER_SA, KS_SA, Env
from bench.compare.measure import samples
from bench.compare.workloads import CO_NAME, KS_NAME, KUBE_SCHEDULERS
from bench.harness import (
    HACK,
    ROOT,
    SchedulerProcess,
)
from devtools import gangsched as gangsched_process
from devtools.processes import free_ports, http_get, wait_ready_async

#: hack/clients/versions.env's names for scheduler-plugins' scheduler and controller (one
#: module, two binaries); each is built into <name>-<version>/bin/ with the module's src/.
CO_SCHEDULER = "scheduler-plugins"
CO_CONTROLLER = "scheduler-plugins-controller"
ELASTIC_QUOTA_CRD = "src/config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml"
ELASTIC_QUOTA_NAME = "elasticquotas.scheduling.x-k8s.io"
#: The controller's log line once its PodGroup reconciler's caches have synced (controller-
#: runtime's "Starting workers"): its readyz answers before that.
CONTROLLER_SYNCED = ("Starting workers", '"podgroup"')
#: The PodGroups that controller writes the status of (Coscheduling's workload's).
CO_PODGROUP_API = "scheduling.x-k8s.io/v1alpha1"


def write_kubeconfig(env: Env, path: Path, token: str, user: str) -> None:
    gangsched_process.token_kubeconfig(
        path, server=env.server, ca_data=env.ca.read_bytes(), token=token, user=user
    )


def sa_token(env: Env, namespace: str, name: str) -> str:
    return env.cluster.kubectl("-n", namespace, "create", "token", name, "--duration", "4h").strip()


@dataclass
class Launch:
    """A scheduler ready to start: everything but the exec is done beforehand, so the clock
    that starts at exec measures the scheduler and nothing else."""

    argv: list[str]
    log: Path
    metrics_url: str
    ready_url: str
    kind: str
    #: Coscheduling: scheduler-plugins' controller, started beside the scheduler.
    controller: Launch | None = None


def prepare_launch(
    env: Env, scheduler: str, run_dir: Path, *, gangsched_config: dict[str, Any] | None = None
) -> Launch:
    run_dir.mkdir(parents=True, exist_ok=True)
    if scheduler.startswith("gangsched"):
        kubeconfig = run_dir / "gangsched.kubeconfig"
        write_kubeconfig(
            env, kubeconfig, sa_token(env, "gangsched-system", "gangsched"), "gangsched"
        )
        # Tuned as the Go peers are below (client QPS and burst 5000, every bind its own
        # goroutine, a new HTTP/2 connection whenever one carries the 100 streams the API
        # server allows): 256 binds in flight, on as many HTTP/2 streams (three connections,
        # gangsched.edge.reqwest_transport.Lanes). Against 64, side by side on uvloop and
        # HTTP/1.1 (issue 30), precreated (b) bound 181 / 214 / 224 / 236 pods/s against 171 /
        # 174 / 175 / 224.
        settings = gangsched_process.listen_config(
            bindConcurrency=256, leaderElection={"enabled": False}
        )
        for key, value in (gangsched_config or {}).items():
            current = settings.get(key)
            settings[key] = {**current, **value} if isinstance(current, dict) else value
        config = run_dir / "gangsched.yaml"
        config.write_text(yaml.safe_dump(settings))
        argv = gangsched_process.argv(kubeconfig=kubeconfig, config=config)
        # As installed (pip compiles a wheel's modules, the image ships them compiled): a
        # checkout run under PYTHONDONTWRITEBYTECODE compiled every gangsched module again
        # at each start, 3% of a precreated run's samples (py-spy, issue 30).
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(ROOT / "gangsched")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        url = gangsched_process.metrics_url(settings)
        return Launch(argv, run_dir / "gangsched.log", url, f"{url}/readyz", "gangsched")
    (metrics,) = free_ports(1)
    kubeconfig = run_dir / "kube-scheduler.kubeconfig"
    write_kubeconfig(env, kubeconfig, sa_token(env, *KS_SA), KS_SA[1])
    config = run_dir / "kube-scheduler.yaml"
    # hack/baseline-scheduler.sh's configuration, but authenticating as its own ServiceAccount
    # so its requests are told apart from the harness's and kwok's (both admin).
    connection = f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
"""
    if scheduler == "coscheduling":
        config.write_text(connection + COSCHEDULING_PROFILE)
        binary = scheduler_plugins_build(CO_SCHEDULER) / "bin" / "kube-scheduler-plugins"
        # Built on Kubernetes 1.33's libraries: the 1.37 gates are unknown to it, and its DRA
        # plugin would list resource.k8s.io/v1beta1, which this API server does not serve.
        gates = "DynamicResourceAllocation=false"
    else:
        config.write_text(connection + f"profiles:\n- schedulerName: {KS_NAME}\n")
        binary = env.cluster.bins / "kube-scheduler"
        gates = env.feature_gates()
    argv = [
        str(binary),
        "--config",
        str(config),
        "--authorization-always-allow-paths",
        "/healthz,/readyz,/livez,/metrics",
        "--bind-address",
        "127.0.0.1",
        "--secure-port",
        str(metrics),
        "--feature-gates",
        gates,
        "--v",
        "1",
    ]
    url = f"https://127.0.0.1:{metrics}"
    launch = Launch(argv, run_dir / f"{scheduler}.log", url, f"{url}/readyz", scheduler)
    if scheduler == "coscheduling":
        launch.controller = prepare_controller(env, run_dir)
    return launch


def prepare_controller(env: Env, run_dir: Path) -> Launch:
    """scheduler-plugins' controller as its chart deploys it (no arguments but leader election,
    off by default), with a kubeconfig of its own ServiceAccount and its metrics and probe
    servers on free loopback ports."""
    build = scheduler_plugins_build(CO_CONTROLLER)
    # Its ElasticQuota reconciler watches a kind this cluster does not serve otherwise (the
    # chart installs both CRDs): without it the manager's caches never sync and it exits.
    env.cluster.kubectl("apply", "-f", str(build / ELASTIC_QUOTA_CRD))
    env.cluster.kubectl(
        "wait", "--for", "condition=Established", "--timeout=60s", "crd/" + ELASTIC_QUOTA_NAME
    )
    kubeconfig = run_dir / f"{CO_CONTROLLER}.kubeconfig"
    write_kubeconfig(env, kubeconfig, sa_token(env, *CO_CONTROLLER_SA), CO_CONTROLLER_SA[1])
    metrics, probe = free_ports(2)
    return controller_launch(
        binary=build / "bin" / CO_CONTROLLER,
        kubeconfig=kubeconfig,
        run_dir=run_dir,
        metrics_port=metrics,
        probe_port=probe,
        kind=build.name,
    )


def controller_launch(
    *,
    binary: Path,
    kubeconfig: Path,
    run_dir: Path,
    metrics_port: int,
    probe_port: int,
    kind: str = CO_CONTROLLER,
) -> Launch:
    """The controller's command line: the chart's (leader election off), its kubeconfig, and
    its controller-runtime metrics and probe servers (plain HTTP) on loopback."""
    argv = [
        str(binary),
        "--kubeconfig",
        str(kubeconfig),
        "--metricsAddr",
        f"127.0.0.1:{metrics_port}",
        "--probeAddr",
        f"127.0.0.1:{probe_port}",
    ]
    return Launch(
        argv,
        run_dir / f"{CO_CONTROLLER}.log",
        f"http://127.0.0.1:{metrics_port}",
        f"http://127.0.0.1:{probe_port}/readyz",
        kind,
    )


#: scheduler-plugins' documented Coscheduling profile (manifests/coscheduling/
#: scheduler-config.yaml of the module: Coscheduling at every extension point, its queue sort
#: replacing the default, a 10 s permit wait), under its own scheduler name.
COSCHEDULING_PROFILE = f"""profiles:
- schedulerName: {CO_NAME}
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
"""


def scheduler_plugins_build(name: str) -> Path:
    """The directory hack/build-clients.sh built NAME into (bin/, src/), from its Go module
    (cached; a missing one is built, which takes minutes the first time)."""
    proc = subprocess.run(
        [str(HACK / "build-clients.sh"), name],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"hack/build-clients.sh {name} failed:\n{proc.stderr[-2000:]}")
    root = Path(proc.stdout.strip().splitlines()[-1])
    built = sorted(root.glob(f"{name}-v*/BUILT"))
    if not built:
        raise RuntimeError(f"hack/build-clients.sh left no {name} build under {root}")
    return built[-1].parent


@dataclass
class Running(SchedulerProcess):
    """The scheduler's process and, for Coscheduling, its controller's: either one exiting
    fails the run, and both are stopped together. Its CPU and memory are the scheduler's."""

    controller: SchedulerProcess | None = field(default=None)

    def controller_cpu_seconds(self) -> float:
        return self.controller.cpu_seconds() if self.controller is not None else 0.0

    def alive(self) -> None:
        super().alive()
        if self.controller is not None:
            self.controller.alive()

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if self.controller is not None:
                self.controller.stop()


def exec_process(launch: Launch) -> SchedulerProcess:
    process = subprocess.Popen(
        launch.argv, stdout=launch.log.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT
    )
    return SchedulerProcess(process, launch.metrics_url, launch.log)


def start(launch: Launch) -> Running:
    """The controller, if any, then the scheduler, both on the run's clock."""
    controller = exec_process(launch.controller) if launch.controller is not None else None
    try:
        scheduler = exec_process(launch)
    except BaseException:
        if controller is not None:
            controller.stop()  # not left running when the scheduler cannot be started
        raise
    return Running(scheduler.process, scheduler.metrics_url, scheduler.log, controller)


async def wait_ready(running: Running, launch: Launch, timeout: float = 180) -> float:
    """The wall-clock time the scheduler answered its readiness URL and, for Coscheduling, its
    controller its own and had its PodGroup caches synced (whichever came last)."""
    deadline = time.monotonic() + timeout
    if not await wait_ready_async(launch.ready_url, alive=running.alive, timeout=timeout):
        raise TimeoutError(f"{launch.kind} not ready")
    controller = launch.controller
    if controller is None:
        return time.time()
    left = max(deadline - time.monotonic(), 1.0)
    if not await wait_ready_async(controller.ready_url, alive=running.alive, timeout=left):
        raise TimeoutError(f"{controller.kind} not ready")
    while time.monotonic() < deadline:
        running.alive()
        if controller_synced(controller.log):
            return time.time()
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{controller.kind}: PodGroup caches not synced (see {controller.log})")


def controller_synced(log: Path) -> bool:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return False
    return any(all(part in line for part in CONTROLLER_SYNCED) for line in text.splitlines())


def scheduler_metrics_text(launch: Launch) -> str:
    try:
        return http_get(f"{launch.metrics_url}/metrics", timeout=10)[1]
    except OSError:
        return ""


def client_requests(launch: Launch) -> dict[str, float]:
    """The scheduler's own count of its requests, per verb (a cross-check of the API
    server's), its controller's added (Coscheduling's column is both)."""
    by = requests_by_verb(
        scheduler_metrics_text(launch), gangsched=launch.kind not in KUBE_SCHEDULERS
    )
    if launch.controller is not None:
        for verb, count in controller_requests(launch.controller).items():
            by[verb] = by.get(verb, 0.0) + count
    return by


def controller_requests(controller: Launch) -> dict[str, float]:
    """The controller's own count of its requests, per verb (client-go's, as kube-scheduler)."""
    return requests_by_verb(scheduler_metrics_text(controller), gangsched=False)


def requests_by_verb(text: str, *, gangsched: bool) -> dict[str, float]:
    """Requests per verb from a scrape: gangsched's counter, or client-go's (kube-scheduler,
    scheduler-plugins' scheduler and controller)."""
    by: defaultdict[str, float] = defaultdict(float)
    if gangsched:
        for labels, v in samples(text, "gangsched_api_requests_total"):
            by[labels.get("verb", "")] += v
    else:
        for labels, v in samples(text, "rest_client_requests_total"):
            by[labels.get("method", "")] += v
    return dict(by)


#: The profiler `--profile` runs: the one the `bench` extra installs beside this Python.
PY_SPY = Path(sys.executable).parent / "py-spy"


class PySpy:
    """`py-spy record` on gangsched for the length of a run, or its first seconds (--profile
    DIR, --profile-seconds): raw collapsed stacks, or a flame graph SVG (--profile-format
    flamegraph)."""

    def __init__(
        self, pid: int, out: Path, fmt: str = "raw", *, seconds: float | None = None
    ) -> None:
        spy = PY_SPY
        # py-spy takes whole seconds.
        duration = [] if seconds is None else ["--duration", str(max(1, round(seconds)))]
        self.process = subprocess.Popen(
            [
                str(spy),
                "record",
                "-p",
                str(pid),
                "-f",
                fmt,
                "-o",
                str(out),
                "--rate",
                "200",
                "--nonblocking",
                *duration,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=30)


def queued_pods(launch: Launch) -> float | None:
    """A kube-scheduler's own queue (scheduler_pending_pods: active, backoff, unschedulable,
    gated). A pending pod in none of them is in flight: at rest, reserved by a plugin's Permit
    (Coscheduling holds a gang's members there until minMember are reserved)."""
    if launch.kind not in KUBE_SCHEDULERS:
        return None
    text = scheduler_metrics_text(launch)
    values = [v for _, v in samples(text, "scheduler_pending_pods")]
    return sum(values) if values else None
