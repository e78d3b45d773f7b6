"""What is measured from outside the schedulers: the API server's request counters and its
cost (its and etcd's CPU seconds, the watch events it sent), the watch that timestamps every
bind, and the machine's load while a run goes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.compare.cluster import FLOW_SCHEMA, Env
from bench.compare.workloads import NAMESPACE
from gangsched.edge.kube import Kube

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


def process_cpu_seconds(pid_file: Path) -> float:
    """User + system CPU seconds of the process whose pid the file holds (0 when it is gone).

    Read from /proc: this kube-apiserver exports no process_cpu_seconds_total, and etcd's
    CPU is part of what a write costs the control plane."""
    try:
        fields = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text().rsplit(")", 1)[1]
    except (OSError, ValueError):
        return 0.0
    utime, stime = fields.split()[11:13]  # fields 14 and 15 of proc(5), after "pid (comm)"
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


#: The control-plane processes whose CPU a run costs: short name -> pid file of
#: hack/cluster-up.sh.
CONTROL_PLANE = {"apiserver": "kube-apiserver", "etcd": "etcd"}
#: The cluster's daemons (their pid files) whose CPU over a run's binding window is kept:
#: the control plane's, and the two that work beside it.
DAEMONS = (*CONTROL_PLANE.values(), "kwok", "kube-controller-manager")


@dataclass
class ApiCounts:
    """The API server's own counters at one moment."""

    scheduler: float  # apiserver_flowcontrol_dispatched_requests_total{flow_schema=bench-scheduler}
    by_request: dict[str, float]  # apiserver_request_total per "VERB resource[/sub]", leases apart
    #: CPU seconds of each CONTROL_PLANE process so far.
    cpu_s: dict[str, float] = field(default_factory=dict)
    #: Watch events the API server sent to all its watchers (apiserver_watch_events_sizes
    #: count and sum): the fan-out of every write.
    watch_events: float = 0.0
    watch_bytes: float = 0.0
    #: When it was read (time.monotonic()).
    at: float = 0.0

    @classmethod
    def read(cls, env: Env) -> ApiCounts:
        cpu = {
            name: process_cpu_seconds(env.cluster.dir / "pids" / f"{pid_file}.pid")
            for name, pid_file in CONTROL_PLANE.items()
        }
        at = time.monotonic()  # with the CPU, not after the scrape below
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
        events = sum(v for _, v in samples(text, "apiserver_watch_events_sizes_count"))
        sent = sum(v for _, v in samples(text, "apiserver_watch_events_sizes_sum"))
        return cls(scheduler, dict(by), cpu, events, sent, at)

    def idle_rate(self, earlier: ApiCounts) -> dict[str, float]:
        """CPU seconds per second of each CONTROL_PLANE process between two readings of a
        cluster at rest: what it spends whatever the scheduler does (kwok's node leases, the
        controller manager's resyncs)."""
        elapsed = max(self.at - earlier.at, 1e-9)
        return {
            name: (self.cpu_s.get(name, 0.0) - earlier.cpu_s.get(name, 0.0)) / elapsed
            for name in CONTROL_PLANE
        }

    def since(self, before: ApiCounts) -> tuple[float, dict[str, float]]:
        delta = {
            k: v - before.by_request.get(k, 0.0)
            for k, v in self.by_request.items()
            if v - before.by_request.get(k, 0.0) > 0
        }
        return self.scheduler - before.scheduler, delta

    def cost_since(
        self, before: ApiCounts, *, pods: int, idle: dict[str, float] | None = None
    ) -> dict[str, float]:
        """What the run cost the control plane, in all and per bound pod: the API server's
        and etcd's CPU seconds, the watch events and MiB it sent. Everything on the cluster
        counts (the load generator's creates, kwok's status writes, the bench's watch), the
        same for every scheduler: the differences between schedulers are theirs.

        With `idle` (`idle_rate` measured just before the run), each CPU figure also comes
        net of what the cluster at rest would have spent over the run's window (`*_net`):
        1,000 kwok nodes renewing their leases cost the API server about half a core on this
        machine, so the gross figure grew with the window, which ends when the scheduler's
        (and scheduler-plugins' controller's) writes stop, more than with the work done."""
        per = max(pods, 1)
        window = self.at - before.at
        cost: dict[str, float] = {}
        if idle is not None:
            cost["window_s"] = round(window, 2)
        for name in CONTROL_PLANE:
            seconds = self.cpu_s.get(name, 0.0) - before.cpu_s.get(name, 0.0)
            cost[f"{name}_cpu_s"] = round(seconds, 2)
            cost[f"{name}_cpu_ms_per_pod"] = round(1000 * seconds / per, 3)
            if idle is not None:
                rate = idle.get(name, 0.0)
                cost[f"{name}_idle_cpu_per_s"] = round(rate, 3)
                net = seconds - rate * window
                cost[f"{name}_cpu_ms_per_pod_net"] = round(1000 * net / per, 3)
        events = self.watch_events - before.watch_events
        cost["watch_events"] = events
        cost["watch_events_per_pod"] = round(events / per, 2)
        cost["watch_kib_per_pod"] = round((self.watch_bytes - before.watch_bytes) / 1024 / per, 2)
        return cost


# ------------------------------------------------------------------------------ watching
@dataclass
class Watch:
    bound_at: dict[str, float] = field(default_factory=dict)
    #: When each pod was first seen: the watch delivery every scheduler waits for too.
    seen_at: dict[str, float] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # deleted, or with a deletionTimestamp
    #: When each pod in `gone` was first seen going.
    gone_at: dict[str, float] = field(default_factory=dict)
    #: Pending pods with a status.nominatedNodeName: a preemption still under way.
    nominated: set[str] = field(default_factory=set)
    #: When each pod was first seen Running (kwok's status write after its bind).
    running_at: dict[str, float] = field(default_factory=dict)
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
                    self.seen_at.setdefault(name, now)
                    if obj.get("spec", {}).get("nodeName") and name not in self.bound_at:
                        self.bound_at[name] = now
                    if obj.get("status", {}).get("phase") == "Running":
                        self.running_at.setdefault(name, now)
                    if event.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                        self.gone.add(name)
                        self.gone_at.setdefault(name, now)
                    if (
                        obj.get("status", {}).get("nominatedNodeName")
                        and not obj.get("spec", {}).get("nodeName")
                        and name not in self.gone
                    ):
                        self.nominated.add(name)
                    else:
                        self.nominated.discard(name)
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


async def podgroup_phases(kube: Kube, api: str) -> dict[str, int]:
    """How many of the run's PodGroups (of group/version `api`) are in each status.phase ("" for
    none yet) when the run ends: how far their status writer got by then."""
    phases: defaultdict[str, int] = defaultdict(int)
    listed = await kube.get(f"/apis/{api}/namespaces/{NAMESPACE}/podgroups")
    for group in listed.get("items") or []:
        phases[str((group.get("status") or {}).get("phase") or "")] += 1
    return dict(phases)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def daemon_cpu_seconds(env: Env) -> dict[str, float]:
    return {name: process_cpu_seconds(env.cluster.dir / "pids" / f"{name}.pid") for name in DAEMONS}


@dataclass(frozen=True)
class MachineCpu:
    """The machine's CPU time so far (/proc/stat's first line, in clock ticks), read at both
    ends of a window: how busy the machine was meanwhile, and how much of its time the
    hypervisor gave to others (steal). On this shared 2-core VM the rounds of one record have
    swung 1.5x for the same scheduler; the load average lags by a minute and says neither."""

    at: float
    busy: int
    steal: int
    total: int

    @classmethod
    def read(cls, stat: Path = Path("/proc/stat")) -> MachineCpu | None:
        try:
            fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None  # not Linux: the figures are left out
        # user nice system idle iowait irq softirq steal (guest time is within user)
        ticks = fields[:8] + [0] * (8 - len(fields[:8]))
        idle = ticks[3] + ticks[4]
        return cls(time.monotonic(), sum(ticks) - idle - ticks[7], ticks[7], sum(ticks))

    def since(self, before: MachineCpu) -> dict[str, float]:
        """Busy and stolen cores over the window (busy + steal + idle = the CPU count)."""
        total = self.total - before.total
        if total <= 0:
            return {}
        cores = total / max(self.at - before.at, 1e-9) / (os.sysconf("SC_CLK_TCK") or 100)
        return {
            "busy_cores": round(cores * (self.busy - before.busy) / total, 2),
            "steal_cores": round(cores * (self.steal - before.steal) / total, 2),
        }
