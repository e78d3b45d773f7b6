"""Carries out core/gang_health.py's reviews: a PodDisruptionBudget per running gang, created
and deleted as the gang runs and stops, and the release of stale gangs.

A small controller beside the scheduling loop rather than part of each cycle: a gang breaks
(a node deleted, a member failed) without any cycle running for it, and the grace period
must run out on its own. One review a second; only the leader reviews and writes. A review
looks again only at the gangs that changed (core/gang_health.py), and the budgets held are
read anew only when the PDB informer changed them: with nothing changing, a review of 10,000
gangs costs little more than comparing the budgets wanted with those held.

Budgets are ours by their label (`gangsched.io/gang-protection: "true"`); the PDB informer
(edge/policy_cache.py) keeps them, and keeps them out of preemption's budget accounting. Each
one has an ownerReference to its PodGroup, so the garbage collector removes it with the group
even when gangsched is not running; an annotation names the group, which a restarted leader
reads to know which gangs were running.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from gangsched.core.api.disruption import BUDGET_LABEL, is_gang_budget
from gangsched.core.decisions import Decision, Event, Evict, SetCondition
from gangsched.core.gang_health import GangBudget, GangHealth, GangHealthConfig, HealthReview
from gangsched.core.model import Dialect, GroupRef
from gangsched.edge.actuator import Actuator
from gangsched.edge.cache import ClusterCache
from gangsched.edge.kube import JSON, Kube, KubeError
from gangsched.edge.metrics import Metrics
from gangsched.edge.write_gate import WriteGate

log = structlog.get_logger("gangsched.gang_protection")

#: On each budget: "<dialect>:<name>" of the PodGroup it protects (same namespace).
GROUP_ANNOTATION = "gangsched.io/pod-group"


def budgets_path(namespace: str, name: str = "") -> str:
    base = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    return f"{base}/{name}" if name else base


def budget_object(budget: GangBudget, *, owner_api_version: str) -> JSON:
    """The PodDisruptionBudget for a gang. unhealthyPodEvictionPolicy AlwaysAllow: a member
    that is not Ready (crashing, its node failing) never holds up a drain; only running
    members count toward minAvailable."""
    ref = budget.group
    metadata: dict[str, Any] = {
        "name": budget.name,
        "namespace": ref.namespace,
        "labels": {BUDGET_LABEL: "true", "app.kubernetes.io/managed-by": "gangsched"},
        "annotations": {GROUP_ANNOTATION: f"{ref.dialect.value}:{ref.name}"},
    }
    if budget.owner_uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": owner_api_version,
                "kind": "PodGroup",
                "name": ref.name,
                "uid": budget.owner_uid,
            }
        ]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata,
        "spec": {
            "minAvailable": budget.min_available,
            "selector": {"matchLabels": dict(budget.selector)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def group_of_budget(raw: Mapping[str, Any]) -> GroupRef | None:
    """The PodGroup a gangsched budget protects, from its annotation (None if unreadable)."""
    metadata = raw.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    annotations = metadata.get("annotations")
    value = annotations.get(GROUP_ANNOTATION) if isinstance(annotations, Mapping) else None
    namespace = metadata.get("namespace")
    if not isinstance(value, str) or not isinstance(namespace, str):
        return None
    dialect, _, name = value.partition(":")
    try:
        return GroupRef(Dialect(dialect), namespace, name)
    except ValueError:
        return None


@dataclass
class GangProtection:
    kube: Kube
    cache: ClusterCache
    actuator: Actuator
    metrics: Metrics
    config: GangHealthConfig
    may_write: Callable[[], bool] = lambda: True
    #: Seconds between reviews.
    interval: float = 1.0
    #: Seconds one budget write may take before the review goes on without it.
    write_timeout: float = 10.0
    #: How many budget writes go out at once (the operator gives one of the actuator's).
    gate: WriteGate = field(default_factory=WriteGate)
    health: GangHealth = field(init=False)
    #: Evictions in flight (kept referenced until done).
    _evictions: set[asyncio.Task[None]] = field(default_factory=set)
    #: held() as of a state of the informer's budgets: (raw_budgets, its revision, by group,
    #: their groups); the same frozenset each review tells the health review nothing changed.
    _held: tuple[object, int, dict[GroupRef, JSON], frozenset[GroupRef]] | None = None
    #: Per gang: the budget wanted and the object held last found alike (no update needed).
    _alike: dict[GroupRef, tuple[GangBudget, JSON]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.health = GangHealth(self.config)

    async def run(self) -> None:
        log.info("reviewing running gangs", every_seconds=self.interval)
        while True:
            if self.may_write():
                try:
                    await self.review(time.monotonic())
                except Exception:  # a bug here must not stop protection for good
                    log.exception("gang health review failed")
            await asyncio.sleep(self.interval)

    def held(self) -> dict[GroupRef, JSON]:
        """gangsched's budgets as the informer holds them, by the group they protect (read
        anew only after the informer changed them; not to be modified)."""
        return self._held_now()[0]

    def _held_now(self) -> tuple[dict[GroupRef, JSON], frozenset[GroupRef]]:
        policy = self.cache.policy
        raws, revision = policy.raw_budgets, policy.raw_budgets_revision
        cached = self._held
        if cached is not None and cached[0] is raws and cached[1] == revision:
            return cached[2], cached[3]
        out: dict[GroupRef, JSON] = {}
        for raw in raws.values():
            if is_gang_budget(raw):
                ref = group_of_budget(raw)
                if ref is not None:
                    out[ref] = raw
        self._held = (raws, revision, out, frozenset(out))
        return out, self._held[3]

    async def review(self, now: float) -> HealthReview:
        held, budgeted = self._held_now()
        review = self.health.review(self.cache.cluster, now=now, budgeted=budgeted)
        self.metrics.gangs_broken.inc(len(review.broken))
        self.metrics.stale_gangs_released.inc(len(review.released))
        for ref in review.released:
            log.info("stale gang released", group=ref.key)
        self._carry_out(review.decisions)
        writes: list[tuple[Coroutine[Any, Any, None], str, GroupRef]] = []
        alike, self._alike = self._alike, {}
        for ref, budget in review.budgets.items():
            raw = held.get(ref)
            if raw is None:
                writes.append((self._create(budget), "create_budget", ref))
                continue
            last = alike.get(ref)
            if last is not None and last[0] is budget and last[1] is raw:
                self._alike[ref] = last  # neither changed since found alike
            elif _spec_differs(raw, budget):
                writes.append((self._update(raw, budget), "update_budget", ref))
            else:
                self._alike[ref] = (budget, raw)
        for ref, raw in held.items():
            if ref not in review.budgets:
                writes.append((self._delete(raw), "delete_budget", ref))

        # Through a gate of the actuator's (gangsched.edge.write_gate): after the binds queued
        # with them (at most its max_wait later), many at once then. One after another, a
        # second's worth of newly running gangs took longer than a second to protect while
        # binds kept the API server busy (paced (a): up to 394 of 1,000 budgets created after
        # the last bind).
        async def limited(write: Coroutine[Any, Any, None], operation: str, ref: GroupRef) -> None:
            async with self.gate.slot():
                await self._bounded(write, operation, ref)

        outcomes = await asyncio.gather(*(limited(*w) for w in writes), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome  # the others are done: the review reports it (run)
        self.metrics.protected_gangs.set(len(review.budgets))
        return review

    async def _bounded(
        self, write: Coroutine[Any, Any, None], operation: str, ref: GroupRef
    ) -> None:
        """One budget write, given up after `write_timeout`: a request the API server never
        answers must not hold every later review (the next review retries the write)."""
        try:
            await asyncio.wait_for(write, timeout=self.write_timeout)
        except TimeoutError:
            self.metrics.api_errors.labels(operation, "timeout").inc()
            log.warning("gang budget write timed out", group=ref.key, operation=operation)

    def _carry_out(self, decisions: list[Decision]) -> None:
        """Released members as preemption victims are (condition, eviction, event, through
        the actuator's pod writer); PodGroup events as they come."""
        per_pod: dict[str, list[Decision]] = {}
        for decision in decisions:
            if isinstance(decision, SetCondition | Evict):
                per_pod.setdefault(decision.pod, []).append(decision)
            elif isinstance(decision, Event) and decision.regarding_kind == "Pod":
                per_pod.setdefault(decision.regarding, []).append(decision)
            elif isinstance(decision, Event):
                self.actuator.apply_event(decision)
        for steps in per_pod.values():
            for step in steps:
                if isinstance(step, Evict):
                    self.cache.evict(step.pod, step.uid)
            task = asyncio.get_running_loop().create_task(self.actuator.pods.preempt(steps))
            self._evictions.add(task)
            task.add_done_callback(self._evictions.discard)

    async def _create(self, budget: GangBudget) -> None:
        api_version = self.actuator.api_versions.get(budget.group.dialect, "")
        body = budget_object(budget, owner_api_version=api_version)
        try:
            await self.kube.post(budgets_path(budget.group.namespace), body)
            log.info("gang protected", group=budget.group.key, budget=budget.name)
        except KubeError as exc:
            if not exc.conflict:  # 409: it exists already (the watch has not told us yet)
                self._failed("create_budget", budget.group, exc)

    async def _update(self, raw: JSON, budget: GangBudget) -> None:
        body = {
            "metadata": {"resourceVersion": raw.get("metadata", {}).get("resourceVersion")},
            "spec": {
                "minAvailable": budget.min_available,
                "selector": {"matchLabels": dict(budget.selector), "matchExpressions": None},
            },
        }
        try:
            await self.kube.patch(budgets_path(budget.group.namespace, budget.name), body)
        except KubeError as exc:
            if not (exc.conflict or exc.not_found):  # changed or gone: the next review sees it
                self._failed("update_budget", budget.group, exc)

    async def _delete(self, raw: JSON) -> None:
        metadata = raw.get("metadata", {})
        ref = group_of_budget(raw)
        body: JSON = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if metadata.get("uid"):
            body["preconditions"] = {"uid": metadata["uid"]}
        try:
            await self.kube.delete(budgets_path(metadata["namespace"], metadata["name"]), body)
            log.info(
                "gang protection removed", budget=f"{metadata['namespace']}/{metadata['name']}"
            )
        except KubeError as exc:
            if not (exc.not_found or exc.conflict) and ref is not None:
                self._failed("delete_budget", ref, exc)

    def _failed(self, operation: str, ref: GroupRef, exc: KubeError) -> None:
        self.metrics.api_errors.labels(operation, str(exc.status)).inc()
        log.warning("gang budget not written", group=ref.key, operation=operation, error=str(exc))


def _spec_differs(raw: JSON, budget: GangBudget) -> bool:
    spec = raw.get("spec") or {}
    selector = spec.get("selector") or {}
    return spec.get("minAvailable") != budget.min_available or (
        selector.get("matchLabels") or {}
    ) != dict(budget.selector)
