"""High availability: two replicas as the Deployment runs them (same ConfigMap config, the
shipped ServiceAccount, identities from POD_NAME), on the local control plane.

* only the leader binds; the follower is ready (warm caches) but writes nothing;
* kill -9 of the leader: the follower takes over within the lease duration plus a retry
  period and schedules what arrived meanwhile (the takeover time is measured and printed);
* the lease taken away from a leader: it stops writing and exits 1;
* SIGTERM of the leader releases the lease: the follower takes over at once.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from .conftest import Cluster
from .harness import SYSTEM_NS, Replica, eventually, install, manifest_config
from .invariants import bound_log_lines
from .k8s import Kube, unique_name
from .workload import Gang, Workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/gangsched"


@pytest.fixture
async def ha(cluster: Cluster, kube: Kube) -> AsyncIterator[dict[str, Any]]:
    install(cluster)
    await kube.delete(LEASE)  # no stale holder from an earlier test
    workload = Workload(kube, unique_name("ha"))
    await workload.setup({"ha-normal": 1000})
    await workload.add_nodes(2)
    workdir = cluster.dir / f"e2e-{workload.id}"
    # Pod names as a Deployment gives them; each replica its own loopback ports.
    replicas = [
        Replica(cluster, f"gangsched-7d9f-{suffix}", workdir, manifest_config())
        for suffix in ("a", "b")
    ]
    try:
        yield {"workload": workload, "replicas": replicas}
    finally:
        for replica in replicas:
            await replica.stop()
        await workload.cleanup()


def iso_seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def holder(kube: Kube) -> str:
    lease = await kube.get_or_none(LEASE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def gang_bound(workload: Workload, gang: Gang) -> bool:
    pods = await workload.pods()
    return all((pods.get(p) or {}).get("spec", {}).get("nodeName") for p in gang.pod_names())


async def test_only_the_leader_binds_and_the_follower_takes_over_after_kill9(
    ha: dict[str, Any], kube: Kube
) -> None:
    workload: Workload = ha["workload"]
    a, b = ha["replicas"]
    a.start()
    await a.wait_ready()
    await eventually(a.is_leader, timeout=30, what="the first replica to lead")
    b.start()
    await b.wait_ready()  # ready = caches synced: a warm standby
    assert await holder(kube) == a.name
    assert b.metric("gangsched_leader") == 0

    first = Gang("first", 3, 3, "500m", "ha-normal", 1000)
    await workload.create_gangs([first])
    await eventually(lambda: gang_bound(workload, first), timeout=60, what="first gang bound")
    await asyncio.sleep(2)  # the follower saw the same pods pending: it must not act on them

    def all_logged() -> dict[str, list[tuple[str, int, str]]] | None:
        # The API server shows a bind before the binder has read its answer and logged it.
        binds = bound_log_lines([a, b])
        return binds if len(binds) >= first.size else None

    binds = await eventually(all_logged, timeout=30, what="the first gang's binds logged")
    assert {who for lines in binds.values() for who, _, _ in lines} == {a.name}
    assert b.metric("gangsched_pods_bound_total") == 0
    assert b.metric("gangsched_api_requests_total", verb="POST") == 0, "a follower writes nothing"

    # Leader dies without releasing the lease; a gang arrives while nobody leads.
    a.kill(signal.SIGKILL)
    killed = time.monotonic()
    assert await a.wait_exit() == -signal.SIGKILL
    second = Gang("second", 3, 3, "500m", "ha-normal", 1000)
    await workload.create_gangs([second])
    await eventually(b.is_leader, timeout=40, interval=0.1, what="the follower to lead")
    led = time.monotonic() - killed
    await eventually(
        lambda: gang_bound(workload, second), timeout=40, interval=0.1, what="second gang bound"
    )
    scheduled = time.monotonic() - killed
    lease_seconds = a.config["leaderElection"]["leaseDurationSeconds"]
    retry = a.config["leaderElection"]["retryPeriodSeconds"]
    print(
        f"\nHA takeover after kill -9 of the leader: follower leading after {led:.1f}s, "
        f"pending gang bound after {scheduled:.1f}s (lease {lease_seconds}s, retry {retry}s)"
    )
    assert await holder(kube) == b.name
    # client-go's bound: the follower waits a full lease from its last observed renewal
    # (up to one retry period before the kill) and acquires at its next retry; 5 s more for
    # a loaded machine (still well short of a second lease, which a follower that waited for
    # the lease to be renewed by the dead leader again would need).
    assert led <= lease_seconds + 2 * retry + 5, led
    assert scheduled - led <= 10, "a warm follower schedules within seconds of leading"
    binds = bound_log_lines([a, b])
    assert all(who == b.name for p, lines in binds.items() if "second" in p for who, _, _ in lines)
    assert all(len(lines) == 1 for lines in binds.values()), binds

    # The restarted replica comes back as a follower; SIGTERM of the leader hands over at once.
    a.start()
    await a.wait_ready()
    assert not a.is_leader()
    b.kill(signal.SIGTERM)
    stopped = time.monotonic()
    await eventually(a.is_leader, timeout=20, interval=0.1, what="handover after SIGTERM")
    handover = time.monotonic() - stopped
    assert await b.wait_exit() == 0
    print(f"HA handover after SIGTERM of the leader (lease released): {handover:.1f}s")
    assert handover < lease_seconds, "a released lease is taken without waiting for expiry"
    third = Gang("third", 2, 2, "500m", "ha-normal", 1000)
    await workload.create_gangs([third])
    await eventually(lambda: gang_bound(workload, third), timeout=60, what="third gang bound")
    for replica in (a, b):
        assert "Traceback" not in replica.text(), replica.tail(60)


async def test_a_leader_that_loses_its_lease_stops_writing_and_exits_1(
    ha: dict[str, Any], kube: Kube
) -> None:
    workload: Workload = ha["workload"]
    a, _ = ha["replicas"]
    a.start()
    await a.wait_ready()
    await eventually(a.is_leader, timeout=30, what="leading")
    # Someone else takes the lease (as after a partition that outlived the lease).
    lease = await kube.get(LEASE)
    lease["spec"]["holderIdentity"] = "intruder"
    await kube.request("PUT", LEASE, lease)
    taken = time.time()
    code = await a.wait_exit(timeout=30)
    exited = time.time() - taken
    lost = next(r for r in a.events() if r.get("event") == "leadership" and not r["leading"])
    stopped_writing = iso_seconds(lost["timestamp"]) - taken
    print(
        f"\nlease taken away: the leader stopped writing after {stopped_writing:.1f}s "
        f"and exited {code} after {exited:.1f}s"
    )
    assert code == 1, a.tail()
    retry = a.config["leaderElection"]["retryPeriodSeconds"]
    deadline = a.config["leaderElection"]["renewDeadlineSeconds"]
    # Noticed at its next renewal (within a retry period and a request's time; slack for a
    # loaded machine), not at the renew deadline.
    assert stopped_writing <= min(retry + 4, deadline - 1), (
        "noticed at its next renewal, not at the deadline"
    )
    assert "leadership lost; exiting to restart clean" in a.text()
    late = Gang("late", 2, 2, "500m", "ha-normal", 1000)
    await workload.create_gangs([late])
    await asyncio.sleep(3)
    assert not await gang_bound(workload, late), "nobody leads: nothing may be bound"
    assert await holder(kube) == "intruder"
