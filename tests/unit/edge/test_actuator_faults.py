"""The actuator between decision and bind: a pod, PodGroup or node that changed in between is
not bound (and the gang is retried, with an event saying why); a bind whose outcome is
unknown keeps its capacity until the pod is read back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED
from gangsched.core.preemption import build_preemptor
from gangsched.core.scheduler import Scheduler
from gangsched.edge.actuator import Actuator
from gangsched.edge.cache import ClusterCache
from gangsched.edge.events import EventRecorder
from gangsched.edge.kube import KubeError
from gangsched.edge.metrics import Metrics
from tests.builders import raw_node, raw_pod, raw_pod_group

pytestmark = pytest.mark.asyncio(loop_scope="function")


class FakeKube:
    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.bind_error: Exception | None = None
        self.pods: dict[str, dict[str, Any]] = {}
        self.get_error: Exception | None = None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/binding") and self.bind_error is not None:
            raise self.bind_error
        self.posts.append((path, body))
        return {}

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if self.get_error is not None:
            error, self.get_error = self.get_error, None
            raise error
        name = path.rsplit("/", 1)[-1]
        if name not in self.pods:
            raise KubeError(404, "NotFound", "gone")
        return self.pods[name]

    async def patch(self, *_: Any, **__: Any) -> dict[str, Any]:
        return {}

    @property
    def binds(self) -> list[str]:
        return [p for p, _ in self.posts if p.endswith("/binding")]

    @property
    def events(self) -> list[dict[str, Any]]:
        return [b for p, b in self.posts if "/events" in p]


def setup(min_member: int = 3, size: int = 3) -> tuple[FakeKube, ClusterCache, Actuator]:
    kube = FakeKube()
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"))
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    cache.nodes().replace([raw_node("n1", cpu="8")])
    cache.pod_groups().replace([raw_pod_group("g", min_member)])
    cache.pods().replace([raw_pod(f"g-{i}", group="g") for i in range(size)])
    actuator = actuator_for(kube, cache)
    return kube, cache, actuator


def actuator_for(kube: Any, cache: ClusterCache) -> Actuator:
    """An actuator writing to `kube`, a test's stand-in for the API client."""
    return Actuator(
        kube=kube,
        scheduler=cache.scheduler,
        cache=cache,
        events=EventRecorder(kube=kube),
        metrics=Metrics(),
    )


def decide(cache: ClusterCache, actuator: Actuator) -> None:
    report = cache.scheduler.step(0.0)
    assert report is not None and report.result == SCHEDULED
    actuator.apply(report)  # tasks start only when the test yields


def pending(cache: ClusterCache) -> list[str]:
    cluster = cache.scheduler.cluster
    return sorted(p.name for p in cluster.pods.values() if cluster.is_pending(p))


async def test_all_members_bound_when_nothing_changed() -> None:
    kube, cache, actuator = setup()
    decide(cache, actuator)
    await actuator.drain()
    assert len(kube.binds) == 3 and pending(cache) == []


async def test_member_deleted_between_decision_and_bind_binds_none_of_a_full_gang() -> None:
    kube, cache, actuator = setup()
    decide(cache, actuator)
    cache.pods().delete(raw_pod("g-1", group="g"))
    await actuator.drain()
    assert kube.binds == []  # 2 < minMember 3: binding the others would leave it short
    assert pending(cache) == ["g-0", "g-2"]
    notes = [e["note"] for e in kube.events if e["reason"] == "FailedScheduling"]
    assert any("g-1 was deleted" in note for note in notes)


async def test_extra_member_deleted_does_not_stop_a_gang_above_min_member() -> None:
    kube, cache, actuator = setup(min_member=2, size=3)
    decide(cache, actuator)
    cache.pods().delete(raw_pod("g-2", group="g"))
    await actuator.drain()
    assert sorted(b.split("/")[-2] for b in kube.binds) == ["g-0", "g-1"]


async def test_podgroup_deleted_between_decision_and_bind_binds_nothing() -> None:
    kube, cache, actuator = setup()
    decide(cache, actuator)
    cache.pod_groups().delete(raw_pod_group("g", 3))
    await actuator.drain()
    assert kube.binds == []
    # Retried after its backoff (the actuator's clock is monotonic): members wait for it.
    report = cache.scheduler.step(time.monotonic() + 100)
    assert report is not None and "not found" in report.message


async def test_node_deleted_between_decision_and_bind_binds_nothing_there() -> None:
    kube, cache, actuator = setup()
    decide(cache, actuator)
    cache.nodes().delete(raw_node("n1"))
    await actuator.drain()
    assert kube.binds == []
    assert pending(cache) == ["g-0", "g-1", "g-2"]


async def test_invalid_podgroup_update_drops_the_old_spec() -> None:
    _, cache, _ = setup()
    bad = raw_pod_group("g", 3)
    bad["spec"]["minMember"] = "three"
    cache.pod_groups().upsert(bad)
    assert "PodGroup/default/g" in cache.problems
    report = cache.scheduler.step(0.0)
    assert report is not None and report.result != SCHEDULED
    assert not report.bound


@pytest.mark.parametrize("bound_on_server", [True, False])
async def test_unknown_bind_outcome_is_read_back(bound_on_server: bool) -> None:
    kube, cache, actuator = setup(min_member=1, size=1)
    kube.bind_error = ConnectionResetError("apiserver went away")
    kube.get_error = ConnectionRefusedError("still down")  # first read back fails too
    pod = raw_pod("g-0", group="g")
    if bound_on_server:
        pod["spec"]["nodeName"] = "n1"
    kube.pods["g-0"] = pod
    decide(cache, actuator)
    # While unknown, the placement stays assumed: its capacity is not offered to others.
    await asyncio.sleep(0.1)
    assert cache.assumed == {"default/g-0": "n1"}
    await asyncio.wait_for(actuator.drain(), 10)
    if bound_on_server:
        assert cache.scheduler.cluster.pods["default/g-0"].node_name == "n1"
        assert pending(cache) == []
    else:
        assert cache.assumed == {} and pending(cache) == ["g-0"]


async def test_a_nomination_reserves_capacity_before_the_watch_shows_it() -> None:
    """Two equal-priority gangs wanting the same victim's room: the second preemptor must see
    the first one's nomination at once, not pick the same victim and overbook the node."""
    from gangsched.core.decisions import WAITING_ON_PREEMPTION, Evict
    from gangsched.core.preemption import build_preemptor

    kube = FakeKube()
    scheduler = Scheduler(
        ClusterState(scheduler_name="gangsched"),
        preemptor=build_preemptor(strategy="mincost", scheduler_name="gangsched"),
    )
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    actuator = actuator_for(kube, cache)
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000}
    cache.priority_classes().replace([{**high, "metadata": {"name": "high"}}])
    cache.nodes().replace([raw_node("n1", cpu="4")])
    low = raw_pod("low", cpu="4", node_name="n1", scheduler="other")
    a, b = raw_pod("a", cpu="4"), raw_pod("b", cpu="4")
    for pod in (a, b):
        pod["spec"]["priorityClassName"] = "high"
    cache.pods().replace([low, a, b])
    first = scheduler.step(0.0)
    assert first is not None and first.result == WAITING_ON_PREEMPTION
    actuator.apply(first)  # no watch event yet: the API server has not answered
    assert scheduler.cluster.pods[f"default/{first.gang.name}"].nominated_node_name == "n1"
    second = scheduler.step(0.0)
    assert second is not None and second.gang != first.gang
    assert not [d for d in second.decisions if isinstance(d, Evict)], second.message
    await actuator.drain()


async def test_a_new_leader_finishes_half_bound_gangs_before_any_other() -> None:
    """The previous leader bound 1 of 3 members and died; an older gang of the same priority
    would take the room the other two were placed in: the half-bound one goes first."""
    from gangsched.config import Config
    from gangsched.edge.operator import Operator

    kube = FakeKube()
    operator = Operator(config=Config(), kube=kube)  # type: ignore[arg-type]
    cache = operator.cache
    cache.clock = lambda: 0.0
    cache.nodes().replace([raw_node("n1", cpu="3")])
    cache.pod_groups().replace([raw_pod_group("half", 3), raw_pod_group("older", 2)])
    half = [
        raw_pod(f"half-{i}", group="half", node_name="n1" if i == 0 else None) for i in range(3)
    ]
    for p in half:
        p["metadata"]["creationTimestamp"] = "2026-01-01T00:10:00Z"
    older = [raw_pod(f"older-{i}", group="older") for i in range(2)]
    for p in older:
        p["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    cache.pods().replace(half + older)
    cache.start_queueing()  # as the scheduling loop does once the caches have synced
    await operator._finish_partial_gangs(0.0)
    await operator.actuator.drain()
    assert sorted(b.split("/")[-2] for b in kube.binds) == ["half-1", "half-2"]
    report = operator.step(0.0)  # the older gang no longer fits
    assert report is not None and report.gang.name == "older" and not report.bound


async def test_a_pod_that_joins_a_group_later_is_not_scheduled_alone() -> None:
    """Found by fuzzing: the pod's entry as a group of one stayed queued after its group
    label arrived, and scheduled it apart from its gang."""
    kube, cache, _ = setup(min_member=4, size=2)  # 3 of 4 members in the end: it waits
    late = raw_pod("g-2")  # created without the label: a lone pod
    cache.pods().upsert(late)
    cache.pods().upsert(raw_pod("g-2", group="g"))  # the label is added
    reports = [cache.scheduler.step(float(t)) for t in range(5)]
    assert not [b for r in reports if r is not None for b in r.bound]
    assert not kube.binds


async def test_a_preemption_report_hands_back_one_eviction_future_per_victim() -> None:
    """The scheduling loop waits for these before its next cycle (Operator.eviction_wait):
    victims start terminating when their eviction is sent, not one search later. They
    resolve once the DELETE is sent, after the DisruptionTarget condition is answered:
    neither the DELETE's answer nor the Preempted events (here never answered) are waited
    for."""
    kube = FakeKube()
    deleted: list[str] = []
    patched: list[str] = []
    never = asyncio.Event()

    async def patch(path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        patched.append(path.split("/")[-2])
        return {}

    async def delete(path: str, body: Any = None) -> dict[str, Any]:
        deleted.append(path.rsplit("/", 1)[-1])
        await never.wait()
        return {}

    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/events"):
            await never.wait()
        return {}

    kube.delete = delete  # type: ignore[attr-defined]
    kube.post = post  # type: ignore[method-assign]
    kube.patch = patch  # type: ignore[method-assign]
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"), preemptor=build_preemptor())
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    cache.nodes().replace([raw_node("n1", cpu="2")])
    cache.pod_groups().replace([raw_pod_group("g", 2)])
    cache.pods().replace(
        [
            raw_pod("low-0", node_name="n1", priority=1, scheduler="default-scheduler"),
            raw_pod("low-1", node_name="n1", priority=1, scheduler="default-scheduler"),
            *(raw_pod(f"g-{i}", group="g", priority=100) for i in range(2)),
        ]
    )
    actuator = actuator_for(kube, cache)
    report = scheduler.step(0.0)
    assert report is not None and report.victims == 2
    evictions = actuator.apply(report)
    assert len(evictions) == 2
    done, _ = await asyncio.wait(evictions, timeout=5)
    assert len(done) == 2
    assert sorted(p for p in patched if p.startswith("low")) == ["low-0", "low-1"]
    assert sorted(deleted) == ["low-0", "low-1"]
    never.set()
    await actuator.drain()


async def test_bind_backlog_is_counted_until_every_bind_is_answered() -> None:
    """Binds decided beyond twice the binds in flight fill the backlog (the loop then waits
    for `bind_room`, Operator._schedule_loop); every answer, or failure, releases one."""
    kube, cache, actuator = setup(min_member=1, size=1)
    cache.nodes().replace([raw_node("n1", cpu="64")])
    cache.pod_groups().replace([raw_pod_group(f"g{i}", 2) for i in range(5)])
    cache.pods().replace([raw_pod(f"g{i}-{m}", group=f"g{i}") for i in range(5) for m in range(2)])
    actuator.bind_concurrency = 2
    held = asyncio.Event()
    answer = kube.post

    async def slow_post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        await held.wait()
        return await answer(path, body)

    kube.post = slow_post  # type: ignore[method-assign]
    decide(cache, actuator)
    assert actuator.binds_pending == 2 and not actuator.bind_room.is_set()
    assert not actuator.bind_backlog_full()
    decide(cache, actuator)
    assert actuator.binds_pending == 4 and actuator.bind_backlog_full()
    kube.bind_error = KubeError(409, "Conflict", "changed")  # failed binds release theirs too
    held.set()
    await actuator.drain()
    assert actuator.binds_pending == 0 and actuator.bind_room.is_set()
    assert not actuator.bind_backlog_full()


async def test_each_kind_of_deferred_write_waits_at_its_own_gate_until_the_last_bind() -> None:
    """While the gang's binds are unanswered, budget writes wait at their own gate (not behind
    the events' backlog); the last bind answered lets them go, as many at once as it allows."""
    kube, cache, actuator = setup()
    budgets = actuator.write_gate()
    assert budgets is not actuator.events.gate
    budgets.while_binding, budgets.otherwise = 1, 3
    release = asyncio.Event()
    started: list[int] = []

    async def budget(i: int) -> None:
        async with budgets.slot():
            started.append(i)
            await release.wait()

    bind_answered = asyncio.Event()
    post = kube.post

    async def slow_bind(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/binding"):
            await bind_answered.wait()
        return await post(path, body)

    kube.post = slow_bind  # type: ignore[method-assign]
    decide(cache, actuator)
    for _ in range(5):
        await asyncio.sleep(0)
    assert actuator.binds_pending == 3
    writes = [asyncio.create_task(budget(i)) for i in range(4)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert started == []  # binds unanswered: the budgets wait
    bind_answered.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert actuator.binds_pending == 0 and started == [0, 1, 2]
    release.set()
    await asyncio.gather(*writes)
    await actuator.drain()
    assert started == [0, 1, 2, 3] and budgets.in_flight == 0
