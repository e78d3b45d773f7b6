"""Writes core/domain_pinning.py's decisions: every gated member of a gang required in one
topology domain gets `key In [domain]` in its required node affinity, then loses the
`gangsched.io/topology-domain` gate, so Karpenter, which reads pods and not PodGroups,
launches the gang's new nodes in that one domain.

Two phases, in this order, for the whole gang: a narrowing cannot be undone once written, and
a member ungated before every narrowing is in could run in another domain than the rest. So
the gates go only once every member reads narrowed; a write that fails leaves every gate in
place, says so on the PodGroup (a `TopologyDomainPinFailed` event) and is retried at a later
review. A retry finds the members already narrowed (the core keeps the domain they name) and
writes only what is missing.

A small controller beside the scheduling loop, like edge/gang_protection.py: gated members
run no cycle. Only the leader reviews and writes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog

from gangsched.core.decisions import Event
from gangsched.core.domain_pinning import (
    DOMAIN_CHOSEN,
    DOMAIN_GATE,
    DOMAIN_PIN_FAILED,
    DomainPin,
    domain_pins,
    is_narrowed,
    narrowed_terms,
)
from gangsched.core.model import GroupRef
from gangsched.edge.actuator import Actuator
from gangsched.edge.cache import ClusterCache
from gangsched.edge.kube import JSON, MERGE_PATCH, STRATEGIC_MERGE_PATCH, Kube, KubeError
from gangsched.edge.metrics import Metrics
from gangsched.edge.pod_writes import pod_path

log = structlog.get_logger("gangsched.domain_pinning")


class PinFailed(Exception):
    """A member could not be narrowed or ungated; the message names it and why."""


@dataclass
class DomainPinner:
    kube: Kube
    cache: ClusterCache
    actuator: Actuator
    metrics: Metrics
    may_write: Callable[[], bool] = lambda: True
    #: Seconds between reviews.
    interval: float = 1.0
    #: Seconds before a gang whose pin failed (or was just written) is looked at again.
    retry_seconds: float = 5.0
    #: Seconds one gang's writes may take before the review goes on without them.
    write_timeout: float = 30.0
    #: Gang -> monotonic time before which it is not pinned again.
    _quiet_until: dict[GroupRef, float] = field(default_factory=dict)

    async def run(self) -> None:
        log.info("pinning gated gangs to one topology domain", every_seconds=self.interval)
        while True:
            if self.may_write():
                try:
                    await self.review(time.monotonic())
                except Exception:  # a bug here must not stop pinning for good
                    log.exception("topology domain review failed")
            await asyncio.sleep(self.interval)

    async def review(self, now: float) -> list[DomainPin]:
        """Write every pin due now; returns those written whole."""
        written: list[DomainPin] = []
        for pin in domain_pins(self.cache.cluster):
            if self._quiet_until.get(pin.group, 0.0) > now:
                continue
            self._quiet_until[pin.group] = now + self.retry_seconds
            try:
                await asyncio.wait_for(self.write(pin), timeout=self.write_timeout)
            except (PinFailed, TimeoutError) as exc:
                why = str(exc) or f"no answer within {self.write_timeout:g} s"
                self._event(pin, "Warning", DOMAIN_PIN_FAILED, f"{pin.note} failed: {why}")
                log.warning("topology domain pin failed", group=pin.group.key, error=why)
                continue
            self._event(pin, "Normal", DOMAIN_CHOSEN, pin.note)
            log.info("gang pinned", group=pin.group.key, key=pin.key, domain=pin.domain)
            written.append(pin)
        for ref in [r for r, until in self._quiet_until.items() if until <= now]:
            del self._quiet_until[ref]
        return written

    async def write(self, pin: DomainPin) -> None:
        """Every narrowing first, then every gate: PinFailed at the first phase that fails."""
        await self._all(pin, [self._narrow(key, uid, pin) for key, uid in pin.members])
        await self._all(pin, [self._lift(key) for key, _ in pin.members])

    @staticmethod
    async def _all(pin: DomainPin, writes: list[Coroutine[Any, Any, None]]) -> None:
        results = await asyncio.gather(*writes, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            first = errors[0]
            raise PinFailed(f"{len(errors)} of {len(pin.members)} members: {first}") from first

    async def _narrow(self, key: str, uid: str, pin: DomainPin) -> None:
        path = pod_path(key)
        try:
            pod: JSON = await self.kube.get(path)
        except KubeError as exc:
            self._api_error("narrow_affinity", exc)
            raise PinFailed(f"pod {key}: {exc}") from exc
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        if uid and metadata.get("uid") != uid:
            raise PinFailed(f"pod {key} was replaced")
        affinity = spec.get("affinity")
        if is_narrowed(affinity, pin.key, pin.domain):
            return
        gates = [g.get("name") for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
        if DOMAIN_GATE not in gates:
            raise PinFailed(f"pod {key} lost its {DOMAIN_GATE} gate before it was narrowed")
        body = {
            "metadata": {"resourceVersion": metadata.get("resourceVersion")},
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": narrowed_terms(affinity, pin.key, pin.domain)
                        }
                    }
                }
            },
        }
        try:
            await self.kube.patch(path, body, content_type=MERGE_PATCH)
        except KubeError as exc:
            self._api_error("narrow_affinity", exc)
            raise PinFailed(f"pod {key}: {exc}") from exc

    async def _lift(self, key: str) -> None:
        """Removes only DOMAIN_GATE (a strategic merge by gate name keeps any other)."""
        body = {"spec": {"schedulingGates": [{"$patch": "delete", "name": DOMAIN_GATE}]}}
        try:
            await self.kube.patch(pod_path(key), body, content_type=STRATEGIC_MERGE_PATCH)
        except KubeError as exc:
            self._api_error("lift_gate", exc)
            raise PinFailed(f"pod {key}: {exc}") from exc

    def _api_error(self, operation: str, exc: KubeError) -> None:
        self.metrics.api_errors.labels(operation, str(exc.status)).inc()

    def _event(self, pin: DomainPin, kind: str, reason: str, note: str) -> None:
        self.actuator.apply_event(
            Event("PodGroup", pin.group.key, kind, reason, "Scheduling", note)
        )
