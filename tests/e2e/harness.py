"""Production-like gangsched processes and workload checks for the fault, HA, RBAC and deploy
e2e tests (test_faults.py, test_ha.py, test_rbac.py, test_deploy.py).

* :func:`manifest_config` is the scheduler configuration from manifests/20-config.yaml's
  ConfigMap, with only the listen addresses moved to free loopback ports (and, where a test says
  so, other fields overridden).
* :class:`Replica` runs ``gangsched run`` as a real process, authenticated as a ServiceAccount
  (by default the shipped one, manifests/10-rbac.yaml), identity from ``POD_NAME`` as the
  Deployment sets it; its PID is registered in the cluster's pid dir, so cluster-down stops it
  even if a test dies.
* :class:`Workload` creates a test's nodes, PriorityClasses and gangs; :class:`PodRecorder` watches
  the test's pods for the whole run and checks the invariants on every state the API server
  went through (never a node over capacity, never a pod moved between nodes); :func:`check_final`
  checks the end state (gangs whole or explained, every gang that fits is bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools import gangsched as gangsched_process
from devtools.processes import http_get, http_ok, wait_ready_async
from gangsched.core.quantity import to_milli, to_units
from gangsched.edge.informer import Informer
from gangsched.edge.kube import Kube as EdgeKube

from .conftest import REPO_ROOT, Cluster
from .k8s import JSON, Kube, condition, fake_node, pod_manifest

MANIFESTS = REPO_ROOT / "manifests"
SIGS = "scheduling.sigs.k8s.io/v1alpha1"
GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
SYSTEM_NS = "gangsched-system"


# ------------------------------------------------------------------------------ installation
def manifest_docs() -> list[JSON]:
    docs: list[JSON] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def manifest_config(**overrides: Any) -> dict[str, Any]:
    """manifests/' ConfigMap config.yaml, addresses moved to free loopback ports."""
    config_map = next(d for d in manifest_docs() if d["kind"] == "ConfigMap")
    config: dict[str, Any] = gangsched_process.listen_config(
        **yaml.safe_load(config_map["data"]["config.yaml"])
    )
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


def install(cluster: Cluster) -> None:
    """`kubectl apply -f crds/ -f manifests/`, as the README says (idempotent)."""
    cluster.kubectl("apply", "-f", str(REPO_ROOT / "crds"))
    cluster.kubectl("wait", "--for", "condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("apply", "-f", str(MANIFESTS))


def token_kubeconfig(cluster: Cluster, service_account: str, out: Path) -> Path:
    """A kubeconfig authenticating as gangsched-system/<service_account> (a bound token)."""
    token = cluster.kubectl(
        "-n", SYSTEM_NS, "create", "token", service_account, "--duration", "2h"
    ).stdout.strip()
    ca = cluster.kubectl(
        "config", "view", "--raw", "--minify", "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ).stdout.strip()  # fmt: skip
    return gangsched_process.token_kubeconfig(
        out,
        server=cluster.env.get("SERVER", cluster.server),
        ca_data=ca,
        token=token,
        user=service_account,
    )


# ----------------------------------------------------------------------------------- replicas
@dataclass
class Replica:
    """One `gangsched run` process (restartable: each start is a new incarnation)."""

    cluster: Cluster
    name: str
    workdir: Path
    config: dict[str, Any]
    service_account: str = "gangsched"
    command: Sequence[str] = gangsched_process.COMMAND
    process: subprocess.Popen[bytes] | None = None
    incarnation: int = 0
    exit_codes: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / f"{self.name}.yaml"
        self.kubeconfig = token_kubeconfig(
            self.cluster, self.service_account, self.workdir / f"{self.name}.kubeconfig"
        )
        self.metrics_url = gangsched_process.metrics_url(self.config)

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.{self.incarnation}.log"

    def logs(self) -> list[Path]:
        return [self.workdir / f"{self.name}.{i}.log" for i in range(1, self.incarnation + 1)]

    def start(self) -> Replica:
        assert not self.alive, f"{self.name} is already running"
        self.incarnation += 1
        self.process = gangsched_process.start(
            kubeconfig=self.kubeconfig,
            config=self.config,
            config_path=self.config_path,
            log=self.log,
            command=self.command,
            env={"POD_NAME": self.name},  # the identity, as the Deployment sets it
            cwd=self.workdir,
            new_session=True,
        )
        pid_dir = self.cluster.dir / "pids"
        if pid_dir.is_dir() and str(self.cluster.dir) in str(self.kubeconfig):
            (pid_dir / f"e2e-{self.name}.pid").write_text(str(self.process.pid))
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(sig)

    async def wait_exit(self, timeout: float = 40.0) -> int:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                self.process.kill()
                self.process.wait(10)
                raise AssertionError(f"{self.name} did not exit within {timeout}s")
            await asyncio.sleep(0.1)
        code = self.process.returncode
        self.exit_codes.append(code)
        return code

    async def stop(self, timeout: float = 40.0) -> int | None:
        """SIGTERM and wait (SIGKILL after the timeout); None if it was not running."""
        if not self.alive:
            if self.process is not None and self.process.returncode is not None:
                return self.process.returncode
            return None
        self.kill(signal.SIGTERM)
        return await self.wait_exit(timeout)

    def http(self, path: str) -> tuple[int, str]:
        return http_get(f"{self.metrics_url}{path}", timeout=3)

    def ready(self) -> bool:
        return http_ok(f"{self.metrics_url}/readyz")

    def assert_alive(self) -> None:
        if not self.alive:
            raise AssertionError(f"{self.name} exited:\n{self.tail()}")

    async def wait_ready(self, timeout: float = 90.0) -> None:
        url = f"{self.metrics_url}/readyz"
        if not await wait_ready_async(url, alive=self.assert_alive, timeout=timeout):
            raise AssertionError(f"{self.name} not ready within {timeout}s:\n{self.tail()}")

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 if none)."""
        try:
            text = self.http("/metrics")[1]
        except OSError:
            return float("nan")
        return metric_value(text, name, **labels)

    def is_leader(self) -> bool:
        return self.alive and self.metric("gangsched_leader") == 1

    def events(self) -> list[dict[str, Any]]:
        """Every JSON log line of every incarnation, tagged with `_incarnation`."""
        out = []
        for i, path in enumerate(self.logs(), start=1):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        record["_incarnation"] = i
                        out.append(record)
        return out

    def text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs() if p.exists())

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


def metric_value(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        match = re.match(rf"^{re.escape(name)}(\{{(.*)\}})?\s+(\S+)$", line)
        if not match:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match[2] or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(match[3])
    return total


async def eventually(
    check: Callable[[], Awaitable[Any]] | Callable[[], Any],
    *,
    timeout: float,
    interval: float = 0.5,
    what: str,
) -> Any:
    """Poll until `check()` (sync or async) is truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(interval)


# ----------------------------------------------------------------------------------- workload
@dataclass
class Gang:
    name: str
    size: int
    min_member: int
    cpu: str
    priority_class: str
    priority: int
    lone: bool = False  # a pod without a PodGroup (a gang of one)
    disruption_mode: str = "Single"

    def pod_names(self) -> list[str]:
        return [self.name] if self.lone else [f"{self.name}-{i}" for i in range(self.size)]


@dataclass
class Workload:
    kube: Kube
    id: str
    node_cpu: str = "4"
    node_memory: str = "16Gi"
    node_pods: str = "110"
    nodes: list[str] = field(default_factory=list)
    gangs: dict[str, Gang] = field(default_factory=dict)
    pod_gang: dict[str, str] = field(default_factory=dict)

    @property
    def ns(self) -> str:
        return self.id

    async def setup(self, priority_classes: dict[str, int]) -> None:
        await self.kube.create_namespace(self.ns, priority_classes)

    async def add_nodes(self, count: int) -> list[str]:
        names = [f"{self.id}-n{len(self.nodes) + i}" for i in range(count)]
        await gather_limited(
            self.kube.create(
                "/api/v1/nodes",
                fake_node(
                    n,
                    cpu=self.node_cpu,
                    memory=self.node_memory,
                    pods=self.node_pods,
                    labels={"e2e-test": self.id},
                ),
            )
            for n in names
        )
        self.nodes += names

        async def all_ready() -> bool:
            ready = await self.kube.ready_nodes(f"e2e-test={self.id}")
            return set(names) <= {n["metadata"]["name"] for n in ready}

        await eventually(all_ready, timeout=90, what=f"{count} nodes Ready")
        return names

    def pod(self, name: str, gang: Gang) -> JSON:
        labels = {"e2e-gang": gang.name}
        if not gang.lone:
            labels[GROUP_LABEL] = gang.name
        return pod_manifest(
            name,
            namespace=self.ns,
            cpu=gang.cpu,
            memory="256Mi",
            labels=labels,
            priority_class_name=gang.priority_class,
            extra_spec={"nodeSelector": {"e2e-test": self.id}, "terminationGracePeriodSeconds": 1},
        )

    async def create_gangs(self, gangs: Iterable[Gang], *, shuffle_seed: int | None = None) -> None:
        """PodGroups first, then all pods at once (in a shuffled order if a seed is given)."""
        gangs = list(gangs)
        for gang in gangs:
            self.gangs[gang.name] = gang
            for pod in gang.pod_names():
                self.pod_gang[pod] = gang.name
        await gather_limited(
            self.kube.create(f"/apis/{SIGS}/namespaces/{self.ns}/podgroups", self.pod_group(g))
            for g in gangs
            if not g.lone
        )
        pods = [(p, g) for g in gangs for p in g.pod_names()]
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(pods)
        await gather_limited(
            self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", self.pod(p, g)) for p, g in pods
        )

    def pod_group(self, gang: Gang) -> JSON:
        return {
            "apiVersion": SIGS,
            "kind": "PodGroup",
            "metadata": {"name": gang.name, "namespace": self.ns},
            "spec": {
                "minMember": gang.min_member,
                "priorityClassName": gang.priority_class,
                "disruptionMode": gang.disruption_mode,
            },
        }

    async def pods(self) -> dict[str, JSON]:
        items = (await self.kube.get(f"/api/v1/namespaces/{self.ns}/pods"))["items"]
        return {p["metadata"]["name"]: p for p in items}

    async def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            pods = await self.pods()
            await gather_limited(
                self.kube.delete(f"/api/v1/namespaces/{self.ns}/pods/{p}", grace_period_seconds=0)
                for p in pods
            )
        with contextlib.suppress(Exception):
            await self.kube.request(
                "DELETE", f"/apis/{SIGS}/namespaces/{self.ns}/podgroups", {}, ok=lambda s: True
            )
        with contextlib.suppress(Exception):
            await gather_limited(self.kube.delete(f"/api/v1/nodes/{n}") for n in self.nodes)
        with contextlib.suppress(Exception):
            await self.kube.delete(f"/api/v1/namespaces/{self.ns}")


def random_gangs(
    rng: random.Random,
    count: int,
    *,
    prefix: str,
    priority_class: str,
    priority: int,
    max_size: int = 6,
) -> list[Gang]:
    gangs = []
    for i in range(count):
        size = rng.randint(1, max_size)
        lone = size == 1 and rng.random() < 0.5
        min_member = size if size <= 2 or rng.random() < 0.7 else size - 1
        gangs.append(
            Gang(
                name=f"{prefix}{i:03d}",
                size=size,
                min_member=min_member,
                cpu=rng.choice(["500m", "1", "1500m"]),
                priority_class=priority_class,
                priority=priority,
                lone=lone,
                disruption_mode=rng.choice(["Single", "All"]),
            )
        )
    return gangs


async def gather_limited(coros: Iterable[Awaitable[Any]], limit: int = 24) -> list[Any]:
    semaphore = asyncio.Semaphore(limit)

    async def run(coro: Awaitable[Any]) -> Any:
        async with semaphore:
            return await coro

    return await asyncio.gather(*(run(c) for c in coros))


# --------------------------------------------------------------------------------- invariants
def requests(pod: JSON) -> tuple[int, int]:
    """(cpu milli, memory bytes) requested by a pod."""
    cpu = memory = 0
    for c in pod["spec"].get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += to_milli(req.get("cpu", 0))
        memory += to_units(req.get("memory", 0))
    return cpu, memory


def holds_resources(pod: JSON) -> bool:
    """Bound and not finished (terminating pods still hold their node until they are gone)."""
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["spec"].get("nodeName")) and phase not in ("Succeeded", "Failed")


def preemptor_of(pod: JSON) -> str | None:
    cond = condition(pod, "DisruptionTarget")
    if not cond or cond.get("status") != "True":
        return None
    match = re.search(r"preemptor: ([^,\s]+)", cond.get("message", ""))
    return match[1] if match else "?"


@dataclass
class PodRecorder:
    """Watches one namespace's pods (list+watch, relisting after any disconnect) and checks
    every state the watch shows, not only the end state."""

    workload: Workload
    kubeconfig: Path
    pods: dict[str, JSON] = field(default_factory=dict)
    node_history: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    victims: dict[str, str] = field(default_factory=dict)  # pod -> preemptor "ns/name"
    max_bound: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    overcommits: list[str] = field(default_factory=list)
    #: pod -> time.monotonic() when the watch first showed it bound
    first_bound: dict[str, float] = field(default_factory=dict)
    events: int = 0
    _task: asyncio.Task[None] | None = None
    _kube: EdgeKube | None = None

    async def start(self) -> None:
        self._kube = await EdgeKube.connect(str(self.kubeconfig))
        informer = Informer(
            self._kube,
            f"/api/v1/namespaces/{self.workload.ns}/pods",
            self,
            name="e2e-recorder",
            inactivity_seconds=30,
            max_backoff=2.0,
        )
        self._task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), 60)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._kube is not None:
            await self._kube.close()

    # Informer handler
    def replace(self, objects: list[JSON]) -> None:
        self.pods = {o["metadata"]["name"]: o for o in objects}
        for obj in objects:
            self._seen(obj)
        for node in self.workload.nodes:
            self._check_node(node)
        for gang in self.workload.gangs:
            self._check_gang(gang)

    def upsert(self, obj: JSON) -> None:
        name = obj["metadata"]["name"]
        old = self.pods.get(name)
        self.pods[name] = obj
        self._seen(obj)
        for node in {obj["spec"].get("nodeName"), (old or {}).get("spec", {}).get("nodeName")}:
            if node:
                self._check_node(node)
        if name in self.workload.pod_gang:
            self._check_gang(self.workload.pod_gang[name])

    def delete(self, obj: JSON) -> None:
        self.pods.pop(obj["metadata"]["name"], None)
        self._seen(obj)

    def _seen(self, obj: JSON) -> None:
        self.events += 1
        name = obj["metadata"]["name"]
        node = obj["spec"].get("nodeName")
        if node:
            self.node_history[name].add(node)
            self.first_bound.setdefault(name, time.monotonic())
        preemptor = preemptor_of(obj)
        if preemptor:
            self.victims[name] = preemptor

    def _check_node(self, node: str) -> None:
        if node not in self.workload.nodes:
            return
        cpu = memory = count = 0
        for pod in self.pods.values():
            if pod["spec"].get("nodeName") == node and holds_resources(pod):
                c, m = requests(pod)
                cpu, memory, count = cpu + c, memory + m, count + 1
        w = self.workload
        capacity = (to_milli(w.node_cpu), to_units(w.node_memory), int(w.node_pods))
        if cpu > capacity[0] or memory > capacity[1] or count > capacity[2]:
            self.overcommits.append(
                f"{node}: cpu {cpu}m/{capacity[0]}m memory {memory}/{capacity[1]} "
                f"pods {count}/{capacity[2]} after {self.events} events"
            )

    def _check_gang(self, gang_name: str) -> None:
        gang = self.workload.gangs.get(gang_name)
        if gang is None:
            return
        bound = sum(
            1
            for p in gang.pod_names()
            if p in self.pods
            and self.pods[p]["spec"].get("nodeName")
            and not self.pods[p]["metadata"].get("deletionTimestamp")
        )
        self.max_bound[gang_name] = max(self.max_bound[gang_name], bound)

    def partial_gangs(self) -> int:
        """Gangs with some but fewer than minMember members bound right now."""
        count = 0
        for gang in self.workload.gangs.values():
            bound = sum(
                1
                for p in gang.pod_names()
                if (self.pods.get(p) or {}).get("spec", {}).get("nodeName")
            )
            count += 0 < bound < gang.min_member
        return count

    def violations(self, interrupted: dict[str, bool] | None = None) -> list[str]:
        """`interrupted`: gangs whose binds a fault cut short (see `interrupted_gangs`), with
        whether the scheduler tried them again; such a gang may stay short if it was retried
        (its decision placed it whole; the fault, then higher-priority work, left it short)."""
        interrupted = interrupted or {}
        out = [f"node over capacity: {o}" for o in self.overcommits]
        out += [
            f"pod {p} was bound to more than one node: {sorted(n)}"
            for p, n in self.node_history.items()
            if len(n) > 1
        ]
        w = self.workload
        for victim, preemptor in self.victims.items():
            victim_gang = w.gangs.get(w.pod_gang.get(victim, ""))
            name = preemptor.split("/", 1)[-1]
            preemptor_gang = w.gangs.get(name) or w.gangs.get(w.pod_gang.get(name, ""))
            if victim_gang is None or preemptor_gang is None:
                out.append(f"victim {victim}: unknown preemptor {preemptor}")
            elif victim_gang.priority >= preemptor_gang.priority:
                out.append(
                    f"victim {victim} (priority {victim_gang.priority}) preempted for "
                    f"{preemptor} (priority {preemptor_gang.priority})"
                )
        for name, gang in w.gangs.items():
            most = self.max_bound.get(name, 0)
            lost = any(p in self.victims for p in gang.pod_names())
            if not 0 < most < gang.min_member or lost:
                continue  # whole at some point, never bound, or short because preempted
            if interrupted.get(name) is False:
                out.append(f"gang {name}: its binds were cut short by a fault and never retried")
            elif name not in interrupted:
                out.append(
                    f"gang {name} had at most {most} member(s) bound, fewer than minMember "
                    f"{gang.min_member}, and lost none to preemption"
                )
        return out


def fits_somewhere(
    need: list[tuple[int, int]], free: dict[str, list[int]]
) -> dict[str, str] | None:
    """First-fit decreasing of `need` (cpu, memory) pods into `free` node capacities
    ([cpu, memory, pods]); a found placement proves the pods fit (not finding one proves
    nothing)."""
    free = {n: list(v) for n, v in free.items()}
    placement = {}
    for i, (cpu, memory) in sorted(enumerate(need), key=lambda x: (-x[1][0], -x[1][1])):
        for node in sorted(free, key=lambda n: (free[n][0], n)):
            f = free[node]
            if f[0] >= cpu and f[1] >= memory and f[2] >= 1:
                f[0], f[1], f[2] = f[0] - cpu, f[1] - memory, f[2] - 1
                placement[str(i)] = node
                break
        else:
            return None
    return placement


def final_state_violations(workload: Workload, pods: dict[str, JSON]) -> list[str]:
    """The end state, read from the API server: every gang whole (or short only because it
    lost members to preemption, see PodRecorder), and no pending gang that fits."""
    out = []
    free: dict[str, list[int]] = {
        n: [to_milli(workload.node_cpu), to_units(workload.node_memory), int(workload.node_pods)]
        for n in workload.nodes
    }
    for pod in pods.values():
        node = pod["spec"].get("nodeName")
        if node in free and holds_resources(pod):
            cpu, memory = requests(pod)
            free[node][0] -= cpu
            free[node][1] -= memory
            free[node][2] -= 1
    for name, gang in sorted(workload.gangs.items()):
        members = [pods[p] for p in gang.pod_names() if p in pods]
        bound = [p for p in members if p["spec"].get("nodeName")]
        pending = [p for p in members if not p["spec"].get("nodeName")]
        if not pending:
            continue
        # The gang's missing members (or, once whole, any one extra member) would fit now?
        need_count = gang.min_member - len(bound) if len(bound) < gang.min_member else 1
        if need_count > len(pending):
            continue  # cannot reach minMember any more (members were preempted)
        need = sorted((requests(p) for p in pending), key=lambda r: r)[:need_count]
        placement = fits_somewhere(need, free)
        if placement is not None:
            out.append(
                f"gang {name} ({len(bound)}/{gang.min_member} bound, {len(pending)} pending, "
                f"{gang.cpu} cpu each) fits now ({placement}) but is not bound"
            )
    return out


def bound_log_lines(replicas: Iterable[Replica]) -> dict[str, list[tuple[str, int, str]]]:
    """pod key -> [(replica, incarnation, node)] for every successful bind logged."""
    out: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    for replica in replicas:
        for record in replica.events():
            if record.get("event") == "bound":
                out[record["pod"]].append(
                    (replica.name, record["_incarnation"], str(record.get("node")))
                )
    return out


def interrupted_gangs(replicas: Iterable[Replica]) -> dict[str, bool]:
    """Gang name -> retried afterwards, for every gang a scheduling decision placed whole but
    whose binds were not all done: the process was killed or lost its lease before sending
    them, or a bind failed (API server gone). Read from the schedulers' logs."""
    out: dict[str, bool] = {}
    for replica in replicas:
        owed: dict[str, int] = defaultdict(int)
        incarnation = 0
        for record in replica.events():
            if record["_incarnation"] != incarnation:
                for gang, count in owed.items():
                    if count > 0:
                        out.setdefault(gang, False)
                owed.clear()
                incarnation = record["_incarnation"]
            group = str(record.get("group", "")).rsplit("/", 1)[-1]
            event = record.get("event")
            if event == "cycle":
                if group in out:
                    out[group] = True  # tried again after the interruption
                if record.get("result") == "scheduled":
                    owed[group] += int(record.get("bound") or 0)
            elif event == "bound":
                owed[group] -= 1
            elif event in ("bind failed", "bind outcome unknown; checking"):
                out.setdefault(group, False)
        for gang, count in owed.items():
            if count > 0:
                out.setdefault(gang, False)
    return out
