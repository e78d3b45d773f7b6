"""Event recorder: deduplication window, rate limit, and the MicroTime format."""

from __future__ import annotations

import re

from gangsched.core.decisions import Event
from gangsched.edge.events import EventRecorder, event_time


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
