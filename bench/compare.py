"""gangsched side by side with the upstream kube-scheduler (issue 8); not a test.

Same release of the control plane (kube-apiserver, kube-scheduler v1.37.1 with
GenericWorkload=true: scheduling.k8s.io/v1beta1 PodGroups, gang scheduling and workload-aware
preemption, plus PodGroupPreemptionPolicy=true), same kwok nodes, same gangs; each scheduler
gets the workload in its own dialect:

* ``gangsched``: our dialect (scheduling.sigs.k8s.io PodGroup, pod label), schedulerName gangsched;
* ``kube-scheduler``: upstream PodGroups (``spec.schedulingPolicy.gang.minCount``, pod
  ``spec.schedulingGroup.podGroupName``), schedulerName kube-scheduler-baseline;
* ``gangsched-upstream``: gangsched on the upstream dialect (a check that the dialect costs
  nothing).

Workloads (sizes from ``--size default|small`` and per-field overrides, see SIZES):

(a) gangs: 1,000 nodes, 1,000 gangs of 3 one-CPU pods created at once;
(b) large gangs: 1,000 nodes, 100 gangs of 8-24 pods (mean 16);
(c) preemption: 100 nodes x 4 CPU full of 1,000 bound low-priority 400m pods (30% of them in
    disruptionMode All groups of 10 spread over 10 nodes), then 10 high-priority gangs of 10
    pods at 3970m; victims are low pods deleted (or being deleted) at the end;
(d) restart: 2,000 nodes and 20,000 bound pods, 100 pending gangs of 4; time from scheduler
    start to first and last bind.

Every run gets a fresh control plane (``Cluster.start()``), except (d), whose 20,000 bound
pods are created once per round: between two (d) runs of a round the pending gangs are
deleted and recreated, so each scheduler starts on the same objects. Rounds alternate the schedulers
(A B C, A B C, ...). Objects are created by ``bench/loadgen`` (Go, standard library, 64
requests in flight on one HTTP/2 connection like client-go), so the creator is not the slow
part; ``--mode precreate`` creates everything before starting the scheduler instead.

What is measured and how: see bench/README.md ("Side by side with kube-scheduler").

    .venv/bin/python -m bench.compare [--rounds 3] [--workloads a,b,c,d] [--size small]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from bench.harness import (
    HACK,
    ROOT,
    Cluster,
    SchedulerProcess,
    connect,
    create_nodes,
    install_gangsched,
    percentile,
)
from devtools import gangsched as gangsched_process
from devtools.processes import free_ports, http_get, wait_ready_async
from gangsched.edge.kube import Kube

NAMESPACE = "bench"
RESULTS = ROOT / "bench" / "results"
LOADGEN_SRC = ROOT / "bench" / "loadgen"
FLOW_SCHEMA = "bench-scheduler"
KS_NAME = "kube-scheduler-baseline"
KS_SA = ("kube-system", "kube-scheduler-bench")
SCHEDULERS = ("gangsched", "kube-scheduler", "gangsched-upstream")
WORKLOADS = ("a", "b", "c", "d")


def titles(sizes: dict[str, Any]) -> dict[str, str]:
    """Row labels from the sizes actually run."""
    z = Sizes(**sizes)
    return {
        "a": f"(a) {z.a_gangs:,} gangs of {z.a_size}, {z.a_nodes:,} nodes",
        "b": f"(b) {z.b_gangs:,} gangs of {z.b_min}-{z.b_max}, {z.b_nodes:,} nodes",
        "c": f"(c) preemption: {z.c_gangs} gangs of {z.c_size} over {z.c_low:,} low pods",
        "d": f"(d) restart: {z.d_bound:,} bound pods, {z.d_nodes:,} nodes",
        "ceiling": f"ceiling: bare binder, {z.ceiling_pods:,} pods",
    }


@dataclass(frozen=True)
class Sizes:
    a_nodes: int = 1000
    a_gangs: int = 1000
    a_size: int = 3
    b_nodes: int = 1000
    b_gangs: int = 100
    b_min: int = 8
    b_max: int = 24
    c_nodes: int = 100
    c_low: int = 1000
    c_all_share: float = 0.3
    c_gangs: int = 10
    c_size: int = 10
    d_nodes: int = 2000
    d_bound: int = 20000
    d_gangs: int = 100
    d_size: int = 4
    ceiling_pods: int = 3000


SIZES = {
    "default": Sizes(),
    "small": Sizes(
        a_nodes=100,
        a_gangs=100,
        b_nodes=100,
        b_gangs=10,
        c_nodes=20,
        c_low=200,
        c_gangs=2,
        d_nodes=200,
        d_bound=2000,
        d_gangs=10,
        ceiling_pods=300,
    ),
}


# ------------------------------------------------------------------------------- objects
def pod_group(
    scheduler: str, name: str, min_count: int, *, priority_class: str = "", all_mode: bool = False
) -> dict[str, Any]:
    if scheduler == "gangsched":
        spec: dict[str, Any] = {"minMember": min_count}
        if priority_class:
            spec["priorityClassName"] = priority_class
        if all_mode:
            spec["disruptionMode"] = "All"
        api_version = "scheduling.sigs.k8s.io/v1alpha1"
    else:
        spec = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
        if priority_class:
            # kube-scheduler refuses a gang unless every pod's priority equals the group's.
            spec["priorityClassName"] = priority_class
        if all_mode:
            spec["disruptionMode"] = {"all": {}}
        api_version = "scheduling.k8s.io/v1beta1"
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"bench": "gang"}},
        "spec": spec,
    }


def pod(
    scheduler: str,
    name: str,
    *,
    group: str = "",
    cpu: str = "1",
    memory: str = "1Gi",
    role: str = "gang",
    node: str = "",
    priority_class: str = "",
) -> dict[str, Any]:
    labels = {"bench": role}
    spec: dict[str, Any] = {
        "schedulerName": KS_NAME if scheduler == "kube-scheduler" else "gangsched",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "pause",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if group:
        if scheduler == "gangsched":
            labels["pod-group.scheduling.sigs.k8s.io"] = group
        else:
            spec["schedulingGroup"] = {"podGroupName": group}
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }


def create_request(obj: dict[str, Any]) -> dict[str, Any]:
    api_version = obj["apiVersion"]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = {"Pod": "pods", "PodGroup": "podgroups"}[obj["kind"]]
    return {
        "key": f"{obj['kind']}/{obj['metadata']['name']}",
        "path": f"{base}/namespaces/{NAMESPACE}/{plural}",
        "body": obj,
    }


@dataclass
class Workload:
    """What one run creates: objects bound before the scheduler runs (setup), the gangs it
    must schedule (each a PodGroup plus members) and what to wait for."""

    setup: list[dict[str, Any]] = field(default_factory=list)
    gangs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    node_cpu: str = "32"
    node_memory: str = "256Gi"
    nodes: int = 0
    low_pods: int = 0


def build_workload(name: str, scheduler: str, sizes: Sizes, seed: int) -> Workload:
    rng = random.Random(seed)  # the same gangs for every scheduler in a round
    w = Workload()
    if name == "a":
        w.nodes = sizes.a_nodes
        shapes = [sizes.a_size] * sizes.a_gangs
    elif name == "b":
        w.nodes = sizes.b_nodes
        mean = (sizes.b_min + sizes.b_max) // 2
        shapes = []
        for _ in range(sizes.b_gangs // 2):  # symmetric pairs: the mean is exactly `mean`
            k = rng.randint(sizes.b_min, sizes.b_max)
            shapes += [k, 2 * mean - k]
        shapes += [mean] * (sizes.b_gangs - len(shapes))
    elif name == "c":
        w.nodes, w.node_cpu, w.node_memory = sizes.c_nodes, "4", "16Gi"
        per_node = sizes.c_low // sizes.c_nodes
        all_pods = int(sizes.c_low * sizes.c_all_share) // 10 * 10
        # All-mode groups of 10, each spread over 10 nodes; the rest are single pods.
        for g in range(all_pods // 10):
            group = f"low-{g:03d}"
            w.setup.append(
                pod_group(scheduler, group, 10, priority_class="bench-low", all_mode=True)
            )
            for m in range(10):
                node = (g * 10 + m) % sizes.c_nodes
                w.setup.append(
                    pod(
                        scheduler,
                        f"{group}-{m}",
                        group=group,
                        cpu="400m",
                        memory="128Mi",
                        role="low",
                        node=bench_node(node),
                        priority_class="bench-low",
                    )
                )
        counts = Counter(p["spec"]["nodeName"] for p in w.setup if p["kind"] == "Pod")
        single = 0
        for n in range(sizes.c_nodes):
            for _ in range(per_node - counts[bench_node(n)]):
                w.setup.append(
                    pod(
                        scheduler,
                        f"low-single-{single:04d}",
                        cpu="400m",
                        memory="128Mi",
                        role="low",
                        node=bench_node(n),
                        priority_class="bench-low",
                    )
                )
                single += 1
        w.low_pods = sum(1 for o in w.setup if o["kind"] == "Pod")
        for g in range(sizes.c_gangs):
            group = f"high-{g:03d}"
            w.groups.append(pod_group(scheduler, group, sizes.c_size, priority_class="bench-high"))
            w.gangs[group] = [
                pod(
                    scheduler,
                    f"{group}-{m}",
                    group=group,
                    cpu="3970m",
                    memory="1Gi",
                    priority_class="bench-high",
                )
                for m in range(sizes.c_size)
            ]
        return w
    elif name == "d":
        w.nodes = sizes.d_nodes
        shapes = [sizes.d_size] * sizes.d_gangs
        # (the bound pods are created once per cluster: see bound_pods)
    else:
        raise ValueError(name)
    for g, size in enumerate(shapes):
        group = f"gang-{g:04d}"
        w.groups.append(pod_group(scheduler, group, size))
        w.gangs[group] = [pod(scheduler, f"{group}-{m}", group=group) for m in range(size)]
    return w


def bound_pods(sizes: Sizes) -> list[dict[str, Any]]:
    """(d): pods already running, spread evenly, owned by no scheduler we run."""
    out = []
    for i in range(sizes.d_bound):
        p = pod(
            "none",
            f"bound-{i:05d}",
            cpu="100m",
            memory="128Mi",
            role="bound",
            node=bench_node(i % sizes.d_nodes),
        )
        p["spec"]["schedulerName"] = "default-scheduler"
        out.append(p)
    return out


def bench_node(i: int) -> str:
    return f"bench-node-{i:05d}"  # harness.create_nodes' names


# ---------------------------------------------------------------------------- plumbing
def loadgen_binary() -> Path:
    cache = Path(os.environ.get("GANGSCHED_K8S_CACHE", Path.home() / ".cache" / "gangsched"))
    out = cache / "bench-loadgen"
    subprocess.run(
        ["go", "build", "-o", str(out), "."],
        cwd=LOADGEN_SRC,
        check=True,
        env={**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"},
    )
    return out


@dataclass
class Env:
    cluster: Cluster
    server: str
    token: str
    ca: Path
    loadgen: Path

    @classmethod
    def of(cls, cluster: Cluster, loadgen: Path) -> Env:
        values: dict[str, str] = {}
        for line in (cluster.dir / "cluster.env").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                values[key] = value.strip("'")
        return cls(
            cluster,
            values["SERVER"],
            values["ADMIN_TOKEN"],
            cluster.dir / "pki" / "ca.crt",
            loadgen,
        )

    def feature_gates(self) -> str:
        for line in (self.cluster.dir / "cluster.env").read_text().splitlines():
            if line.startswith("FEATURE_GATES="):
                return line.partition("=")[2].strip("'")
        return "GenericWorkload=true,PodGroupPreemptionPolicy=true"

    async def post_all(
        self, requests: list[dict[str, Any]], concurrency: int = 64
    ) -> dict[str, float]:
        """POST every request through loadgen; returns key -> wall time its answer arrived."""
        if not requests:
            return {}
        proc = await asyncio.create_subprocess_exec(
            str(self.loadgen),
            "-server",
            self.server,
            "-token",
            self.token,
            "-ca",
            str(self.ca),
            "-concurrency",
            str(concurrency),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        payload = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in requests).encode()
        out, err = await proc.communicate(payload)
        if proc.returncode != 0:
            raise RuntimeError(f"loadgen failed: {err.decode()[-2000:]}")
        done: dict[str, float] = {}
        for line in out.decode().splitlines():
            key, at, _status = line.split("\t")
            done[key] = int(at) / 1e9
        return done

    def metrics(self) -> str:
        context = ssl.create_default_context(cafile=str(self.ca))
        request = urllib.request.Request(
            f"{self.server}/metrics", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            text: str = response.read().decode()
            return text


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        match = _SAMPLE.match(line)
        if match and match.group(1) == name:
            out.append((dict(_LABEL.findall(match.group(2) or "")), float(match.group(3))))
    return out


@dataclass
class ApiCounts:
    """The API server's own counters at one moment."""

    scheduler: float  # apiserver_flowcontrol_dispatched_requests_total{flow_schema=bench-scheduler}
    by_request: dict[str, float]  # apiserver_request_total per "VERB resource[/sub]", leases apart

    @classmethod
    def read(cls, env: Env) -> ApiCounts:
        text = env.metrics()
        scheduler = sum(
            v
            for labels, v in samples(text, "apiserver_flowcontrol_dispatched_requests_total")
            if labels.get("flow_schema") == FLOW_SCHEMA
        )
        by: defaultdict[str, float] = defaultdict(float)
        for labels, v in samples(text, "apiserver_request_total"):
            resource = labels.get("resource", "") + (
                "/" + labels["subresource"] if labels.get("subresource") else ""
            )
            by[f"{labels.get('verb', '')} {resource}"] += v
        return cls(scheduler, dict(by))

    def since(self, before: ApiCounts) -> tuple[float, dict[str, float]]:
        delta = {
            k: v - before.by_request.get(k, 0.0)
            for k, v in self.by_request.items()
            if v - before.by_request.get(k, 0.0) > 0
        }
        return self.scheduler - before.scheduler, delta


async def prepare_cluster(env: Env, kube: Kube) -> None:
    """What every run has, whichever scheduler: gangsched's CRDs/RBAC, a ServiceAccount for
    kube-scheduler, the FlowSchema that attributes the scheduler's requests, priorities."""
    install_gangsched(env.cluster)
    await kube.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    await kube.post(
        f"/api/v1/namespaces/{KS_SA[0]}/serviceaccounts", {"metadata": {"name": KS_SA[1]}}
    )
    await kube.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": KS_SA[1]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "namespace": KS_SA[0], "name": KS_SA[1]}],
        },
    )
    everything = {
        "verbs": ["*"],
        "apiGroups": ["*"],
        "resources": ["*"],
        "clusterScope": True,
        "namespaces": ["*"],
    }
    await kube.post(
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
        {
            "metadata": {"name": FLOW_SCHEMA},
            "spec": {
                # Exempt, like the admin clients (harness, kwok): neither scheduler is queued
                # by API Priority and Fairness, and its requests are counted apart.
                "matchingPrecedence": 100,
                "priorityLevelConfiguration": {"name": "exempt"},
                "rules": [
                    {
                        "subjects": [
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {
                                    "namespace": "gangsched-system",
                                    "name": "gangsched",
                                },
                            },
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {"namespace": KS_SA[0], "name": KS_SA[1]},
                            },
                        ],
                        "resourceRules": [everything],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        },
    )
    for name, value in (("bench-low", 100), ("bench-high", 10000)):
        await kube.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        )


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
        url = gangsched_process.metrics_url(settings)
        return Launch(argv, run_dir / "gangsched.log", url, f"{url}/readyz", "gangsched")
    (metrics,) = free_ports(1)
    kubeconfig = run_dir / "kube-scheduler.kubeconfig"
    write_kubeconfig(env, kubeconfig, sa_token(env, *KS_SA), KS_SA[1])
    config = run_dir / "kube-scheduler.yaml"
    # hack/baseline-scheduler.sh's configuration, but authenticating as its own ServiceAccount
    # so its requests are told apart from the harness's and kwok's (both admin).
    config.write_text(
        f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
profiles:
- schedulerName: {KS_NAME}
"""
    )
    argv = [
        str(env.cluster.bins / "kube-scheduler"),
        "--config",
        str(config),
        "--authorization-always-allow-paths",
        "/healthz,/readyz,/livez,/metrics",
        "--bind-address",
        "127.0.0.1",
        "--secure-port",
        str(metrics),
        "--feature-gates",
        env.feature_gates(),
        "--v",
        "1",
    ]
    url = f"https://127.0.0.1:{metrics}"
    return Launch(argv, run_dir / "kube-scheduler.log", url, f"{url}/readyz", "kube-scheduler")


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
    if launch.kind == "gangsched":
        for labels, v in samples(text, "gangsched_api_requests_total"):
            by[labels.get("verb", "")] += v
    else:
        for labels, v in samples(text, "rest_client_requests_total"):
            by[labels.get("method", "")] += v
    return dict(by)


class PySpy:
    """`py-spy record -f raw` on gangsched for the length of a run (--profile DIR)."""

    def __init__(self, pid: int, out: Path) -> None:
        spy = Path(sys.executable).parent / "py-spy"
        self.process = subprocess.Popen(
            [
                str(spy),
                "record",
                "-p",
                str(pid),
                "-f",
                "raw",
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


# ------------------------------------------------------------------------------ watching
@dataclass
class Watch:
    bound_at: dict[str, float] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # deleted, or with a deletionTimestamp
    task: asyncio.Task[None] | None = None

    async def run(self, kube: Kube) -> None:
        listed = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods", limit=1)
        version = listed["metadata"]["resourceVersion"]
        while True:
            try:
                async for event in kube.watch(
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    query={"resourceVersion": version, "allowWatchBookmarks": "true"},
                    read_timeout=120,
                ):
                    now = time.time()
                    obj = event.get("object") or {}
                    meta = obj.get("metadata", {})
                    version = meta.get("resourceVersion", version)
                    name = meta.get("name")
                    if not name or event.get("type") == "BOOKMARK":
                        continue
                    if obj.get("spec", {}).get("nodeName") and name not in self.bound_at:
                        self.bound_at[name] = now
                    if event.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                        self.gone.add(name)
            except asyncio.CancelledError:
                raise
            except Exception:  # a dropped stream: resume from the last version seen
                await asyncio.sleep(0.1)

    def start(self, kube: Kube) -> None:
        self.task = asyncio.create_task(self.run(kube))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


async def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return predicate()


async def wait_running(kube: Kube, timeout: float = 600) -> None:
    """Until kwok has marked every bound pod Running (its writes would otherwise compete)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = await kube.get(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            fieldSelector="status.phase=Pending,spec.nodeName!=",
            limit=1,
        )
        if not pending.get("items"):
            return
        await asyncio.sleep(1)
    raise TimeoutError("bound pods not Running")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ----------------------------------------------------------------------------------- runs
@dataclass
class Options:
    sizes: Sizes
    mode: str
    timeout: float
    profile: Path | None
    keep: bool = False


async def run_one(
    workload: str,
    scheduler: str,
    round_no: int,
    *,
    opts: Options,
    loadgen: Path,
    shared: dict[str, Any],
) -> dict[str, Any]:
    """One workload, one scheduler, on a fresh cluster (d: on the round's shared cluster)."""
    sizes = opts.sizes
    w = build_workload(workload, scheduler, sizes, seed=round_no)
    reuse = workload == "d"
    if reuse and "d" in shared:
        env, kube = shared["d"]
    else:
        cluster = Cluster.start()
        env = Env.of(cluster, loadgen)
        kube = await connect(cluster)
        await prepare_cluster(env, kube)
        await create_nodes(kube, w.nodes, cpu=w.node_cpu, memory=w.node_memory)
        if reuse:
            await env.post_all([create_request(p) for p in bound_pods(sizes)])
            await wait_running(kube)
            shared["d"] = (env, kube)
    run_dir = env.cluster.dir / f"run-{workload}-{scheduler}-{round_no}"
    watch = Watch()
    running: SchedulerProcess | None = None
    spy: PySpy | None = None
    result: dict[str, Any] = {
        "workload": workload,
        "scheduler": scheduler,
        "round": round_no,
        "nodes": w.nodes,
        "gangs": len(w.gangs),
        "pods": sum(len(m) for m in w.gangs.values()),
        "load_before": load_average(),
    }
    try:
        if w.setup:  # (c): the low-priority pods, bound, and their All-mode groups
            await env.post_all([create_request(o) for o in w.setup])
            await wait_running(kube)
        launch = prepare_launch(env, scheduler, run_dir)
        gang_requests = [create_request(g) for g in w.groups] + [
            create_request(p) for members in w.gangs.values() for p in members
        ]
        precreate = workload == "d" or (opts.mode == "precreate" and workload in "ab")
        result["mode"] = "precreate" if precreate else "streamed"
        watch.start(kube)
        await asyncio.sleep(0.3)
        created: dict[str, float] = {}
        if precreate:
            created = await env.post_all(gang_requests)
            await asyncio.sleep(1.0)
        before = await asyncio.to_thread(ApiCounts.read, env)
        cpu_before = 0.0
        t_start = time.time()
        running = start(launch)
        if opts.profile is not None and launch.kind == "gangsched":
            opts.profile.mkdir(parents=True, exist_ok=True)
            spy = PySpy(
                running.process.pid, opts.profile / f"{workload}-{scheduler}-{round_no}.txt"
            )
        ready_at = await wait_ready(running, launch)
        result["ready_s"] = round(ready_at - t_start, 3)
        if not precreate:
            await asyncio.sleep(2.0)  # informers synced on both sides before the burst
            cpu_before = running.cpu_seconds()
            t_start = time.time()
            created = await env.post_all(gang_requests)
        result["create_s"] = round(
            max(created.values(), default=t_start) - min(created.values(), default=t_start), 3
        )
        names = [p["metadata"]["name"] for members in w.gangs.values() for p in members]
        done = await wait_until(lambda: all(n in watch.bound_at for n in names), opts.timeout, 0.1)
        if workload == "c":  # victims still being deleted are counted too
            await asyncio.sleep(1.0)
        after = await asyncio.to_thread(ApiCounts.read, env)
        result["client_requests"] = await asyncio.to_thread(client_requests, launch)
        result["rss_peak_mib"] = round(running.rss_peak_mib(), 1)
        result["cpu_s"] = round(running.cpu_seconds() - cpu_before, 2)
        result["cpu_s_total"] = round(running.cpu_seconds(), 2)
        binds = sorted(watch.bound_at[n] for n in names if n in watch.bound_at)
        bound = len(binds)
        result["complete"] = done
        result["pods_bound"] = bound
        if binds:
            result["first_bind_s"] = round(binds[0] - t_start, 3)
            result["last_bind_s"] = round(binds[-1] - t_start, 3)
            result["pods_per_s"] = round(bound / max(binds[-1] - t_start, 1e-9), 1)
            result["pods_per_s_binding"] = (
                round((bound - 1) / max(binds[-1] - binds[0], 1e-9), 1) if bound > 1 else 0.0
            )
        latencies = []
        for group, members in w.gangs.items():
            if not all(p["metadata"]["name"] in watch.bound_at for p in members):
                continue
            if precreate:
                last_created = t_start
            else:
                keys = [f"PodGroup/{group}"] + [f"Pod/{p['metadata']['name']}" for p in members]
                last_created = max(created[k] for k in keys)
            latencies.append(
                max(watch.bound_at[p["metadata"]["name"]] for p in members) - last_created
            )
        result["gangs_complete"] = len(latencies)
        result["latency_p50_s"] = round(percentile(latencies, 0.5), 3)
        result["latency_p99_s"] = round(percentile(latencies, 0.99), 3)
        result["latency_max_s"] = round(max(latencies, default=0.0), 3)
        scheduler_requests, all_requests = after.since(before)
        result["api_requests"] = scheduler_requests
        result["api_requests_per_pod"] = round(scheduler_requests / max(bound, 1), 3)
        result["apiserver_request_total_delta"] = all_requests
        if workload == "c":
            low = [o["metadata"]["name"] for o in w.setup if o["kind"] == "Pod"]
            result["low_pods"] = len(low)
            result["victims"] = sum(1 for n in low if n in watch.gone)
        result["load_after"] = load_average()
        return result
    finally:
        if spy is not None:
            spy.stop()
        if running is not None:
            running.stop()
        await watch.stop()
        if reuse:
            await cleanup_gangs(kube)
        else:
            await kube.close()
            if not opts.keep:
                stop_cluster(env.cluster)
            else:
                announce_kept(env.cluster)


async def cleanup_gangs(kube: Kube) -> None:
    """(d) between runs: drop the gangs (pods force-deleted) so the next run starts alike."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    await kube.request(
        "DELETE",
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        query={"labelSelector": "bench=gang"},
        body=body,
    )
    for api in ("scheduling.sigs.k8s.io/v1alpha1", "scheduling.k8s.io/v1beta1"):
        await kube.request("DELETE", f"/apis/{api}/namespaces/{NAMESPACE}/podgroups", body=body)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        left = await kube.get(
            f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector="bench=gang", limit=1
        )
        if not left.get("items"):
            return
        await asyncio.sleep(0.5)


async def python_binds(kube: Kube, binds: list[dict[str, Any]], concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def bind(b: dict[str, Any]) -> None:
        async with slots:
            await kube.post(b["path"], b["body"])

    await asyncio.gather(*(bind(b) for b in binds))


async def run_ceiling(opts: Options, loadgen: Path) -> dict[str, Any]:
    """A bare client binding pending pods to nodes as fast as the API server takes it: no
    scheduling, no cache, just pods/binding (the most any scheduler could do here)."""
    sizes = opts.sizes
    cluster = Cluster.start()
    env = Env.of(cluster, loadgen)
    kube = await connect(cluster)
    watch = Watch()
    try:
        await prepare_cluster(env, kube)
        await create_nodes(kube, sizes.a_nodes, cpu="32", memory="256Gi")
        result: dict[str, Any] = {
            "workload": "ceiling",
            "scheduler": "bare-binder",
            "pods": sizes.ceiling_pods,
            "load_before": load_average(),
        }
        for client, concurrency in (("go", 64), ("go", 256), ("python", 64)):
            pods = [
                pod("none", f"free-{client}{concurrency}-{i:05d}", role="free")
                for i in range(sizes.ceiling_pods)
            ]
            for p in pods:
                p["spec"]["schedulerName"] = "nobody"
            await env.post_all([create_request(p) for p in pods])
            await asyncio.sleep(1.0)
            names = [p["metadata"]["name"] for p in pods]
            binds = [
                {
                    "key": name,
                    "path": f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding",
                    "body": {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"kind": "Node", "name": bench_node(i % sizes.a_nodes)},
                    },
                }
                for i, name in enumerate(names)
            ]
            watch = Watch()
            watch.start(kube)
            await asyncio.sleep(0.3)
            started = time.time()
            if client == "go":
                await env.post_all(binds, concurrency=concurrency)
            else:
                await python_binds(kube, binds, concurrency)
            acked = time.time()
            bound_at = watch.bound_at
            await wait_until(lambda: all(n in bound_at for n in names), opts.timeout)  # noqa: B023
            await watch.stop()
            last = max(watch.bound_at.get(n, acked) for n in names)
            result[f"{client}{concurrency}_pods_per_s"] = round(
                len(names) / max(last - started, 1e-9), 1
            )
        result["pods_per_s"] = max(v for k, v in result.items() if k.endswith("_pods_per_s"))
        result["load_after"] = load_average()
        return result
    finally:
        await watch.stop()
        await kube.close()
        stop_cluster(cluster)


# ------------------------------------------------------------------------------- summary
METRICS = (
    "pods_per_s",
    "pods_per_s_binding",
    "latency_p50_s",
    "latency_p99_s",
    "first_bind_s",
    "last_bind_s",
    "victims",
    "api_requests_per_pod",
    "cpu_s",
    "cpu_s_total",
    "rss_peak_mib",
)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    medians: dict[str, dict[str, dict[str, float]]] = {}
    for run in runs:
        medians.setdefault(run["workload"], {}).setdefault(run["scheduler"], {})
    for workload, per in medians.items():
        for scheduler in per:
            mine = [r for r in runs if r["workload"] == workload and r["scheduler"] == scheduler]
            for metric in (*METRICS, "complete"):
                values = [float(r[metric]) for r in mine if metric in r]
                if values:
                    per[scheduler][metric] = round(statistics.median(values), 3)
            per[scheduler]["rounds"] = len(mine)
    ratios: dict[str, dict[str, float]] = {}
    for workload, per in medians.items():
        ours, theirs = per.get("gangsched"), per.get("kube-scheduler")
        if not ours or not theirs:
            continue
        ratios[workload] = {
            m: round(ours[m] / theirs[m], 3)
            for m in METRICS
            if m in ours and m in theirs and theirs[m]
        }
    return {"medians": medians, "ratios": ratios}


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        f"Medians over {meta['rounds']} rounds; load average (1 min) during the runs: "
        f"{meta['load_min']:.2f}-{meta['load_max']:.2f} (median {meta['load_median']:.2f}) on "
        f"{meta['cpus']} CPUs. Ratio = gangsched / kube-scheduler. Mode: {meta['mode']} "
        "for (a) and (b), streamed for (c), precreate for (d) (see bench/README.md).",
        "",
        "| workload | scheduler | pods/s | gang latency p50 / p99 (s) | first / last bind (s) "
        "| victims | API req / pod | CPU s (run / total) | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    medians, ratios = summary["medians"], summary["ratios"]
    ceiling = medians.get("ceiling", {}).get("bare-binder", {}).get("pods_per_s")
    label = titles(meta["sizes"])
    for workload in (*WORKLOADS, "ceiling"):
        per = medians.get(workload)
        if not per:
            continue
        for scheduler in (*SCHEDULERS, "bare-binder"):
            m = per.get(scheduler)
            if m is None:
                continue
            share = (
                f" ({m['pods_per_s'] / ceiling:.0%} of ceiling)"
                if ceiling and "pods_per_s" in m and workload in "ab"
                else ""
            )
            incomplete = "" if m.get("complete", 1) else " (incomplete)"
            lines.append(
                f"| {label[workload]} | {scheduler}{incomplete} | "
                f"{fmt(m.get('pods_per_s'))}{share} | "
                f"{fmt(m.get('latency_p50_s'), 2)} / {fmt(m.get('latency_p99_s'), 2)} | "
                f"{fmt(m.get('first_bind_s'), 2)} / {fmt(m.get('last_bind_s'), 2)} | "
                f"{fmt(m.get('victims'), 0)} | {fmt(m.get('api_requests_per_pod'), 2)} | "
                f"{fmt(m.get('cpu_s'), 1)} / {fmt(m.get('cpu_s_total'), 1)} | "
                f"{fmt(m.get('rss_peak_mib'), 0)} |"
            )
        r = ratios.get(workload)
        if r:
            lines.append(
                f"| {label[workload]} | **ratio** | **{fmt(r.get('pods_per_s'), 2)}x** | "
                f"{fmt(r.get('latency_p50_s'), 2)} / {fmt(r.get('latency_p99_s'), 2)} | "
                f"{fmt(r.get('first_bind_s'), 2)} / {fmt(r.get('last_bind_s'), 2)} | "
                f"{fmt(r.get('victims'), 2)} | {fmt(r.get('api_requests_per_pod'), 2)} | "
                f"{fmt(r.get('cpu_s'), 2)} / {fmt(r.get('cpu_s_total'), 2)} | "
                f"{fmt(r.get('rss_peak_mib'), 2)} |"
            )
    return "\n".join(lines) + "\n"


def plot(document: dict[str, Any], runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = document["medians"]
    label = titles(document["meta"]["sizes"])
    workloads = [w for w in WORKLOADS if w in medians]
    panels = (
        ("pods_per_s", "pods bound per second (higher is better)"),
        ("latency_p99_s", "gang latency p99, s (lower is better)"),
        ("cpu_s", "scheduler CPU seconds (lower is better)"),
        ("rss_peak_mib", "scheduler peak RSS, MiB (lower is better)"),
    )
    colors = {"gangsched": "#1f77b4", "kube-scheduler": "#d62728", "gangsched-upstream": "#7fb2e5"}
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    width = 0.8 / len(SCHEDULERS)
    for ax, (metric, title) in zip(axes.flat, panels, strict=True):
        for i, scheduler in enumerate(SCHEDULERS):
            xs, ys, lo, hi = [], [], [], []
            for j, workload in enumerate(workloads):
                values = [
                    float(r[metric])
                    for r in runs
                    if r["workload"] == workload and r["scheduler"] == scheduler and metric in r
                ]
                if not values:
                    continue
                med = statistics.median(values)
                xs.append(j + (i - 1) * width)
                ys.append(med)
                lo.append(med - min(values))
                hi.append(max(values) - med)
            if xs:
                ax.bar(
                    xs,
                    ys,
                    width,
                    yerr=[lo, hi],
                    capsize=3,
                    label=scheduler,
                    color=colors[scheduler],
                )
        if metric == "pods_per_s":
            ceiling = medians.get("ceiling", {}).get("bare-binder", {}).get("pods_per_s")
            if ceiling:
                ax.axhline(ceiling, color="gray", linestyle="--", linewidth=1)
                ax.text(
                    len(workloads) - 0.5,
                    ceiling,
                    f"bare binder {ceiling:.0f}/s",
                    ha="right",
                    va="bottom",
                    fontsize=8,
                    color="gray",
                )
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(
            [label[w].split(": ")[0].replace(", ", "\n") for w in workloads], fontsize=7
        )
        ax.set_title(title, fontsize=10)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("gangsched vs kube-scheduler v1.37.1 (medians, bars = min..max over rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------- main
async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    sizes = SIZES[args.size]
    for override in args.set or []:
        key, _, value = override.partition("=")
        current = getattr(sizes, key)
        sizes = replace(sizes, **{key: type(current)(value)})
    opts = Options(
        sizes=sizes, mode=args.mode, timeout=args.timeout, profile=args.profile, keep=args.keep
    )
    loadgen = loadgen_binary()
    workloads = [w for w in args.workloads.split(",") if w]
    schedulers = [s for s in args.schedulers.split(",") if s]
    runs: list[dict[str, Any]] = []
    out = Path(args.json)
    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            check=False,
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kubernetes": (HACK / "k8s" / "versions.env")
        .read_text()
        .split("K8S_VERSION=")[1]
        .split()[0],
        "sizes": asdict(sizes),
        "mode": args.mode,
        "rounds": args.rounds,
    }

    def save() -> dict[str, Any]:
        loads = [r["load_before"][0] for r in runs] + [
            r.get("load_after", [0])[0] for r in runs if "load_after" in r
        ]
        meta.update(
            load_min=min(loads, default=0.0),
            load_max=max(loads, default=0.0),
            load_median=statistics.median(loads) if loads else 0.0,
        )
        summary = summarize(runs)
        document = {"meta": meta, **summary, "runs": runs}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=1) + "\n")
        return document

    if args.ceiling:
        print(f"[compare] ceiling (load {load_average()})", file=sys.stderr)
        runs.append(await run_ceiling(opts, loadgen))
        print(json.dumps(runs[-1]), file=sys.stderr)
        save()
    shared: dict[str, Any] = {}
    try:
        for round_no in range(1, args.rounds + 1):
            for workload in workloads:
                for scheduler in schedulers:
                    print(
                        f"[compare] round {round_no} ({workload}) {scheduler}",
                        f"load {load_average()}",
                        file=sys.stderr,
                    )
                    try:
                        result = await run_one(
                            workload, scheduler, round_no, opts=opts, loadgen=loadgen, shared=shared
                        )
                    except Exception as exc:  # record the failure, go on with the others
                        result = {
                            "workload": workload,
                            "scheduler": scheduler,
                            "round": round_no,
                            "error": repr(exc),
                            "load_before": load_average(),
                        }
                    brief = {
                        k: v for k, v in result.items() if k != "apiserver_request_total_delta"
                    }
                    print(json.dumps(brief), file=sys.stderr)
                    runs.append(result)
                    save()
            await close_shared(shared, opts)  # a fresh (d) cluster every round
    finally:
        await close_shared(shared, opts)
    document = save()
    md = markdown(document, meta)
    Path(args.markdown).write_text(md)
    print(md)
    if args.plot:
        plot(document, runs, Path(args.plot))
    return document


def announce_kept(cluster: Cluster) -> None:
    """--keep leaves the control plane running (its logs and objects stay inspectable); say
    how to stop it, since kept clusters keep loading the machine for the runs after them."""
    print(
        f"[compare] kept running: {cluster.dir} "
        f"(stop: CLUSTER_DIR={cluster.dir} hack/cluster-down.sh)",
        file=sys.stderr,
    )


def stop_cluster(cluster: Cluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.dir, ignore_errors=True)  # our run directories (logs, kubeconfigs)


async def close_shared(shared: dict[str, Any], opts: Options) -> None:
    if "d" in shared:
        env, kube = shared.pop("d")
        await kube.close()
        if not opts.keep:
            stop_cluster(env.cluster)
        else:
            announce_kept(env.cluster)


def render(args: argparse.Namespace) -> None:
    """Table and plot again from a results file (no runs)."""
    document = json.loads(Path(args.json).read_text())
    md = markdown(document, document["meta"])
    Path(args.markdown).write_text(md)
    print(md)
    if args.plot:
        plot(document, document["runs"], Path(args.plot))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default="a,b,c,d")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--size", choices=sorted(SIZES), default="default")
    parser.add_argument(
        "--set", action="append", metavar="FIELD=VALUE", help="override one size (e.g. a_gangs=500)"
    )
    parser.add_argument(
        "--mode",
        choices=["streamed", "precreate"],
        default="streamed",
        help="(a)/(b): create gangs while the scheduler runs, or before starting it",
    )
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--no-ceiling", dest="ceiling", action="store_false")
    parser.add_argument(
        "--profile", type=Path, help="py-spy raw profiles of gangsched into this directory"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave each run's control plane running (logs, objects); stop it as printed",
    )
    parser.add_argument("--json", default=str(RESULTS / "compare.json"))
    parser.add_argument("--markdown", default=str(RESULTS / "compare.md"))
    parser.add_argument("--plot", default=str(RESULTS / "compare.png"))
    parser.add_argument(
        "--render", action="store_true", help="only redo --markdown/--plot from --json"
    )
    args = parser.parse_args()
    if args.render:
        render(args)
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
