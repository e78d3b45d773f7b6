"""The pre-bind stage: all write-backs or none, and a failure named after its own PreBind plugin."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from gangsched.edge.kube import Kube
from gangsched.edge.prebind import CONFIRMED, PENDING, Check, PreBindStage, failed


@dataclass
class Write:
    target: str
    plugin: str
    answer: Check = CONFIRMED
    refuse: bool = False
    log: list[str] = field(default_factory=list)

    async def write(self, kube: Kube) -> None:
        if self.refuse:
            raise RuntimeError("409 Conflict")
        self.log.append(f"write {self.target}")

    def check(self) -> Check:
        return self.answer

    async def undo(self, kube: Kube) -> None:
        self.log.append(f"undo {self.target}")

    def forget(self) -> None:
        self.log.append(f"forget {self.target}")


def run(*writes: Write, timeout: float = 5.0) -> tuple[bool, str, str]:
    stage = PreBindStage(kube=None, timeout=timeout, poll=0.01)  # type: ignore[arg-type]
    outcome = asyncio.run(stage.run(writes))
    return outcome.ok, outcome.reason, outcome.plugin


def test_all_confirmed_is_ok_with_no_plugin_to_blame() -> None:
    volume, claim = Write("PVC a", "VolumeBinding"), Write("ResourceClaim b", "DynamicResources")
    assert run(volume, claim) == (True, "", "")
    assert volume.log == ["write PVC a"] and claim.log == ["write ResourceClaim b"]


def test_a_failed_check_names_the_plugin_of_that_write_and_undoes_every_write() -> None:
    log: list[str] = []
    volume = Write("PVC a", "VolumeBinding", log=log)
    claim = Write("ResourceClaim b", "DynamicResources", failed("cannot allocate"), log=log)
    assert run(volume, claim) == (False, "cannot allocate", "DynamicResources")
    assert log[-2:] == ["undo PVC a", "undo ResourceClaim b"]


def test_a_refused_write_names_its_plugin_and_nothing_after_it_is_written() -> None:
    log: list[str] = []
    volume = Write("PVC a", "VolumeBinding", refuse=True, log=log)
    claim = Write("ResourceClaim b", "DynamicResources", log=log)
    ok, reason, plugin = run(volume, claim)
    assert (ok, plugin) == (False, "VolumeBinding")
    assert reason == "writing PVC a: 409 Conflict"
    assert "write ResourceClaim b" not in log


def test_a_timeout_names_the_plugin_of_the_first_write_still_pending() -> None:
    claim = Write("ResourceClaim b", "DynamicResources")
    volume = Write("PVC a", "VolumeBinding", PENDING)
    ok, reason, plugin = run(claim, volume, timeout=0.05)
    assert (ok, plugin) == (False, "VolumeBinding")
    assert reason.startswith("timed out after 0.05s waiting for PVC a")


@dataclass
class SlowWrite(Write):
    """A write that takes a while: counts how many are in flight together."""

    flight: list[int] = field(default_factory=lambda: [0, 0])  # now, most

    async def write(self, kube: Kube) -> None:
        self.flight[0] += 1
        self.flight[1] = max(self.flight)
        try:
            await asyncio.sleep(0.01)
            await super().write(kube)
        finally:
            self.flight[0] -= 1


def test_writes_go_out_together_and_a_refusal_undoes_every_started_one() -> None:
    log: list[str] = []
    flight = [0, 0]
    claims = [
        SlowWrite(f"ResourceClaim c{i}", "DynamicResources", log=log, flight=flight)
        for i in range(40)
    ]
    assert run(*claims) == (True, "", "")
    assert 1 < flight[1] <= 16  # concurrently, at most `concurrency` at once
    log.clear()
    flight[:] = [0, 0]
    claims[3].refuse = True
    ok, reason, plugin = run(*claims)
    assert (ok, reason, plugin) == (
        False,
        "writing ResourceClaim c3: 409 Conflict",
        "DynamicResources",
    )
    started = [c.target for c in claims[:16]]  # the first 16 were in flight when c3 failed
    undone = [entry.removeprefix("undo ") for entry in log if entry.startswith("undo ")]
    assert undone == started, "every started write-back undone, no other"
    assert not any(entry.startswith(f"write {c.target}") for c in claims[16:] for entry in log)
