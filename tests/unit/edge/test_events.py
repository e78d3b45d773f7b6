"""Event recorder: deduplication window, rate limit, and the MicroTime format."""

from __future__ import annotations

import asyncio
import re

from gangsched.core.decisions import Event
from gangsched.edge.events import EventRecorder, ObjectRef, event_time
from gangsched.edge.write_gate import WriteGate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_event_time_has_six_fractional_digits_and_zone() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event_time())


def test_identical_events_are_posted_once_per_window() -> None:
    clock = Clock()
    recorder = EventRecorder(kube=None, clock=clock, dedupe_seconds=600)  # type: ignore[arg-type]
    event = Event("PodGroup", "default/g", "Warning", "FailedScheduling", "Scheduling", "no fit")
    assert recorder.should_post(event)
    assert not recorder.should_post(event)
    other = Event("PodGroup", "default/g", "Warning", "FailedScheduling", "Scheduling", "new")
    assert recorder.should_post(other)
    clock.now += 601
    assert recorder.should_post(event)


def test_rate_limit_drops_beyond_the_burst_and_refills() -> None:
    clock = Clock()
    recorder = EventRecorder(
        kube=None,  # type: ignore[arg-type]
        clock=clock,
        rate_per_second=1,
        burst=3,
    )
    recorder._tokens = 3
    recorder._refilled = clock.now
    posted = [
        recorder.should_post(Event("Pod", f"default/p{i}", "Normal", "Scheduled", "Binding", "x"))
        for i in range(5)
    ]
    assert posted == [True, True, True, False, False]
    assert recorder.dropped == 2
    clock.now += 2
    assert recorder.should_post(Event("Pod", "default/late", "Normal", "Scheduled", "Binding", "x"))


async def test_few_events_are_in_flight_at_once() -> None:
    """A burst of events (one per gang bound) goes out a few at a time, all of it."""

    class SlowKube:
        def __init__(self) -> None:
            self.in_flight = 0
            self.most = 0
            self.posted = 0
            self.release = asyncio.Event()

        async def post(self, path: str, body: dict[str, object]) -> None:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await self.release.wait()
            self.in_flight -= 1
            self.posted += 1

    kube = SlowKube()
    recorder = EventRecorder(kube=kube, gate=WriteGate(while_binding=4, otherwise=4))  # type: ignore[arg-type]
    ref = ObjectRef("PodGroup", "default", "g", "scheduling.x-k8s.io/v1alpha1", "uid")
    posts = [
        asyncio.create_task(
            recorder.post(
                Event("PodGroup", f"default/g{i}", "Normal", "Scheduled", "Binding", "ok"),
                ref,
                None,
            )
        )
        for i in range(10)
    ]
    for _ in range(5):
        await asyncio.sleep(0)
    assert kube.most == 4
    kube.release.set()
    assert await asyncio.gather(*posts) == [None] * 10
    assert kube.posted == 10 and kube.most == 4
