"""Unsupported: a pod gangsched cannot place correctly yet is refused, never bound."""

from __future__ import annotations

from gangsched.core.api import PriorityResolver, pod_from_raw
from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE, Bind
from gangsched.core.scheduler import Scheduler
from tests.builders import cluster, gang_pods, group, node

CLAIMS = "spec.someFeature (a feature gangsched cannot place)"
MESSAGE = f"0/2 nodes are available: gangsched does not support {CLAIMS} yet."


def test_a_pod_with_resource_claims_is_no_longer_unsupported() -> None:
    """Since DRA (gangsched.core.dra) resource claims are read and allocated."""
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "default"},
        "spec": {
            "containers": [{"name": "main"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}],
        },
    }
    pod = pod_from_raw(raw, priorities=PriorityResolver())
    assert pod.unsupported == ()
    assert [(c.name, c.template_name) for c in pod.claims] == [("gpu", "two-gpus")]


def test_a_gang_needing_an_unsupported_member_binds_nothing() -> None:
    members = gang_pods("g", 3)
    members[2].unsupported = (CLAIMS,)
    state = cluster([node("n1"), node("n2")], members, [group("g", 3)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == UNSCHEDULABLE
    assert not any(isinstance(d, Bind) for d in report.decisions)
    assert MESSAGE in report.message
    assert all(p.node_name is None for p in state.pods.values())


def test_an_unsupported_extra_member_stays_pending_alone() -> None:
    members = gang_pods("g", 3)
    members[2].unsupported = (CLAIMS,)
    state = cluster([node("n1"), node("n2")], members, [group("g", 2)])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == SCHEDULED
    assert sorted(b.pod for b in report.bound) == ["default/g-0", "default/g-1"]
    assert state.pods["default/g-2"].node_name is None
