"""The pre-bind write-back stage: write a gang's side decisions, wait until confirmed, then bind.

Some decisions of a cycle are not the bind itself but writes other controllers must complete
before a pod may run on its node: a PV's `spec.claimRef` (the PV controller binds the claim),
a PVC's `volume.kubernetes.io/selected-node` (a provisioner creates the volume), a
ResourceClaim's allocation (DRA). kube-scheduler does these in each pod's own PreBind, so a
gang whose third member's volume fails to provision is left with two members bound. Here the
stage runs once per gang, for every member at once:

1. `write` every write-back (all of them, before waiting for any; up to `concurrency` at a
   time: a 32-pod GPU gang has 32 claims, each a read and two writes, and one after the other
   they took seconds);
2. poll `check` on each until all are confirmed, one fails, or `timeout` passes (without
   blocking other gangs: the stage is one asyncio task per gang);
3. success: the caller binds the pods; failure: `undo` every write-back (best effort, each
   undoes only what is still undoable), and the caller forgets the placements, records why on
   the pods and the PodGroup and retries the gang with backoff. No pod of the gang is bound.

A capability adds a write-back by implementing `WriteBack` (see `edge/volume_writebacks.py`
for PVs and PVCs); the stage itself knows nothing about volumes or claims.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import structlog

from gangsched.edge.kube import Kube

log = structlog.get_logger("gangsched.prebind")


class State(Enum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Check:
    state: State
    reason: str = ""


PENDING = Check(State.PENDING)
CONFIRMED = Check(State.CONFIRMED)


def failed(reason: str) -> Check:
    return Check(State.FAILED, reason)


class WriteBack(Protocol):
    #: What is written, for logs and messages ("PersistentVolumeClaim ml/data").
    @property
    def target(self) -> str: ...

    #: The kube-scheduler PreBind plugin that makes this write ("VolumeBinding",
    #: "DynamicResources"): a failure is reported as that plugin's, as upstream words it.
    @property
    def plugin(self) -> str: ...

    async def write(self, kube: Kube) -> None:
        """Carry the decision to the API server; raise (KubeError, connection error) when
        refused: the stage then fails and undoes the others."""

    def check(self) -> Check:
        """Whether the write took effect yet, from the informer caches (cheap, polled)."""

    async def undo(self, kube: Kube) -> None:
        """Take the decision back if it still can be (best effort; must not raise)."""

    def forget(self) -> None:
        """After a failed stage: drop what the scheduler assumed about the target, so the
        gang's retry reads the object as the API server last showed it."""


@dataclass(slots=True)
class Outcome:
    ok: bool
    reason: str = ""
    seconds: float = 0.0
    #: The PreBind plugin whose write failed or timed out ("" on success or lost leadership).
    plugin: str = ""


@dataclass
class PreBindStage:
    kube: Kube
    #: How long to wait for confirmation (kube-scheduler's bindTimeoutSeconds, default 600).
    timeout: float = 600.0
    #: Between checks (kube-scheduler polls every second; our checks read local caches).
    poll: float = 0.2
    #: False once leadership is lost: stop waiting, undo nothing (the next leader decides).
    may_write: Callable[[], bool] = lambda: True
    #: Write-backs written at once (each is independent of the others).
    concurrency: int = 16

    async def run(self, writes: Sequence[WriteBack]) -> Outcome:
        started = time.monotonic()
        refused = await self._write_all(writes)
        if refused is not None:
            reason, plugin = refused
            return Outcome(False, reason, time.monotonic() - started, plugin)
        deadline = started + self.timeout
        while True:
            checks = [(w, w.check()) for w in writes]
            failure = next(((w, c) for w, c in checks if c.state is State.FAILED), None)
            if failure is not None:
                await self._undo(writes)
                return Outcome(
                    False, failure[1].reason, time.monotonic() - started, failure[0].plugin
                )
            if all(c.state is State.CONFIRMED for _, c in checks):
                return Outcome(True, "", time.monotonic() - started)
            if not self.may_write():
                return Outcome(False, "not leader", time.monotonic() - started)
            if time.monotonic() >= deadline:
                pending = [w for w, c in checks if c.state is State.PENDING]
                waiting = ", ".join(w.target for w in pending)
                await self._undo(writes)
                return Outcome(
                    False,
                    f"timed out after {self.timeout:g}s waiting for {waiting}",
                    time.monotonic() - started,
                    pending[0].plugin,
                )
            await asyncio.sleep(self.poll)

    async def _write_all(self, writes: Sequence[WriteBack]) -> tuple[str, str] | None:
        """Write them all; after the first refusal start no more, let those in flight finish,
        undo every one that was started and say why (and whose write it was). None when all
        were written."""
        slots = asyncio.Semaphore(self.concurrency)
        started: list[WriteBack] = []
        failures: list[tuple[str, str]] = []
        lost = False

        async def write(write_back: WriteBack) -> None:
            nonlocal lost
            async with slots:
                if failures or lost:
                    return
                if not self.may_write():
                    lost = True
                    return
                started.append(write_back)
                try:
                    await write_back.write(self.kube)
                except Exception as exc:  # refused or unreachable: nothing more is written
                    reason = f"writing {write_back.target}: {exc or repr(exc)}"
                    failures.append((reason, write_back.plugin))

        await asyncio.gather(*(write(w) for w in writes))
        if failures:
            await self._undo([w for w in writes if w in started])
            return failures[0]
        if lost:
            return ("not leader", "")
        return None

    async def _undo(self, writes: Sequence[WriteBack]) -> None:
        if not self.may_write():
            return
        for write_back in writes:
            try:
                await write_back.undo(self.kube)
            except Exception as exc:  # best effort: log and go on with the others
                log.warning("undo failed", target=write_back.target, error=repr(exc))
