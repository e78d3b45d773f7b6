"""edge/gang_protection.py and what it relies on: the PodGroup annotations, gangsched's own
budgets kept out of preemption's accounting, and the budget and release writes."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_group_from_raw
from gangsched.core.api.disruption import BUDGET_LABEL, GRACE_ANNOTATION, PROTECTION_ANNOTATION
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import WAITING_ON_PREEMPTION, Evict
from gangsched.core.gang_health import GangBudget, GangHealthConfig
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.preemption import build_preemptor
from gangsched.core.scheduler import Scheduler
from gangsched.edge import gang_protection
from gangsched.edge.cache import ClusterCache
from gangsched.edge.gang_protection import GangProtection, budget_object, group_of_budget
from gangsched.edge.write_gate import WriteGate
from tests.builders import raw_node, raw_pdb, raw_pod, raw_pod_group
from tests.unit.edge.test_actuator_faults import actuator_for

TRAIN = GroupRef(Dialect.SIGS, "default", "train")


def annotated(**annotations: str) -> dict[str, Any]:
    raw = raw_pod_group("train", 2)
    raw["metadata"]["annotations"] = annotations
    return raw


def test_annotations_are_read_and_bad_values_name_the_annotation() -> None:
    read = pod_group_from_raw(
        annotated(**{PROTECTION_ANNOTATION: "false", GRACE_ANNOTATION: "30"}),
        priorities=PriorityResolver(()),
    )
    assert read.disruption_protection is False and read.stale_grace_seconds == 30.0
    never = pod_group_from_raw(
        annotated(**{GRACE_ANNOTATION: "never"}), priorities=PriorityResolver(())
    )
    assert never.stale_grace_seconds == math.inf and never.disruption_protection is None
    for key, value in (
        (PROTECTION_ANNOTATION, "yes"),
        (GRACE_ANNOTATION, "-5"),
        (GRACE_ANNOTATION, "1m"),
    ):
        with pytest.raises(InvalidObject) as error:
            pod_group_from_raw(annotated(**{key: value}), priorities=PriorityResolver(()))
        assert f"metadata.annotations[{key}]" in str(error.value)
        assert "PodGroup default/train" in str(error.value)


def test_budget_object_round_trips_its_group_and_is_ours() -> None:
    budget = GangBudget(
        TRAIN, "gang-sigs-train", (("pod-group.scheduling.sigs.k8s.io", "train"),), 4, "uid-1"
    )
    raw = budget_object(budget, owner_api_version="scheduling.sigs.k8s.io/v1alpha1")
    assert raw["metadata"]["labels"][BUDGET_LABEL] == "true"
    assert raw["spec"]["minAvailable"] == 4
    assert raw["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    owner = raw["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("PodGroup", "train", "uid-1")
    assert group_of_budget(raw) == TRAIN


def preemption_victims(*, ours: bool) -> tuple[list[str], int]:
    """A DisruptionMode All gang `low` on n1 and two lone pods on n2, all priority 0; a
    high-priority pod needs a whole node. `low` is the cheaper victim (one group), unless a
    budget that counts protects it."""
    scheduler = Scheduler(
        ClusterState(scheduler_name="gangsched"),
        preemptor=build_preemptor(strategy="mincost", scheduler_name="gangsched"),
    )
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000}
    cache.priority_classes().replace([{**high, "metadata": {"name": "high"}}])
    cache.nodes().replace([raw_node("n1", cpu="4"), raw_node("n2", cpu="4")])
    cache.pod_groups().replace([raw_pod_group("low", 2, disruption_mode="All")])
    pods = [raw_pod(f"low-{i}", cpu="2", group="low", node_name="n1") for i in range(2)]
    pods += [raw_pod(f"lone-{i}", cpu="2", node_name="n2") for i in range(2)]
    preemptor = raw_pod("high", cpu="4")
    preemptor["spec"]["priorityClassName"] = "high"
    cache.pods().replace([*pods, preemptor])
    pdb = raw_pdb("guard", {"pod-group.scheduling.sigs.k8s.io": "low"}, min_available=2)
    pdb["status"] = {"disruptionsAllowed": 0}
    if ours:
        pdb["metadata"]["labels"] = {BUDGET_LABEL: "true"}
    cache.budgets().replace([pdb])
    report = scheduler.step(0.0)
    assert report is not None and report.result == WAITING_ON_PREEMPTION
    assert report.preemption is not None
    victims = sorted(d.pod for d in report.decisions if isinstance(d, Evict))
    return victims, report.preemption.pdb_violations


def test_gangscheds_own_budgets_do_not_change_preemptions_choice() -> None:
    assert preemption_victims(ours=True) == (["default/low-0", "default/low-1"], 0)
    # The same budget written by a user counts: preemption avoids violating it.
    assert preemption_victims(ours=False) == (["default/lone-0", "default/lone-1"], 0)


class FakeKube:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any] | None]] = []

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("POST", path, body))
        return body

    async def patch(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("PATCH", path, body))
        return {}

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.calls.append(("DELETE", path, body))
        return {}

    def verbs(self, kind: str) -> list[tuple[str, str]]:
        return [(verb, path.rsplit("/", 1)[-1]) for verb, path, _ in self.calls if kind in path]


def protection(grace: float) -> tuple[FakeKube, ClusterCache, GangProtection]:
    kube = FakeKube()
    cache = ClusterCache(Scheduler(ClusterState(scheduler_name="gangsched")), clock=lambda: 0.0)
    cache.nodes().replace([raw_node("n1", cpu="8")])
    cache.pod_groups().replace([raw_pod_group("train", 3)])
    cache.pods().replace([raw_pod(f"train-{i}", group="train", node_name="n1") for i in range(3)])
    actuator = actuator_for(kube, cache)
    actuator.api_versions[Dialect.SIGS] = "scheduling.sigs.k8s.io/v1alpha1"
    guard = GangProtection(
        kube=kube,  # type: ignore[arg-type]
        cache=cache,
        actuator=actuator,
        metrics=actuator.metrics,
        config=GangHealthConfig(grace_seconds=grace),
    )
    return kube, cache, guard


@pytest.mark.asyncio(loop_scope="function")
async def test_budget_created_once_then_deleted_and_members_evicted_on_release() -> None:
    kube, cache, guard = protection(grace=10)
    await guard.review(0.0)
    created = [body for verb, path, body in kube.calls if verb == "POST" and "disruption" in path]
    assert len(created) == 1 and created[0] is not None
    assert created[0]["metadata"]["ownerReferences"][0]["apiVersion"] == (
        "scheduling.sigs.k8s.io/v1alpha1"
    )
    cache.budgets().replace([{**created[0], "metadata": {**created[0]["metadata"], "uid": "b1"}}])
    assert cache.cluster.budgets == {}  # ours: not in preemption's accounting
    await guard.review(1.0)
    assert len(kube.verbs("poddisruptionbudgets")) == 1  # held: not written again
    cache.pods().delete(raw_pod("train-0", group="train", node_name="n1"))
    await guard.review(2.0)
    assert guard.metrics.gangs_broken._value.get() == 1
    assert kube.verbs("poddisruptionbudgets") == [("POST", "poddisruptionbudgets")]
    await guard.review(12.0)
    await asyncio.sleep(0.05)
    assert ("DELETE", "gang-sigs-train") in kube.verbs("poddisruptionbudgets")
    deleted = sorted(name for verb, name in kube.verbs("/pods/") if verb == "DELETE")
    assert deleted == ["train-1", "train-2"]
    conditions = [
        body for verb, path, body in kube.calls if verb == "PATCH" and path.endswith("/status")
    ]
    assert (
        all(
            c is not None and c["status"]["conditions"][0]["reason"] == "StaleGangReleased"
            for c in conditions
        )
        and len(conditions) == 2
    )
    assert guard.metrics.stale_gangs_released._value.get() == 1


@pytest.mark.asyncio(loop_scope="function")
async def test_a_budget_write_that_never_answers_does_not_hold_the_reviews() -> None:
    kube, _, guard = protection(grace=10)
    answered = asyncio.Event()

    async def hang(path: str, body: dict[str, Any]) -> dict[str, Any]:
        await answered.wait()  # never set: the API server does not answer
        return body

    kube.post = hang  # type: ignore[method-assign]
    guard.write_timeout = 0.05
    await asyncio.wait_for(guard.review(0.0), timeout=5)
    await asyncio.wait_for(guard.review(1.0), timeout=5)
    errors = guard.metrics.api_errors.labels("create_budget", "timeout")._value.get()
    assert errors == 2


@pytest.mark.asyncio(loop_scope="function")
async def test_budgets_of_many_gangs_are_written_a_few_at_a_time() -> None:
    kube, cache, guard = protection(grace=10)
    cache.nodes().replace([raw_node("n1", cpu="64")])
    cache.pod_groups().replace([raw_pod_group(f"g{i}", 2) for i in range(10)])
    cache.pods().replace(
        [raw_pod(f"g{i}-{m}", group=f"g{i}", node_name="n1") for i in range(10) for m in range(2)]
    )
    in_flight, most = [0], [0]
    post = kube.post

    async def counted(path: str, body: dict[str, Any]) -> dict[str, Any]:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        await asyncio.sleep(0.01)
        in_flight[0] -= 1
        return await post(path, body)

    kube.post = counted  # type: ignore[method-assign]
    guard.gate = WriteGate(while_binding=3, otherwise=3)
    await guard.review(0.0)
    assert len(kube.verbs("poddisruptionbudgets")) == 10 and most[0] == 3


@pytest.mark.asyncio(loop_scope="function")
async def test_held_budgets_are_read_and_compared_again_only_when_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube, cache, guard = protection(grace=10)
    await guard.review(0.0)
    created = [body for verb, path, body in kube.calls if verb == "POST" and "disruption" in path]
    assert len(created) == 1 and created[0] is not None
    raw = {**created[0], "metadata": {**created[0]["metadata"], "uid": "b1"}}
    cache.budgets().replace([raw])
    held = guard.held()
    assert set(held) == {TRAIN} and guard.held() is held  # not read again while unchanged
    compared: list[GroupRef] = []
    differs = gang_protection._spec_differs

    def counting(raw: dict[str, Any], budget: GangBudget) -> bool:
        compared.append(budget.group)
        return differs(raw, budget)

    monkeypatch.setattr(gang_protection, "_spec_differs", counting)
    await guard.review(1.0)
    await guard.review(2.0)
    assert compared == [TRAIN]  # once: neither the budget wanted nor the one held changed
    cache.budgets().upsert({**raw, "spec": {**raw["spec"], "minAvailable": 2}})
    await guard.review(3.0)
    assert compared == [TRAIN, TRAIN]
    assert ("PATCH", "gang-sigs-train") in kube.verbs("poddisruptionbudgets")
    cache.budgets().delete(raw)
    assert guard.held() == {}
    await guard.review(4.0)
    assert kube.verbs("poddisruptionbudgets").count(("POST", "poddisruptionbudgets")) == 2
