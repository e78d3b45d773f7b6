"""The status writer never takes an InitiallyScheduled condition back to False: not when a
watch event older than its own True write arrives after it, for PodGroups
(PodGroupInitiallyScheduled) as for CompositePodGroups (CompositePodGroupInitiallyScheduled)."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from gangsched.config import Config
from gangsched.core.cluster import ClusterState
from gangsched.core.composite.status import COMPOSITE_CONDITION
from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE, WAITING, GroupOutcome
from gangsched.core.group_status import SIGS_CONDITION, UPSTREAM_CONDITION, find_condition
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.scheduler import Scheduler
from gangsched.edge import podgroup_status
from gangsched.edge.cache import ClusterCache
from gangsched.edge.operator import Operator
from gangsched.edge.podgroup_status import PodGroupStatusWriter
from gangsched.edge.write_gate import WriteGate
from tests.builders import SCHEDULER, group, pod, raw_pod_group
from tests.unit.composite.trees import cpg, leaf

pytestmark = pytest.mark.asyncio(loop_scope="function")


class ApplyRecorder:
    def __init__(self) -> None:
        self.applied: list[tuple[str, dict[str, Any]]] = []

    async def apply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.applied.append((path, body))
        return {"status": body["status"]}


def writer_for(
    state: ClusterState, *, starting_hold: float = podgroup_status.STARTING_HOLD_S
) -> tuple[ApplyRecorder, SimpleNamespace, PodGroupStatusWriter]:
    """A status writer over `state`, recording its applies; the actuator holds only what the
    writer reads (outcomes are set by each test)."""
    actuator = SimpleNamespace(
        outcomes={},
        pre_binding_pods=set(),
        waiting_condition_delay=5.0,
        changed_groups=set(),
        outcome_changed=asyncio.Event(),
        events=[],
    )
    actuator.apply_event = actuator.events.append
    kube = ApplyRecorder()
    writer = PodGroupStatusWriter(
        kube=kube,  # type: ignore[arg-type]
        scheduler=Scheduler(state),
        actuator=actuator,  # type: ignore[arg-type]
        starting_hold=starting_hold,
    )
    return kube, actuator, writer


@pytest.mark.parametrize(
    ("name", "condition"), [("root", COMPOSITE_CONDITION), ("a", UPSTREAM_CONDITION)]
)
async def test_a_stale_false_after_our_true_write_does_not_bring_false_back(
    name: str, condition: str
) -> None:
    root = cpg("root", 1)
    root.uid = "uid-root"
    child = leaf("a", 1, parent="root")
    child.uid = "uid-a"
    state = ClusterState.build(
        scheduler_name=SCHEDULER, nodes=[], pods=[], groups=[child], composites=[root]
    )
    ref: GroupRef = root.ref if name == "root" else child.ref
    kube, actuator, writer = writer_for(state)
    writer.watch(Dialect.COMPOSITE, "scheduling.k8s.io/v1alpha3")
    writer.watch(Dialect.UPSTREAM, "scheduling.k8s.io/v1alpha2")

    actuator.outcomes[ref] = GroupOutcome(ref, SCHEDULED, "placed")
    await writer.sync_once([ref])
    written = find_condition(kube.applied[-1][1]["status"], condition)
    assert written is not None and written["status"] == "True"

    # The watch delivers the object as it was before our write (an earlier attempt's False),
    # and a later attempt fails: the condition stays True, nothing is written.
    stale = {"type": condition, "status": "False", "reason": "Unschedulable", "message": "old"}
    writer.observed(ref, {"conditions": [{**stale, "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    actuator.outcomes[ref] = GroupOutcome(ref, UNSCHEDULABLE, "a later attempt failed")
    desired = writer.desired(ref)
    assert desired is not None
    assert find_condition(desired, condition) == written
    count = len(kube.applied)
    await writer.sync_once([ref])  # the server's copy we saw says False: True again
    assert len(kube.applied) == count + 1
    assert find_condition(kube.applied[-1][1]["status"], condition) == written


async def test_a_group_collecting_its_members_gets_its_status_after_the_delay() -> None:
    """Waiting for members is written only once it lasts (the pods' condition delay): a
    streamed gang completes first, and every arrival would otherwise rewrite the message."""
    child = group("a", 3, dialect=Dialect.SIGS)
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=[], groups=[child])
    kube, actuator, writer = writer_for(state)
    actuator.waiting_condition_delay = 0.2
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    ref = child.ref
    for arrived in (1, 2):
        actuator.outcomes[ref] = GroupOutcome(ref, WAITING, f"waiting: {arrived} of 3")
        await writer.sync_once([ref])
    assert kube.applied == []
    await asyncio.sleep(0.25)
    await writer.sync_once([ref])
    assert len(kube.applied) == 1  # still waiting after the delay: written
    actuator.outcomes[ref] = GroupOutcome(ref, SCHEDULED, "placed")
    await writer.sync_once([ref])  # no longer waiting: at once
    assert len(kube.applied) == 2
    written = find_condition(kube.applied[-1][1]["status"], SIGS_CONDITION)
    assert written is not None and written["status"] == "True"


async def test_a_deleted_group_leaves_nothing_behind() -> None:
    """A scheduler running for months sees every Job's PodGroup come and go: the cache tells
    the writer (as the operator wires it), which drops the group's state and its outcome."""
    state = ClusterState(scheduler_name=SCHEDULER)
    _, actuator, writer = writer_for(state)
    actuator.changed_groups = set()
    cache = ClusterCache(writer.scheduler)
    cache.on_group_status = writer.observed
    cache.on_group_deleted = writer.forget
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    raw = raw_pod_group("g", 2)
    raw["status"] = {"scheduleStartTime": "2026-11-27T00:00:00Z"}
    cache.pod_groups().upsert(raw)
    ref = GroupRef(Dialect.SIGS, "default", "g")
    actuator.outcomes[ref] = GroupOutcome(ref, WAITING, "1 of 2 members")
    actuator.changed_groups.add(ref)
    await writer.sync_once([ref])  # collecting: remembered since when
    assert ref in writer.current and ref in writer.first_attempt
    assert ref in writer._waiting_since

    cache.pod_groups().delete(raw)
    assert ref not in writer.current and ref not in writer.first_attempt
    assert ref not in writer._waiting_since
    assert ref not in actuator.outcomes and ref not in actuator.changed_groups
    assert ref not in state.groups


async def test_a_gang_whose_members_are_starting_is_written_once_they_run() -> None:
    """Bound members still starting would change the status again at each start: it waits
    until they run (one write, the settled phase), or the hold if they take longer."""
    child = group("a", 2, dialect=Dialect.SIGS)
    members = [pod(f"a-{i}", group="a", node_name="n1", phase="Pending") for i in range(2)]
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=members, groups=[child])
    kube, actuator, writer = writer_for(state, starting_hold=1.0)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    ref = child.ref
    actuator.outcomes[ref] = GroupOutcome(ref, SCHEDULED, "placed")
    await writer.sync_once([ref])
    assert kube.applied == []  # both bound, neither started

    state.upsert_pod(dataclasses.replace(members[0], phase="Running"))
    await writer.sync_once()
    assert kube.applied == []  # one still starting
    state.upsert_pod(dataclasses.replace(members[1], phase="Running"))
    await writer.sync_once()
    assert [body["status"]["phase"] for _, body in kube.applied] == ["Running"]

    # Members that take longer to start (an image pull) hold the status no longer than the
    # hold: the group's status then says where it is, and changes again at most once a hold.
    other = group("b", 2, dialect=Dialect.SIGS)
    slow = [pod(f"b-{i}", group="b", node_name="n1", phase="Pending") for i in range(2)]
    state.upsert_group(other)
    for member in slow:
        state.upsert_pod(member)
    actuator.outcomes[other.ref] = GroupOutcome(other.ref, SCHEDULED, "placed")
    await writer.sync_once([other.ref])
    assert len(kube.applied) == 1
    await asyncio.sleep(1.05)
    await writer.sync_once([other.ref])
    assert len(kube.applied) == 2
    assert kube.applied[-1][1]["status"]["phase"] == "Scheduled"
    state.upsert_pod(dataclasses.replace(slow[0], phase="Running"))
    await writer.sync_once([other.ref])
    assert len(kube.applied) == 2  # one still starting: held again after that write
    await asyncio.sleep(1.05)
    await writer.sync_once([other.ref])
    assert len(kube.applied) == 3
    assert kube.applied[-1][1]["status"]["running"] == 1


async def test_a_sweep_writes_through_the_gate() -> None:
    """The statuses a sweep finds changed go out together, as many at once as the gate
    allows, each group once."""
    groups = [group(f"g{i}", 1, dialect=Dialect.SIGS) for i in range(6)]
    running = [pod(f"g{i}-0", group=f"g{i}", node_name="n1") for i in range(6)]
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=running, groups=groups)
    kube, actuator, writer = writer_for(state)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    writer.gate = WriteGate(while_binding=2, otherwise=2)
    in_flight, peak = 0, 0
    recorded = kube.apply

    async def slow_apply(path: str, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return await recorded(path, body)

    kube.apply = slow_apply  # type: ignore[method-assign]
    for g in groups:
        actuator.outcomes[g.ref] = GroupOutcome(g.ref, SCHEDULED, "placed")
    await writer.sync_once()
    assert peak == 2
    assert sorted(path.split("/")[-2] for path, _ in kube.applied) == [f"g{i}" for i in range(6)]


async def test_a_queued_group_never_tried_waits_for_its_first_attempt() -> None:
    """Its first attempt is moments away and decides what its status says; until then a
    sweep writes nothing for it. A group not queued (all gated, say) is written as before."""
    queued, gated = group("q", 2, dialect=Dialect.SIGS), group("g", 1, dialect=Dialect.SIGS)
    members = [pod(f"q-{i}", group="q") for i in range(2)]
    state = ClusterState.build(
        scheduler_name=SCHEDULER, nodes=[], pods=members, groups=[queued, gated]
    )
    kube, actuator, writer = writer_for(state)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    writer.scheduler.enqueue_pending()
    await writer.sync_once()
    assert [path.split("/")[-2] for path, _ in kube.applied] == ["g"]
    actuator.outcomes[queued.ref] = GroupOutcome(queued.ref, UNSCHEDULABLE, "no room")
    await writer.sync_once([queued.ref])
    assert [path.split("/")[-2] for path, _ in kube.applied] == ["g", "q"]


async def test_kube_schedulers_condition_is_not_held_while_pods_start() -> None:
    """scheduling.k8s.io's status is one condition that does not change as pods start: it is
    written at the bind, as kube-scheduler writes it."""
    child = group("u", 1, dialect=Dialect.UPSTREAM)
    starting = pod("u-0", group="u", dialect=Dialect.UPSTREAM, node_name="n1", phase="Pending")
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=[starting], groups=[child])
    kube, actuator, writer = writer_for(state)
    writer.watch(Dialect.UPSTREAM, "scheduling.k8s.io/v1beta1")
    actuator.outcomes[child.ref] = GroupOutcome(child.ref, SCHEDULED, "placed")
    await writer.sync_once([child.ref])
    written = find_condition(kube.applied[-1][1]["status"], UPSTREAM_CONDITION)
    assert written is not None and written["status"] == "True"


async def test_schedule_start_time_is_the_first_outcome_even_when_the_write_is_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The status of a gang placed at its first attempt waits while its pods start; when it
    is written, scheduleStartTime is still when that attempt came, not when the write did."""
    clock = ["2026-11-28T00:00:00Z"]
    monkeypatch.setattr(podgroup_status, "_now", lambda: clock[0])
    child = group("a", 1, dialect=Dialect.SIGS)
    member = pod("a-0", group="a", node_name="n1", phase="Pending")
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=[member], groups=[child])
    kube, actuator, writer = writer_for(state)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    actuator.outcomes[child.ref] = GroupOutcome(child.ref, SCHEDULED, "placed")
    await writer.sync_once([child.ref])
    assert kube.applied == []  # held: its member is starting
    clock[0] = "2026-11-28T00:00:30Z"
    state.upsert_pod(dataclasses.replace(member, phase="Running"))
    await writer.sync_once()
    assert kube.applied[-1][1]["status"]["scheduleStartTime"] == "2026-11-28T00:00:00Z"


async def test_a_write_waiting_for_the_gate_is_dropped_once_leadership_is_lost() -> None:
    running = [pod(f"g{i}-0", group=f"g{i}", node_name="n1") for i in range(3)]
    groups = [group(f"g{i}", 1, dialect=Dialect.SIGS) for i in range(3)]
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=running, groups=groups)
    kube, actuator, writer = writer_for(state)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    writer.gate = WriteGate(while_binding=1, otherwise=1)
    leader = True
    writer.may_write = lambda: leader
    recorded = kube.apply

    async def apply_then_lose(path: str, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal leader
        answer = await recorded(path, body)
        leader = False  # lost while the other writes wait for the slot
        return answer

    kube.apply = apply_then_lose  # type: ignore[method-assign]
    for g in groups:
        actuator.outcomes[g.ref] = GroupOutcome(g.ref, SCHEDULED, "placed")
    await writer.sync_once()
    assert len(kube.applied) == 1


async def test_a_queued_group_is_written_after_the_hold_if_its_first_attempt_is_late() -> None:
    """A backlog of queued gangs must not leave a group without any status for long."""
    queued = group("q", 2, dialect=Dialect.SIGS)
    members = [pod(f"q-{i}", group="q") for i in range(2)]
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=members, groups=[queued])
    kube, _, writer = writer_for(state, starting_hold=1.0)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    writer.scheduler.enqueue_pending()
    await writer.sync_once()
    assert kube.applied == []
    await asyncio.sleep(1.05)
    await writer.sync_once()
    assert [body["status"]["phase"] for _, body in kube.applied] == ["Pending"]


async def test_with_no_hold_a_starting_gang_is_written_at_each_change() -> None:
    """podGroupStatusHoldSeconds: 0 trades the API writes for a status that follows each
    member's start."""
    child = group("a", 2, dialect=Dialect.SIGS)
    members = [pod(f"a-{i}", group="a", node_name="n1", phase="Pending") for i in range(2)]
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=members, groups=[child])
    kube, actuator, writer = writer_for(state, starting_hold=0.0)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    actuator.outcomes[child.ref] = GroupOutcome(child.ref, SCHEDULED, "placed")
    await writer.sync_once([child.ref])
    assert [body["status"]["phase"] for _, body in kube.applied] == ["Scheduled"]
    state.upsert_pod(dataclasses.replace(members[0], phase="Running"))
    await writer.sync_once()
    state.upsert_pod(dataclasses.replace(members[1], phase="Running"))
    await writer.sync_once()
    assert [body["status"]["running"] for _, body in kube.applied[1:]] == [1, 2]
    assert kube.applied[-1][1]["status"]["phase"] == "Running"


async def test_the_hold_comes_from_the_configuration() -> None:
    operator = Operator(
        config=Config(podGroupStatusHoldSeconds=5),
        kube=SimpleNamespace(),  # type: ignore[arg-type]
    )
    assert operator.status.starting_hold == 5.0
    assert Config().podGroupStatusHoldSeconds == podgroup_status.STARTING_HOLD_S


async def test_a_sweep_between_full_ones_looks_only_at_groups_that_may_have_changed() -> None:
    """Between sweeps of every group, a sweep looks at the groups whose members or object
    changed, whose server copy or outcome changed, and those the clock decides: not at a
    settled gang, whose status every sweep computed again before (10,000 groups, every 2 s)."""
    groups = [group(f"g{i}", 1, dialect=Dialect.SIGS) for i in range(4)]
    running = [pod(f"g{i}-0", group=f"g{i}", node_name="n1", phase="Running") for i in range(4)]
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=running, groups=groups)
    kube, actuator, writer = writer_for(state)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    assert writer._due() is None  # the first sweep: every group
    await writer.sync_once()
    assert len(kube.applied) == 4
    assert writer._due() == []  # nothing changed since
    state.upsert_pod(dataclasses.replace(running[1], phase="Succeeded"))
    writer.observed(groups[2].ref, {"phase": "Pending"})  # someone else wrote it
    actuator.changed_groups.add(groups[3].ref)
    due = writer._due()
    assert due is not None and sorted(ref.name for ref in due) == ["g1", "g2", "g3"]
    actuator.changed_groups.clear()  # as the sweep does
    assert writer._due(full=True) is None
    state.upsert_group(groups[0])
    state.delete_group(groups[0].ref)
    assert writer._due() == []  # changed, but gone: nothing to write


async def test_the_sweeps_write_what_only_member_pods_show_looking_at_no_other_group() -> None:
    groups = [group(f"g{i}", 2, dialect=Dialect.SIGS) for i in range(3)]
    members = [
        pod(f"g{i}-{j}", group=f"g{i}", node_name="n1", phase="Running")
        for i in range(3)
        for j in range(2)
    ]
    state = ClusterState.build(scheduler_name=SCHEDULER, nodes=[], pods=members, groups=groups)
    kube, _, writer = writer_for(state)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    writer.interval, writer.full_sweep_interval = 0.02, 3600.0
    looked: list[str] = []
    desired = writer.desired

    def counted(ref: GroupRef) -> dict[str, Any] | None:
        looked.append(ref.name)
        return desired(ref)

    writer.desired = counted  # type: ignore[method-assign]
    task = asyncio.create_task(writer.run())
    try:
        await asyncio.sleep(0.15)
        assert len(kube.applied) == 3
        looked.clear()
        state.upsert_pod(dataclasses.replace(members[0], phase="Failed"))
        await asyncio.sleep(0.15)
        assert len(kube.applied) == 4 and kube.applied[-1][1]["status"]["running"] == 1
        assert set(looked) == {"g0"}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_schedule_timeout_to_come_is_swept_until_it_comes() -> None:
    """Nothing changes for a gang that cannot be placed, but its ScheduleTimeout comes with
    the clock: the sweeps keep looking at it until then, and not after."""
    pending = dataclasses.replace(group("g", 2, dialect=Dialect.SIGS), schedule_timeout_seconds=1)
    state = ClusterState.build(
        scheduler_name=SCHEDULER, nodes=[], pods=[pod("g-0", group="g")], groups=[pending]
    )
    _, actuator, writer = writer_for(state)
    writer.watch(Dialect.SIGS, "scheduling.sigs.k8s.io/v1alpha1")
    ref = pending.ref
    actuator.outcomes[ref] = GroupOutcome(ref, UNSCHEDULABLE, "0/0 nodes are available")
    assert writer._due() is None
    await writer.sync_once()
    assert writer._due() == [ref] and actuator.events == []
    writer._first_attempt_mono[ref] -= 2  # a second has passed
    await writer.sync_once([ref])
    assert [event.reason for event in actuator.events] == ["ScheduleTimeout"]
    assert writer._due() == []
