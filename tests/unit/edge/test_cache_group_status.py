"""A PodGroup update that changes only its status (gangsched writes one after each cycle)
does not requeue the gang; a spec change does."""

from __future__ import annotations

import copy

from gangsched.core.model import Dialect, GroupRef
from gangsched.core.queue import State
from tests.builders import raw_node, raw_pod, raw_pod_group
from tests.unit.edge.test_cache import make


def test_status_only_update_does_not_requeue_but_a_spec_change_does() -> None:
    cache, scheduler = make()
    cache.nodes().replace([raw_node("n1", cpu="1")])
    cache.pod_groups().replace([raw_pod_group("g", 2)])
    cache.pods().replace([raw_pod("a", group="g"), raw_pod("b", group="g")])
    ref = GroupRef(Dialect.SIGS, "default", "g")
    report = scheduler.step(0.0)
    assert report is not None and report.gang == ref  # two 1-CPU pods, one 1-CPU node
    assert scheduler.queue.state_of(ref) is State.UNSCHEDULABLE

    with_status = copy.deepcopy(raw_pod_group("g", 2))
    with_status["status"] = {"phase": "Pending", "scheduled": 0}
    cache.pod_groups().upsert(with_status)
    assert scheduler.queue.state_of(ref) is State.UNSCHEDULABLE
    assert scheduler.step(0.1) is None

    cache.pod_groups().upsert(raw_pod_group("g", 1))  # minMember lowered: try again now
    assert scheduler.queue.state_of(ref) is State.ACTIVE
