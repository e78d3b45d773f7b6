"""What is measured from outside the schedulers: the API server's request counters, the
watch that timestamps every bind, and the machine's load while a run goes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.compare.cluster import FLOW_SCHEMA, Env
from bench.compare.workloads import NAMESPACE
from gangsched.edge.kube import Kube

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        match = _SAMPLE.match(line)
        if match and match.group(1) == name:
            out.append((dict(_LABEL.findall(match.group(2) or "")), float(match.group(3))))
    return out


@dataclass
class ApiCounts:
    """The API server's own counters at one moment."""

    scheduler: float  # apiserver_flowcontrol_dispatched_requests_total{flow_schema=bench-scheduler}
    by_request: dict[str, float]  # apiserver_request_total per "VERB resource[/sub]", leases apart

    @classmethod
    def read(cls, env: Env) -> ApiCounts:
        text = env.metrics()
        scheduler = sum(
            v
            for labels, v in samples(text, "apiserver_flowcontrol_dispatched_requests_total")
            if labels.get("flow_schema") == FLOW_SCHEMA
        )
        by: defaultdict[str, float] = defaultdict(float)
        for labels, v in samples(text, "apiserver_request_total"):
            resource = labels.get("resource", "") + (
                "/" + labels["subresource"] if labels.get("subresource") else ""
            )
            by[f"{labels.get('verb', '')} {resource}"] += v
        return cls(scheduler, dict(by))

    def since(self, before: ApiCounts) -> tuple[float, dict[str, float]]:
        delta = {
            k: v - before.by_request.get(k, 0.0)
            for k, v in self.by_request.items()
            if v - before.by_request.get(k, 0.0) > 0
        }
        return self.scheduler - before.scheduler, delta


# ------------------------------------------------------------------------------ watching
@dataclass
class Watch:
    bound_at: dict[str, float] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # deleted, or with a deletionTimestamp
    #: When each pod in `gone` was first seen going.
    gone_at: dict[str, float] = field(default_factory=dict)
    #: Pending pods with a status.nominatedNodeName: a preemption still under way.
    nominated: set[str] = field(default_factory=set)
    task: asyncio.Task[None] | None = None

    async def run(self, kube: Kube) -> None:
        listed = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods", limit=1)
        version = listed["metadata"]["resourceVersion"]
        while True:
            try:
                async for event in kube.watch(
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    query={"resourceVersion": version, "allowWatchBookmarks": "true"},
                    read_timeout=120,
                ):
                    now = time.time()
                    obj = event.get("object") or {}
                    meta = obj.get("metadata", {})
                    version = meta.get("resourceVersion", version)
                    name = meta.get("name")
                    if not name or event.get("type") == "BOOKMARK":
                        continue
                    if obj.get("spec", {}).get("nodeName") and name not in self.bound_at:
                        self.bound_at[name] = now
                    if event.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                        self.gone.add(name)
                        self.gone_at.setdefault(name, now)
                    if (
                        obj.get("status", {}).get("nominatedNodeName")
                        and not obj.get("spec", {}).get("nodeName")
                        and name not in self.gone
                    ):
                        self.nominated.add(name)
                    else:
                        self.nominated.discard(name)
            except asyncio.CancelledError:
                raise
            except Exception:  # a dropped stream: resume from the last version seen
                await asyncio.sleep(0.1)

    def start(self, kube: Kube) -> None:
        self.task = asyncio.create_task(self.run(kube))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


async def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return predicate()


async def wait_running(kube: Kube, timeout: float = 600) -> None:
    """Until kwok has marked every bound pod Running (its writes would otherwise compete)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = await kube.get(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            fieldSelector="status.phase=Pending,spec.nodeName!=",
            limit=1,
        )
        if not pending.get("items"):
            return
        await asyncio.sleep(1)
    raise TimeoutError("bound pods not Running")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
