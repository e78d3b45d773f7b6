"""What every fault test shares: the opening and closing of a run (gangsched installed, a
replica ready, the recorder watching, the workload cleaned up), waiting for quiescence, and
the summaries printed with the results. The `workdir` fixture is imported by the tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cluster
from .harness import SYSTEM_NS, Replica, install, manifest_config
from .invariants import PodRecorder, final_state_violations
from .k8s import JSON, Kube, unique_name
from .workload import Workload

PRIORITIES = {"faults-low": 100, "faults-mid": 1000, "faults-high": 10000}
SEED = 20261121


async def free_lease(kube: Kube, name: str = "gangsched") -> None:
    """No stale holder from an earlier test (a killed replica's lease would block 15 s)."""
    await kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/{name}")


def no_tracebacks(*replicas: Replica) -> None:
    for replica in replicas:
        assert "Traceback" not in replica.text(), replica.tail(80)


class Restarter:
    """Starts the replica again when it exits on its own, as the Deployment's pod restart
    would. A leader that cannot renew its lease within the renew deadline (10 s) exits 1 by
    design; on a machine at load 15+ that happens, and a run that never restarted it would
    wait for a scheduler that is gone. Only exit code 1 (leadership lost) is accepted: any
    other exit fails the run. Deliberate kills go through `kill_and_restart`."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.own_exits: list[int] = []
        self._busy = False
        self._task: asyncio.Task[None] | None = None

    def __enter__(self) -> Restarter:
        self._task = asyncio.create_task(self._watch())
        return self

    def __exit__(self, *_: object) -> None:
        if self._task is None:
            return
        if self._task.done() and not self._task.cancelled():
            error = self._task.exception()
            if error is not None:  # an exit other than "leadership lost"
                raise error
        self._task.cancel()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            if not self._busy and not self.replica.alive:
                await self._restart_after_own_exit()

    async def _restart_after_own_exit(self) -> None:
        code = await self.replica.wait_exit()
        self.own_exits.append(code)
        assert code == 1, f"{self.replica.name} exited {code} on its own:\n{self.replica.tail()}"
        self.replica.start()

    async def kill_and_restart(self, sig: int) -> None:
        """Kill the replica (or, if it exited on its own just before, note that), start it
        again and wait until it is ready."""
        self._busy = True
        try:
            if self.replica.alive:
                self.replica.kill(sig)
                code = await self.replica.wait_exit()
                assert code == -sig, f"{self.replica.name} exited {code}, not by signal {sig}"
            else:
                await self._restart_after_own_exit()
                self.replica.kill(sig)
                assert await self.replica.wait_exit() == -sig
            self.replica.start()
            await self.replica.wait_ready()
        finally:
            self._busy = False


async def quiesce(workload: Workload, *, timeout: float, stable_polls: int = 3) -> dict[str, JSON]:
    """Wait until nothing that fits is left pending, nothing is terminating and the set of
    bound pods stopped changing; return the pods. Fails with the reasons after `timeout`."""
    deadline = time.monotonic() + timeout
    previous: frozenset[tuple[str, str]] | None = None
    stable = 0
    stuck: dict[str, float] = {}
    while True:
        pods = await workload.pods()
        bound = frozenset(
            (n, p["spec"]["nodeName"]) for n, p in pods.items() if p["spec"].get("nodeName")
        )
        terminating = [n for n, p in pods.items() if p["metadata"].get("deletionTimestamp")]
        for name in terminating:
            # kwok (the kubelet here) finishes graceful deletions within a second; one that
            # hangs is kwok's problem, not the scheduler's: finish it as pod GC would.
            since = stuck.setdefault(name, time.monotonic())
            if time.monotonic() - since > 30:
                meta, spec = pods[name]["metadata"], pods[name]["spec"]
                print(
                    f"\n{name} terminating for 30s (node {spec.get('nodeName')}, "
                    f"deletionTimestamp {meta.get('deletionTimestamp')}, finalizers "
                    f"{meta.get('finalizers')}, phase {pods[name].get('status', {}).get('phase')}):"
                    " force-deleting it"
                )
                await workload.kube.delete(
                    f"/api/v1/namespaces/{workload.ns}/pods/{name}", grace_period_seconds=0
                )
        fits = final_state_violations(workload, pods)
        stable = stable + 1 if bound == previous and not terminating and not fits else 0
        previous = bound
        if stable >= stable_polls:
            return pods
        if time.monotonic() > deadline:
            nominated = sorted(
                f"{n}->{p['status']['nominatedNodeName']}"
                for n, p in pods.items()
                if not p["spec"].get("nodeName")
                and (p.get("status") or {}).get("nominatedNodeName")
            )
            reasons = fits[:10] + [f"terminating: {terminating[:10]}"] * bool(terminating)
            reasons.append(f"pending with a nomination: {nominated[:20]}")
            raise AssertionError(f"not quiescent after {timeout:.0f}s: {reasons}")
        await asyncio.sleep(2.0)


def fault_summary(workload: Workload, recorder: PodRecorder, interrupted: dict[str, bool]) -> str:
    short = [
        g
        for g in interrupted
        if g in workload.gangs and 0 < recorder.max_bound.get(g, 0) < workload.gangs[g].min_member
    ]
    return (
        f"{len(interrupted)} gang(s) had binds cut short by the fault, {len(short)} of them "
        f"stayed short after being retried (higher-priority work took the room) {short}"
    )


def summarize(workload: Workload, pods: dict[str, JSON], recorder: PodRecorder) -> str:
    whole = sum(
        1
        for g in workload.gangs.values()
        if sum(1 for p in g.pod_names() if (pods.get(p) or {}).get("spec", {}).get("nodeName"))
        >= g.min_member
    )
    bound = sum(1 for p in pods.values() if p["spec"].get("nodeName"))
    return (
        f"{len(workload.gangs)} gangs ({whole} whole at the end), {len(pods)} pods left "
        f"({bound} bound), {len(recorder.victims)} preemption victims, "
        f"{recorder.events} pod states checked"
    )


@pytest.fixture
async def workdir(cluster: Cluster) -> AsyncIterator[Path]:
    """Kubeconfigs and logs inside the cluster dir, so cluster-down can find strays."""
    path = cluster.dir / f"e2e-{unique_name('faults')}"
    path.mkdir(parents=True)
    yield path


@contextlib.asynccontextmanager
async def scheduled_workload(
    cluster: Cluster,
    kube: Kube,
    workdir: Path,
    name: str,
    *,
    nodes: int,
    config: dict[str, Any] | None = None,
    record: bool = True,
    start: bool = True,
) -> AsyncIterator[tuple[Workload, Replica, PodRecorder | None, list[str]]]:
    """The opening and closing every test here shares: gangsched installed, the lease free, a
    namespace of its own with `nodes` kwok nodes, the PodRecorder watching (if `record`) and
    replica <name>-0 ready (if `start`; else the test starts it). Afterwards the replica and
    the recorder stop and the workload goes, unless GANGSCHED_E2E_KEEP_WORKLOAD is set."""
    install(cluster)
    await free_lease(kube)
    workload = Workload(kube, unique_name(name))
    replica = Replica(cluster, f"{name}-0", workdir, config or manifest_config())
    recorder = PodRecorder(workload, cluster.kubeconfig) if record else None
    try:
        await workload.setup(PRIORITIES)
        names = await workload.add_nodes(nodes)
        if recorder is not None:
            await recorder.start()
        if start:
            replica.start()
            await replica.wait_ready()
        yield workload, replica, recorder, names
    finally:
        await replica.stop()
        if recorder is not None:
            await recorder.stop()
        if not os.environ.get("GANGSCHED_E2E_KEEP_WORKLOAD"):
            await workload.cleanup()
