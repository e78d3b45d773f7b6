"""Fault injection on the local control plane, gangsched running as manifests/ ships it (its
ServiceAccount and ClusterRole, the ConfigMap's config with only the addresses changed):

* kill -9 at random moments while 100 gangs of 1-6 pods in three priority waves (with
  preemption) are scheduled on 20 nodes, restarted each time;
* a restart mid-gang (some members bound by a predecessor) finishes the gang from the API
  server's state;
* PodGroups, nodes and pods deleted between decision and bind.

The API server restarts are in test_apiserver_restarts.py, fuzzed objects in
test_fuzzed_objects.py; the run's opening, closing and summaries in fault_runs.py.
The invariants are read from the API server: a watch over the whole run checks every state
(no node over capacity, no pod bound twice, no victim of priority >= its preemptor, no gang
bound short), the end state is checked for gangs that fit but are not bound.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from pathlib import Path

import pytest

from .conftest import Cluster
from .fault_runs import (
    PRIORITIES,
    SEED,
    Restarter,
    fault_summary,
    no_tracebacks,
    quiesce,
    scheduled_workload,
    summarize,
    workdir,  # noqa: F401  (fixture)
)
from .harness import SIGS, eventually, manifest_config
from .invariants import (
    PodRecorder,
    bound_log_lines,
    final_state_violations,
    interrupted_gangs,
    preempted_log_lines,
)
from .k8s import Kube, condition
from .workload import Gang, Workload, random_gangs

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


# ------------------------------------------------------------------------------ kill -9 storm
async def test_kill9_storm_keeps_every_invariant(
    cluster: Cluster,
    kube: Kube,
    workdir: Path,  # noqa: F811  (the fixture)
) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    run = scheduled_workload(cluster, kube, workdir, "storm", nodes=20)
    async with run as (workload, replica, recorder, _):
        assert recorder is not None
        waves = [(40, "faults-low"), (35, "faults-mid"), (25, "faults-high")]
        kills: list[str] = []
        with Restarter(replica) as restarter:
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
                    await restarter.kill_and_restart(signal.SIGKILL)
                    kills.append(
                        f"kill {len(kills) + 1}: {bound} pods bound, {partial} gangs partial"
                    )
                await creating
            pods = await quiesce(workload, timeout=300)
        elapsed = time.monotonic() - started
        assert await replica.stop() == 0, replica.tail()
        await recorder.stop()

        interrupted = interrupted_gangs([replica])
        violations = recorder.violations(
            interrupted, logged_victims=preempted_log_lines([replica])
        ) + final_state_violations(workload, pods)
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
            f"exits on its own (lease lost under load) {len(restarter.own_exits)}; "
            f"{fault_summary(workload, recorder, interrupted)}\n  " + "\n  ".join(kills)
        )
        assert not violations, "\n".join(violations)
        assert recorder.victims, "the waves were meant to preempt"
        assert sum(1 for n in per_incarnation if n) >= 3, "kills should land mid-run"
        no_tracebacks(replica)


# ------------------------------------------------------------------------- restart mid-gang
async def test_restart_mid_gang_finishes_it_from_the_api_server(
    cluster: Cluster,
    kube: Kube,
    workdir: Path,  # noqa: F811  (the fixture)
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

        async def counted() -> dict[str, object] | None:
            # The status writer runs after the binds, on its own queue: wait for it.
            group = await kube.get(f"/apis/{SIGS}/namespaces/{workload.ns}/podgroups/train")
            status: dict[str, object] = group.get("status") or {}
            return status if status.get("scheduled") == 4 else None

        await eventually(counted, timeout=30, what="PodGroup status.scheduled == 4")
        print(f"\nrestart mid-gang: 2 bound before, {sorted(binds)} bound after restart on {nodes}")
        assert await replica.stop() == 0
        no_tracebacks(replica)


# --------------------------------------------------------------- deletions mid-cycle
async def test_deletions_between_decision_and_bind(
    cluster: Cluster,
    kube: Kube,
    workdir: Path,  # noqa: F811  (the fixture)
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
        # A bind already going out when the deletion happened may land a moment later (the
        # scheduler's watch and the recorder's lag on a loaded machine); one well after it is
        # stale: the scheduler bound what it knew was gone.
        stale = [
            f"{p} bound {bound_at[p] - deleted_at[g]:.2f}s after {g}'s deletion"
            for p, g in workload.pod_gang.items()
            if g in deleted_at
            and p in bound_at
            and bound_at[p] > deleted_at[g] + 2.0
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
        notes: list[str] = []

        async def cut_reported() -> bool:
            # Posted by the binder after the failed bind, on its own: wait for it.
            events = await kube.get(
                f"/apis/events.k8s.io/v1/namespaces/{workload.ns}/events",
                fieldSelector=f"regarding.name={cut.name}",
            )
            notes[:] = [e["note"] for e in events["items"] if e["reason"] == "FailedScheduling"]
            return any("not done" in n and "retrying the group" in n for n in notes)

        try:
            await eventually(cut_reported, timeout=60, what=f"{cut.name}'s bind-not-done event")
        except AssertionError:
            raise AssertionError(f"FailedScheduling notes on {cut.name}: {notes}") from None
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
