"""Fault injection on the local control plane, gangsched running as manifests/ ships it (its
ServiceAccount and ClusterRole, the ConfigMap's config with only the addresses changed):

* kill -9 at random moments while 100 gangs of 1-6 pods in three priority waves (with
  preemption) are scheduled on 20 nodes, restarted each time;
* a restart mid-gang (some members bound by a predecessor) finishes the gang from the API
  server's state;
* kube-apiserver restarted (alone, crash-like) and together with etcd (graceful, long enough to
  lose the lease) in a private control plane while gangs are scheduled;
* PodGroups, nodes and pods deleted between decision and bind;
* fuzzed PodGroups and pods: reported on the object, never bound.

The invariants are read from the API server: a watch over the whole run checks every state
(no node over capacity, no pod bound twice, no victim of priority >= its preemptor, no gang
bound short), the end state is checked for gangs that fit but are not bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.api import (
    InvalidObject,
    PriorityResolver,
    pod_from_raw,
    pod_group_from_raw,
    priority_class_from_raw,
)

from .conftest import HACK, Cluster, build_binaries, start_cluster, stop_cluster
from .harness import SIGS, SYSTEM_NS, Replica, eventually, install, manifest_config
from .invariants import PodRecorder, bound_log_lines, final_state_violations, interrupted_gangs
from .k8s import JSON, Kube, condition, unique_name
from .workload import Gang, Workload, random_gangs

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

PRIORITIES = {"faults-low": 100, "faults-mid": 1000, "faults-high": 10000}
SEED = 20261121


async def free_lease(kube: Kube, name: str = "gangsched") -> None:
    """No stale holder from an earlier test (a killed replica's lease would block 15 s)."""
    await kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/{name}")


def no_tracebacks(*replicas: Replica) -> None:
    for replica in replicas:
        assert "Traceback" not in replica.text(), replica.tail(80)


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


# ------------------------------------------------------------------------------ kill -9 storm
async def test_kill9_storm_keeps_every_invariant(
    cluster: Cluster, kube: Kube, workdir: Path
) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    run = scheduled_workload(cluster, kube, workdir, "storm", nodes=20)
    async with run as (workload, replica, recorder, _):
        assert recorder is not None
        waves = [(40, "faults-low"), (35, "faults-mid"), (25, "faults-high")]
        kills: list[str] = []
        for index, (count, priority_class) in enumerate(waves):
            gangs = random_gangs(
                rng,
                count,
                prefix=f"w{index}-",
                priority_class=priority_class,
                priority=PRIORITIES[priority_class],
            )
            creating = asyncio.create_task(
                workload.create_gangs(gangs, shuffle_seed=rng.randrange(1 << 30))
            )
            for _ in range(3):
                await asyncio.sleep(rng.uniform(0.3, 2.5))
                partial = recorder.partial_gangs()
                bound = sum(1 for p in recorder.pods.values() if p["spec"].get("nodeName"))
                replica.kill(signal.SIGKILL)
                assert await replica.wait_exit() == -signal.SIGKILL
                kills.append(f"kill {len(kills) + 1}: {bound} pods bound, {partial} gangs partial")
                replica.start()
                await replica.wait_ready()
            await creating
        pods = await quiesce(workload, timeout=180)
        elapsed = time.monotonic() - started
        assert await replica.stop() == 0, replica.tail()
        await recorder.stop()

        interrupted = interrupted_gangs([replica])
        violations = recorder.violations(interrupted) + final_state_violations(workload, pods)
        binds = bound_log_lines([replica])
        violations += [
            f"{pod} bound more than once: {lines}" for pod, lines in binds.items() if len(lines) > 1
        ]
        for pod, lines in binds.items():
            name = pod.split("/", 1)[1]
            if name in pods and pods[name]["spec"].get("nodeName") not in (None, lines[0][2]):
                violations.append(
                    f"{pod} logged bound to {lines[0][2]}, is on {pods[name]['spec']['nodeName']}"
                )
        conflicts = sum(
            1
            for r in replica.events()
            if r.get("event") == "bind failed" and "already" in str(r.get("error"))
        )
        per_incarnation = [
            sum(1 for r in replica.events() if r.get("event") == "bound" and r["_incarnation"] == i)
            for i in range(1, replica.incarnation + 1)
        ]
        print(
            f"\nkill -9 storm (seed {SEED}): {len(kills)} kills in {elapsed:.0f}s; "
            f"{summarize(workload, pods, recorder)}; binds per incarnation {per_incarnation}; "
            f"bind conflicts (already bound) {conflicts}; "
            f"{fault_summary(workload, recorder, interrupted)}\n  " + "\n  ".join(kills)
        )
        assert not violations, "\n".join(violations)
        assert recorder.victims, "the waves were meant to preempt"
        assert sum(1 for n in per_incarnation if n) >= 3, "kills should land mid-run"
        no_tracebacks(replica)


# ------------------------------------------------------------------------- restart mid-gang
async def test_restart_mid_gang_finishes_it_from_the_api_server(
    cluster: Cluster, kube: Kube, workdir: Path
) -> None:
    run = scheduled_workload(cluster, kube, workdir, "midgang", nodes=2, record=False, start=False)
    async with run as (workload, replica, _, (n0, n1)):
        gang = Gang("train", 4, 4, "1", "faults-mid", PRIORITIES["faults-mid"])
        await workload.create_gangs([gang])
        pods = await workload.pods()
        # What a scheduler killed after two of its four binds leaves behind.
        for name in ("train-0", "train-1"):
            await kube.bind(workload.ns, name, n0, pods[name]["metadata"]["uid"])
        replica.start()
        await replica.wait_ready()

        async def whole() -> dict[str, str] | None:
            current = await workload.pods()
            nodes = {n: current[n]["spec"].get("nodeName") for n in gang.pod_names()}
            return nodes if all(nodes.values()) else None

        nodes = await eventually(whole, timeout=60, what="the gang to be whole")
        assert nodes["train-0"] == nodes["train-1"] == n0, "bound members stay where they are"

        def logged() -> dict[str, list[tuple[str, int, str]]] | None:
            # The API server shows a bind before the scheduler has read its answer and logged it.
            binds = bound_log_lines([replica])
            return binds if len(binds) >= 2 else None

        binds = await eventually(logged, timeout=30, what="both binds logged")
        assert sorted(binds) == [f"{workload.ns}/train-2", f"{workload.ns}/train-3"], binds
        assert {lines[0][2] for lines in binds.values()} <= {n0, n1}
        assert replica.metric("gangsched_binding_errors_total") == 0
        group = await kube.get(f"/apis/{SIGS}/namespaces/{workload.ns}/podgroups/train")
        status = group.get("status") or {}
        assert status.get("scheduled") == 4, status
        print(f"\nrestart mid-gang: 2 bound before, {sorted(binds)} bound after restart on {nodes}")
        assert await replica.stop() == 0
        no_tracebacks(replica)


# ------------------------------------------------------------------- API server restarts
@pytest.fixture(scope="module")
def private_cluster() -> Any:
    """Its own control plane: restarting the session's apiserver would disturb other tests."""
    bin_dir = build_binaries()
    cluster_dir = Path(tempfile.mkdtemp(prefix="gangsched-e2e-restart-"))
    c = start_cluster(bin_dir, cluster_dir, {"NODES": "0"})
    try:
        yield c
    finally:
        stop_cluster(cluster_dir, keep_state=False)


def restart_apiserver(cluster: Cluster, *args: str) -> dict[str, float]:
    proc = subprocess.run(
        [str(HACK / "cluster-restart-apiserver.sh"), *args],
        env=cluster.script_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{cluster.log_tail()}"
    return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", proc.stdout)}


async def supervise(replica: Replica, stop: asyncio.Event) -> None:
    """What the kubelet does: restart the container whenever it exits."""
    while not stop.is_set():
        if replica.process is not None and not replica.alive:
            await replica.wait_exit()
            replica.start()
        await asyncio.sleep(0.2)


async def test_apiserver_and_etcd_restarts_mid_run(
    private_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = private_cluster
    rng = random.Random(SEED + 1)
    install(cluster)
    kube = await Kube.from_kubeconfig(cluster.kubeconfig)
    workdir = cluster.dir / "e2e-restart"
    workload = Workload(kube, unique_name("restart"))
    replica = Replica(cluster, "restart-0", workdir, manifest_config())
    recorder = PodRecorder(workload, cluster.kubeconfig)
    stop = asyncio.Event()
    supervisor: asyncio.Task[None] | None = None
    try:
        await workload.setup(PRIORITIES)
        await workload.add_nodes(10)
        await recorder.start()
        replica.start()
        await replica.wait_ready()
        supervisor = asyncio.create_task(supervise(replica, stop))

        async def bound_all(gangs: list[Gang]) -> bool:
            pods = await workload.pods()
            return all(
                sum(1 for p in g.pod_names() if (pods.get(p) or {}).get("spec", {}).get("nodeName"))
                >= g.min_member
                for g in gangs
            )

        # 1. A crash of the apiserver alone (SIGKILL, back in seconds) while a wave binds.
        wave = random_gangs(rng, 25, prefix="a-", priority_class="faults-low", priority=100)
        creating = asyncio.create_task(workload.create_gangs(wave))
        await eventually(
            lambda: any(p["spec"].get("nodeName") for p in recorder.pods.values()),
            timeout=60,
            interval=0.05,
            what="first binds",
        )
        times = restart_apiserver(cluster, "--signal", "KILL")
        with contextlib.suppress(Exception):
            await creating  # creates sent while it was down fail; the rest of the wave is there
        fits = random_gangs(
            rng, 6, prefix="b-", priority_class="faults-high", priority=10000, max_size=3
        )
        await workload.create_gangs(fits)
        await eventually(
            lambda: bound_all(fits), timeout=90, what="gangs created after the restart"
        )
        recovery_kill = time.time() - times["ready_at"]
        survived = replica.incarnation == 1
        relists = replica.metric("gangsched_informer_relists_total")
        rewatches = sum(1 for r in replica.events() if r.get("event") == "list/watch interrupted")

        # 2. etcd and the apiserver stopped gracefully and down long enough that the leader's
        #    lease cannot be renewed (> renew deadline): it must exit 1 and come back clean.
        times2 = restart_apiserver(cluster, "--etcd", "--down", "6")
        more = random_gangs(
            rng, 6, prefix="c-", priority_class="faults-high", priority=10000, max_size=3
        )
        await eventually(
            lambda: _try(workload.create_gangs(more)), timeout=60, what="create after restart"
        )
        await eventually(
            lambda: bound_all(more), timeout=120, what="gangs created after the etcd restart"
        )
        recovery_etcd = time.time() - times2["ready_at"]

        pods = await quiesce(workload, timeout=120)
        stop.set()
        await supervisor
        supervisor = None
        await replica.stop()
        await recorder.stop()
        interrupted = interrupted_gangs([replica])
        print(
            f"\napiserver restarts: SIGKILL (down {times['downtime']:.1f}s): scheduler "
            f"{'kept running' if survived else 'restarted'}, new gangs bound "
            f"{recovery_kill:.1f}s after the apiserver was ready; etcd+apiserver SIGTERM "
            f"(down {times2['downtime']:.1f}s): exit codes {replica.exit_codes}, new gangs bound "
            f"{recovery_etcd:.1f}s after ready; after the first restart: {rewatches} watches "
            f"re-established, {relists:.0f} relists; "
            f"{summarize(workload, pods, recorder)}; "
            f"{fault_summary(workload, recorder, interrupted)}"
        )
        violations = recorder.violations(interrupted) + final_state_violations(workload, pods)
        binds = bound_log_lines([replica])
        violations += [f"{p} bound more than once: {v}" for p, v in binds.items() if len(v) > 1]
        assert not violations, "\n".join(violations)
        assert survived, "a 3 s apiserver outage is shorter than the renew deadline"
        assert 1 in replica.exit_codes, "an outage longer than the renew deadline exits 1"
        no_tracebacks(replica)
    finally:
        stop.set()
        if supervisor is not None:
            supervisor.cancel()
        await replica.stop()
        await recorder.stop()
        await workload.cleanup()
        await kube.close()


async def _try(coro: Any) -> bool:
    try:
        await coro
    except Exception:
        return False
    return True


# --------------------------------------------------------------- deletions mid-cycle
async def test_deletions_between_decision_and_bind(
    cluster: Cluster, kube: Kube, workdir: Path
) -> None:
    config = manifest_config(bindConcurrency=1)
    run = scheduled_workload(cluster, kube, workdir, "delete", nodes=1, config=config)
    async with run as (workload, replica, recorder, _):
        assert recorder is not None

        # A waiting gang whose PodGroup is deleted never binds, even when room appears.
        waiting = Gang("waiting", 3, 3, "2", "faults-low", 100)
        await workload.create_gangs([waiting])
        await eventually(
            lambda: _all_conditions(workload, waiting, "False"), timeout=60, what="unschedulable"
        )
        await kube.delete(f"/apis/{SIGS}/namespaces/{workload.ns}/podgroups/waiting")
        await workload.add_nodes(2)
        await eventually(
            lambda: _message_contains(workload, waiting, "not found"),
            timeout=60,
            what="members say their PodGroup is gone",
        )

        # A member deleted while its gang's binds are going out (bindConcurrency 1 makes the
        # window between decision and bind wide enough to hit): the rest is not bound.
        deleted_at: dict[str, float] = {}
        cut = await _delete_mid_bind(kube, workload, recorder)
        deleted_at[cut.name] = time.monotonic()

        # Races: delete a PodGroup, a member or the only node right after creating a gang.
        rng = random.Random(SEED + 2)
        deleted_node: dict[str, str] = {}  # gang -> the node deleted under it
        for i in range(12):
            kind = ("podgroup", "pod", "node")[i % 3]
            gang = Gang(f"race{i}", 3, 3, "500m", "faults-low", 100)
            if kind == "node":
                (node,) = await workload.add_nodes(1)
            await workload.create_gangs([gang])
            await asyncio.sleep(rng.uniform(0.0, 0.15))
            if kind == "podgroup":
                await kube.delete(f"/apis/{SIGS}/namespaces/{workload.ns}/podgroups/{gang.name}")
            elif kind == "pod":
                await kube.delete(
                    f"/api/v1/namespaces/{workload.ns}/pods/{gang.name}-2", grace_period_seconds=0
                )
            else:
                await kube.delete(f"/api/v1/nodes/{node}")
            deleted_at[gang.name] = time.monotonic()
            if kind == "node":
                deleted_node[gang.name] = node
        await asyncio.sleep(5)
        pods = await workload.pods()
        assert replica.alive, replica.tail()
        bound_at = recorder.first_bound
        stale = [
            f"{p} bound {bound_at[p] - deleted_at[g]:.2f}s after {g}'s deletion"
            for p, g in workload.pod_gang.items()
            if g in deleted_at
            and p in bound_at
            and bound_at[p] > deleted_at[g] + 1.0
            # a node deleted: only binds to that node are stale (the others may take the gang)
            and (g not in deleted_node or deleted_node[g] in recorder.node_history[p])
        ]
        assert not stale, stale
        assert all(
            not p["spec"].get("nodeName") for n, p in pods.items() if n.startswith("waiting")
        )
        # Gangs we cut on purpose may stay short; everything else must hold.
        violations = [
            v for v in recorder.violations() if not any(f"gang {g} " in v for g in deleted_at)
        ]
        assert not violations, violations
        skipped = sum(1 for r in replica.events() if r.get("event") == "bind failed")
        cut_bound = sum(
            1 for p in cut.pod_names() if (pods.get(p) or {}).get("spec", {}).get("nodeName")
        )
        assert 0 < cut_bound < cut.min_member
        events = await kube.get(
            f"/apis/events.k8s.io/v1/namespaces/{workload.ns}/events",
            fieldSelector=f"regarding.name={cut.name}",
        )
        notes = [e["note"] for e in events["items"] if e["reason"] == "FailedScheduling"]
        assert any("not done" in n and "retrying the group" in n for n in notes), notes
        bound = sum(1 for p in pods.values() if p["spec"].get("nodeName"))
        print(
            f"\ndeletions mid-cycle: 12 races, {bound} "
            f"pods bound, {skipped} binds not done (changed after the decision), no stale binding"
        )
        assert await replica.stop() == 0
        no_tracebacks(replica)


async def _delete_mid_bind(kube: Kube, workload: Workload, recorder: PodRecorder) -> Gang:
    """A 30-pod gang; as soon as its first member shows bound, delete one that is not:
    returns the gang (retried with a new one if all 30 were already bound)."""

    def bound(pod: str) -> bool:
        return bool(recorder.pods.get(pod, {}).get("spec", {}).get("nodeName"))

    for attempt in range(3):
        gang = Gang(f"wide{attempt}", 30, 30, "100m", "faults-low", 100)
        await workload.create_gangs([gang])
        names = gang.pod_names()
        await eventually(
            lambda names=names: any(bound(p) for p in names),
            timeout=60,
            interval=0.005,
            what=f"{gang.name} binding",
        )
        unbound = [p for p in names if not bound(p)]
        if unbound:
            await kube.delete(
                f"/api/v1/namespaces/{workload.ns}/pods/{unbound[-1]}", grace_period_seconds=0
            )
            return gang
    raise AssertionError("every bind finished before a member could be deleted")


async def _all_conditions(workload: Workload, gang: Gang, status: str) -> bool:
    pods = await workload.pods()
    return all(
        (condition(pods.get(p) or {}, "PodScheduled") or {}).get("status") == status
        for p in gang.pod_names()
    )


async def _message_contains(workload: Workload, gang: Gang, text: str) -> bool:
    pods = await workload.pods()
    return all(
        text in (condition(pods.get(p) or {}, "PodScheduled") or {}).get("message", "")
        for p in gang.pod_names()
    )


# ------------------------------------------------------------------------ fuzzed objects
GANG_GROUPS = "gang.scheduling.koordinator.sh/groups"
MIN_AVAILABLE = "gang.scheduling.koordinator.sh/min-available"
GANG_NAME = "gang.scheduling.koordinator.sh/name"

garbage = st.one_of(
    st.text(alphabet="ab/ ,[]{}\"'0123456789-", max_size=12),
    st.sampled_from(["", "[", "{}", "3", '["x/y/z"]', "[1, 2]", '"solo"', "null", "-1", "0"]),
)


@st.composite
def fuzzed_gang(draw: st.DrawFn) -> dict[str, Any]:
    """A PodGroup (and its members' annotations) that the API server accepts but may be
    malformed for gangsched: unknown priority class, garbage GangGroup annotation, garbage
    Koordinator min-available on members."""
    annotations = {}
    if draw(st.booleans()):
        annotations[GANG_GROUPS] = draw(garbage)
    return {
        "minMember": draw(st.integers(1, 3)),
        "size": draw(st.integers(1, 3)),
        "priorityClassName": draw(st.sampled_from(["faults-low", "", "no-such-class"])),
        "annotations": annotations,
        "podAnnotation": draw(st.one_of(st.none(), garbage)),
        "lone_koordinator": draw(st.booleans()),
    }


def draw_examples(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """`count` examples, the same on every run (derandomized, no example database)."""
    examples: list[Any] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        examples.append(example)

    collect()
    return examples[:count]


async def test_fuzzed_objects_are_reported_and_never_bound(
    cluster: Cluster, kube: Kube, workdir: Path
) -> None:
    run = scheduled_workload(cluster, kube, workdir, "fuzz", nodes=3, record=False)
    async with run as (workload, replica, _, _):
        specs = draw_examples(fuzzed_gang(), 24)
        created: list[JSON] = []
        for i, spec in enumerate(specs):
            name = f"f{i:02d}"
            if spec["lone_koordinator"]:
                pod = workload.pod(name, Gang(name, 1, 1, "100m", "faults-low", 100, lone=True))
                pod["metadata"]["annotations"] = {GANG_NAME: name}
                if spec["podAnnotation"] is not None:
                    pod["metadata"]["annotations"][MIN_AVAILABLE] = spec["podAnnotation"]
                created += await _create_all(kube, workload, [pod])
                continue
            group: JSON = {
                "apiVersion": SIGS,
                "kind": "PodGroup",
                "metadata": {
                    "name": name,
                    "namespace": workload.ns,
                    "annotations": spec["annotations"],
                },
                "spec": {"minMember": spec["minMember"]},
            }
            if spec["priorityClassName"]:
                group["spec"]["priorityClassName"] = spec["priorityClassName"]
            gang = Gang(name, spec["size"], spec["minMember"], "100m", "faults-low", 100)
            members = [workload.pod(p, gang) for p in gang.pod_names()]
            created += await _create_all(kube, workload, [group, *members])
        classes = (await kube.get("/apis/scheduling.k8s.io/v1/priorityclasses"))["items"]
        resolver = PriorityResolver(
            [priority_class_from_raw({**c, "kind": "PriorityClass"}) for c in classes]
        )
        invalid: dict[tuple[str, str], str] = {}
        for obj in created:
            try:
                if obj["kind"] == "Pod":
                    pod_from_raw(obj, priorities=resolver)
                else:
                    pod_group_from_raw(obj, priorities=resolver)
            except InvalidObject as exc:
                invalid[(obj["kind"], obj["metadata"]["name"])] = str(exc.problems[0].message)
        assert invalid, "the fuzzer should produce objects gangsched cannot use"

        async def all_reported() -> bool:
            events = (await kube.get(f"/apis/events.k8s.io/v1/namespaces/{workload.ns}/events"))[
                "items"
            ]
            reported = {
                (e["regarding"]["kind"], e["regarding"]["name"])
                for e in events
                if e["reason"] in ("InvalidObject", "FailedScheduling")
                and "cannot use this object" in e.get("note", "")
                and e["regarding"].get("uid")
            }
            return set(invalid) <= reported

        await eventually(all_reported, timeout=60, what="an event on every invalid object")
        await asyncio.sleep(3)  # give the scheduler time to (wrongly) bind them
        pods = await workload.pods()
        wrongly = []
        for (kind, name), problem in invalid.items():
            names = [name] if kind == "Pod" else [p for p in pods if p.startswith(f"{name}-")]
            wrongly += [f"{p} ({problem})" for p in names if pods[p]["spec"].get("nodeName")]
        assert not wrongly, f"bound despite an invalid object: {wrongly}"
        assert replica.alive
        print(
            f"\nfuzz: {len(created)} objects accepted by the API server, {len(invalid)} invalid "
            f"for gangsched, all reported by event, none bound"
        )
        assert await replica.stop() == 0
        no_tracebacks(replica)


async def _create_all(kube: Kube, workload: Workload, objects: list[JSON]) -> list[JSON]:
    """Create what the API server accepts (it rejects some fuzzed objects itself)."""
    from .k8s import KubeError

    out = []
    for obj in objects:
        path = (
            f"/api/v1/namespaces/{workload.ns}/pods"
            if obj["kind"] == "Pod"
            else f"/apis/{SIGS}/namespaces/{workload.ns}/podgroups"
        )
        with contextlib.suppress(KubeError):
            created = await kube.create(path, obj)
            created.setdefault("kind", obj["kind"])
            created.setdefault("apiVersion", obj["apiVersion"])
            out.append(created)
    return out
