"""events.k8s.io/v1 events, deduplicated and rate-limited.

A gang retried every few seconds would otherwise post the same FailedScheduling event each
time and flood etcd; kube-scheduler's recorder aggregates for the same reason. An identical
event (same object, reason and note) is posted at most once per `dedupe_seconds`, and a token
bucket caps the overall rate. They go out through the actuator's WriteGate: after the binds
queued with them, or once they have waited its `max_wait` (gangsched.edge.write_gate says why).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from gangsched.core.decisions import Event
from gangsched.edge.kube import JSON, Kube, KubeError
from gangsched.edge.write_gate import WriteGate

log = structlog.get_logger("gangsched.events")


def event_time(now: datetime | None = None) -> str:
    """MicroTime: exactly six fractional digits and a zone, or the API server rejects it."""
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class ObjectRef:
    kind: str
    namespace: str
    name: str
    api_version: str = "v1"
    uid: str = ""

    def as_json(self) -> JSON:
        ref: JSON = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        if self.uid:
            ref["uid"] = self.uid
        return ref


@dataclass
class EventRecorder:
    kube: Kube
    controller: str = "gangsched"
    instance: str = "gangsched"
    dedupe_seconds: float = 600.0
    rate_per_second: float = 50.0
    burst: float = 200.0
    #: How many events are in flight at once (the operator gives the actuator's).
    gate: WriteGate = field(default_factory=WriteGate)
    clock: Callable[[], float] = time.monotonic
    _recent: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    _tokens: float = 200.0
    _refilled: float = 0.0
    dropped: int = 0

    def should_post(self, event: Event) -> bool:
        now = self.clock()
        key = (event.regarding_kind, event.regarding, event.reason, event.note)
        last = self._recent.get(key)
        if last is not None and now - last < self.dedupe_seconds:
            return False
        self._tokens = min(self.burst, self._tokens + (now - self._refilled) * self.rate_per_second)
        self._refilled = now
        if self._tokens < 1:
            self.dropped += 1
            return False
        self._tokens -= 1
        self._recent[key] = now
        if len(self._recent) > 10_000:
            cutoff = now - self.dedupe_seconds
            self._recent = {k: t for k, t in self._recent.items() if t >= cutoff}
        return True

    async def post(
        self, event: Event, regarding: ObjectRef, related: ObjectRef | None
    ) -> str | None:
        """None when posted (or skipped as a duplicate or over the rate limit); else why not:
        the HTTP status, or "connection" (logged either way)."""
        if not self.should_post(event):
            return None
        # Events about cluster-scoped objects (nodes, priority classes) live in "default",
        # as client-go's recorder puts them.
        namespace = regarding.namespace or "default"
        body: JSON = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # client-go's naming: "<object>.<hex nanoseconds>" (a valid, unique DNS subdomain).
            "metadata": {
                "name": f"{regarding.name}.{time.time_ns():x}",
                "namespace": namespace,
            },
            "eventTime": event_time(),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": event.action,
            "reason": event.reason,
            "type": event.type,
            "note": event.note[:1024],
            "regarding": regarding.as_json(),
        }
        if related is not None:
            body["related"] = related.as_json()
        try:
            async with self.gate.slot():
                await self.kube.post(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body)
        except KubeError as exc:
            log.warning(
                "event not recorded", reason=event.reason, regarding=event.regarding, error=str(exc)
            )
            return str(exc.status)
        except Exception as exc:  # connection lost: events are best effort
            log.warning(
                "event not recorded",
                reason=event.reason,
                regarding=event.regarding,
                error=repr(exc),
            )
            return "connection"
        return None
