"""The invariants of a fault test, checked on every state the API server went through:
:class:`PodRecorder` watches the test's pods for the whole run (never a node over capacity,
never a pod moved between nodes, no victim of its preemptor's priority, no gang bound short of
minMember); :func:`final_state_violations` checks the end state (gangs whole or explained,
every gang that fits is bound); the log helpers read what the replicas say they bound."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gangsched.core.quantity import to_milli, to_units
from gangsched.edge.informer import Informer
from gangsched.edge.kube import Kube as EdgeKube

from .harness import Replica
from .k8s import JSON, condition
from .workload import Workload


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
    #: Pods deleted while the watch was down (gone at a relist): the watch never showed their
    #: last states, e.g. a bind and a preemption both inside an API server restart.
    unseen_deletions: set[str] = field(default_factory=set)
    #: Every pod the watch or a list has shown. One created, bound and deleted while the watch
    #: was down (between an API server's restart and the recorder's relist) is not in it.
    ever_seen: set[str] = field(default_factory=set)
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
        listed = {o["metadata"]["name"]: o for o in objects}
        self.unseen_deletions.update(set(self.pods) - set(listed))
        self.pods = listed
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
        self.ever_seen.add(name)
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

    def violations(
        self,
        interrupted: dict[str, bool] | None = None,
        *,
        logged_victims: dict[str, str] | None = None,
    ) -> list[str]:
        """`interrupted`: gangs whose binds a fault cut short (see `interrupted_gangs`), with
        whether the scheduler tried them again; such a gang may stay short if it was retried
        (its decision placed it whole; the fault, then higher-priority work, left it short).
        `logged_victims` (see `preempted_log_lines`): pods the scheduler says it preempted
        (logged once the API server accepted their DisruptionTarget condition and deletion).
        They count only for pods deleted while the watch was down, whose condition the watch
        could not show: a gang bound whole and preempted within an API server restart is
        seen short (its last bind and its preemption both fell in the gap). That includes
        pods the watch never showed at all: created, bound and preempted (a Single gang loses
        only some members) between the API server's return and the recorder's relist, as
        seen once in a fresh-clone CI run."""
        interrupted = interrupted or {}
        victims = dict(self.victims)
        for pod, preemptor in (logged_victims or {}).items():
            if pod in self.unseen_deletions or pod not in self.ever_seen:
                victims.setdefault(pod, preemptor)
        out = [f"node over capacity: {o}" for o in self.overcommits]
        out += [
            f"pod {p} was bound to more than one node: {sorted(n)}"
            for p, n in self.node_history.items()
            if len(n) > 1
        ]
        w = self.workload
        for victim, preemptor in victims.items():
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
            lost = any(p in victims for p in gang.pod_names())
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
    them, or a bind failed (API server gone). Read from the schedulers' logs. A bind whose
    outcome was unknown (connection lost) and that reading the pod back showed done
    ("bound", checked) was not cut short; one still unknown when the process ended was."""
    out: dict[str, bool] = {}
    for replica in replicas:
        owed: dict[str, int] = defaultdict(int)
        unsettled: dict[str, str] = {}  # pod -> gang, bind outcome still unknown
        incarnation = 0

        for record in replica.events():
            if record["_incarnation"] != incarnation:
                _cut_short(out, owed, unsettled)
                owed.clear()
                unsettled.clear()
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
                unsettled.pop(str(record.get("pod")), None)
            elif event == "bind outcome unknown; checking":
                unsettled[str(record.get("pod"))] = group
            elif event == "bind failed":
                unsettled.pop(str(record.get("pod")), None)
                out.setdefault(group, False)
        _cut_short(out, owed, unsettled)
    return out


def _cut_short(out: dict[str, bool], owed: dict[str, int], unsettled: dict[str, str]) -> None:
    """At the end of an incarnation's log: gangs with binds not sent, or not known done."""
    for gang, count in owed.items():
        if count > 0:
            out.setdefault(gang, False)
    for gang in unsettled.values():
        out.setdefault(gang, False)


def preempted_log_lines(replicas: Iterable[Replica]) -> dict[str, str]:
    """Pod name -> preemptor ("ns/name") for every preemption the schedulers logged: the log
    line is written once the API server accepted the victim's DisruptionTarget condition and
    its deletion (edge/pod_writes.py)."""
    out: dict[str, str] = {}
    for replica in replicas:
        for record in replica.events():
            if record.get("event") == "preempted":
                out[str(record["pod"]).rsplit("/", 1)[-1]] = str(record.get("preemptor", "?"))
    return out
