"""kube-apiserver restarted (alone, crash-like) and together with etcd (graceful, long enough
to lose the lease) in a private control plane while gangs are scheduled: every invariant holds
and every gang that fits is bound once the API server is back."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import HACK, Cluster, build_binaries, start_cluster, stop_cluster
from .fault_runs import (
    PRIORITIES,
    SEED,
    fault_summary,
    no_tracebacks,
    quiesce,
    summarize,
)
from .harness import Replica, eventually, install, manifest_config
from .invariants import (
    PodRecorder,
    bound_log_lines,
    final_state_violations,
    interrupted_gangs,
    preempted_log_lines,
)
from .k8s import Kube, unique_name
from .workload import Gang, Workload, random_gangs

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


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
    workdir = tmp_path / "e2e-restart"  # kept by pytest: the logs of a failed run
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
        #    Down 12 s alone outlasts the 10 s renew deadline, however fast they restart.
        deadline = replica.config["leaderElection"]["renewDeadlineSeconds"]
        times2 = restart_apiserver(cluster, "--etcd", "--down", str(deadline + 2))
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
        violations = recorder.violations(
            interrupted, logged_victims=preempted_log_lines([replica])
        ) + final_state_violations(workload, pods)
        binds = bound_log_lines([replica])
        violations += [f"{p} bound more than once: {v}" for p, v in binds.items() if len(v) > 1]
        assert not violations, "\n".join(violations)
        # Whether the first outage outlasted the renew deadline depends on how fast the
        # apiserver came back (seconds on a quiet machine, more at load 10): the leader's last
        # renewal was up to a retry period before the outage began.
        retry = replica.config["leaderElection"]["retryPeriodSeconds"]
        # A longer one may end either way (the apiserver serves renewals a little before its
        # /readyz says so); the etcd restart below checks the exit.
        if times["downtime"] + retry + 1 < deadline:
            assert survived, f"a {times['downtime']:.1f}s outage is shorter than the deadline"
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
