"""Launching gangsched, kube-scheduler or scheduler-plugins' Coscheduling for one run:
everything but the exec is prepared beforehand, so the clock that starts at exec measures the
scheduler and nothing else."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.compare.cluster import KS_SA, Env
from bench.compare.measure import samples
from bench.compare.workloads import CO_NAME, KS_NAME, KUBE_SCHEDULERS
from bench.harness import (
    HACK,
    ROOT,
    SchedulerProcess,
)
from devtools import gangsched as gangsched_process
from devtools.processes import free_ports, http_get, wait_ready_async


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


def prepare_launch(env: Env, scheduler: str, run_dir: Path) -> Launch:
    run_dir.mkdir(parents=True, exist_ok=True)
    if scheduler.startswith("gangsched"):
        kubeconfig = run_dir / "gangsched.kubeconfig"
        write_kubeconfig(
            env, kubeconfig, sa_token(env, "gangsched-system", "gangsched"), "gangsched"
        )
        settings = gangsched_process.listen_config(
            bindConcurrency=64, leaderElection={"enabled": False}
        )
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
        binary = scheduler_plugins_binary()
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
    return Launch(argv, run_dir / f"{scheduler}.log", url, f"{url}/readyz", scheduler)


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


def scheduler_plugins_binary() -> Path:
    """scheduler-plugins' kube-scheduler, built from its Go module by hack/build-clients.sh
    (cached; a missing one is built, which takes minutes the first time)."""
    proc = subprocess.run(
        [str(HACK / "build-clients.sh"), "scheduler-plugins"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(
            f"hack/build-clients.sh scheduler-plugins failed:\n{proc.stderr[-2000:]}"
        )
    root = Path(proc.stdout.strip().splitlines()[-1])
    built = sorted(root.glob("scheduler-plugins-v*/bin/kube-scheduler-plugins"))
    if not built:
        raise RuntimeError(f"hack/build-clients.sh left no scheduler-plugins binary under {root}")
    return built[-1]


def start(launch: Launch) -> SchedulerProcess:
    process = subprocess.Popen(
        launch.argv, stdout=launch.log.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT
    )
    return SchedulerProcess(process, launch.metrics_url, launch.log)


async def wait_ready(running: SchedulerProcess, launch: Launch, timeout: float = 180) -> float:
    """The wall-clock time the scheduler answered its readiness URL."""
    if await wait_ready_async(launch.ready_url, alive=running.alive, timeout=timeout):
        return time.time()
    raise TimeoutError(f"{launch.kind} not ready")


def scheduler_metrics_text(launch: Launch) -> str:
    try:
        return http_get(f"{launch.metrics_url}/metrics", timeout=10)[1]
    except OSError:
        return ""


def client_requests(launch: Launch) -> dict[str, float]:
    """The scheduler's own count of its requests, per verb (a cross-check of the API
    server's)."""
    text = scheduler_metrics_text(launch)
    by: defaultdict[str, float] = defaultdict(float)
    if launch.kind not in KUBE_SCHEDULERS:
        for labels, v in samples(text, "gangsched_api_requests_total"):
            by[labels.get("verb", "")] += v
    else:
        for labels, v in samples(text, "rest_client_requests_total"):
            by[labels.get("method", "")] += v
    return dict(by)


class PySpy:
    """`py-spy record` on gangsched for the length of a run (--profile DIR): raw collapsed
    stacks, or a flame graph SVG (--profile-format flamegraph)."""

    def __init__(self, pid: int, out: Path, fmt: str = "raw") -> None:
        spy = Path(sys.executable).parent / "py-spy"
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
