"""Properties of the capacity wait on the preemption properties' random clusters
(test_properties.py): while a gang waits, nothing is decided against anyone; once the wait is
over, exactly what preempting at once would have decided goes through; and a gang preemption
cannot help is never said to wait."""

from __future__ import annotations

from hypothesis import given

from gangsched.core.gang_placer import GangPlacer
from gangsched.core.plugins import build_framework
from gangsched.core.preemption import KEP, MINCOST, build_preemptor
from gangsched.core.preemption.capacity_wait import CapacityWaitPreemptor
from gangsched.core.status import Code
from tests.builders import SCHEDULER

from .drive import gang_of
from .test_properties import SETTINGS, Spec, build, specs

WAIT = 600.0


@SETTINGS
@given(specs())
def test_waiting_decides_nothing_and_expiry_decides_what_preempting_would(spec: Spec) -> None:
    for strategy in (KEP, MINCOST):
        state, key = build(spec)
        framework = build_framework()
        gang = gang_of(state, key)
        mark = state.snapshot.checkpoint()
        failed = GangPlacer(framework).place(gang, state.snapshot)
        state.snapshot.rollback(mark)
        if failed.code is not Code.UNSCHEDULABLE:
            continue
        plain = build_preemptor(strategy=strategy, scheduler_name=SCHEDULER)
        at_once = plain.preempt(gang, failed, state, framework)
        waiting = CapacityWaitPreemptor(
            build_preemptor(strategy=strategy, scheduler_name=SCHEDULER),
            clock=lambda: 1_000.0,
            default_seconds=WAIT,
        )
        held = waiting.preempt(gang, failed, state, framework)
        assert not held.decisions
        if at_once.victims:
            assert not held.started
            assert held.waiting_until == 1_000.0 + WAIT
            assert held.retry_after == WAIT
            assert {p.key for p in held.victims} == {p.key for p in at_once.victims}
        else:  # nothing to hold back: reported as it is, never as a wait
            assert held.waiting_until is None and held.retry_after is None
            assert (held.started, held.message) == (at_once.started, at_once.message)
        # The same preemptor, past the end of its wait: the decisions of preempting at once.
        waiting.clock = lambda: 1_000.0 + WAIT
        expired = waiting.preempt(gang, failed, state, framework)
        assert expired.decisions == at_once.decisions
        assert expired.started == at_once.started
        assert expired.waiting_until is None
