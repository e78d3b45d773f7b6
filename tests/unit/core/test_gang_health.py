"""core/gang_health.py: budgets for running gangs, and stale gangs released after their grace
period, with `now` passed in (no test sleeps)."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.api.dialects import SIGS_POD_GROUP_LABEL
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import Event, Evict, SetCondition
from gangsched.core.gang_health import (
    GANG_BROKEN,
    GANG_RECOVERED,
    GANG_UNPROTECTED,
    STALE_GANG_RELEASED,
    GangHealth,
    GangHealthConfig,
    budget_name,
)
from gangsched.core.model import Dialect, Pod, PodGroup, Taint
from tests.builders import budget, cluster, group, node, pod, ref

TRAIN = ref("train")


def members(count: int, *, name: str = "train", nodes: int = 4, **kwargs: object) -> list[Pod]:
    return [
        pod(
            f"{name}-{i}",
            group=name,
            labels={SIGS_POD_GROUP_LABEL: name},
            node_name=f"n{i % nodes}",
            **kwargs,  # type: ignore[arg-type]
        )
        for i in range(count)
    ]


def running_gang(
    count: int = 4, min_member: int = 4, **group_fields: object
) -> tuple[ClusterState, PodGroup]:
    gang = group("train", min_member)
    for key, value in group_fields.items():
        setattr(gang, key, value)
    state = cluster([node(f"n{i}") for i in range(4)], members(count), [gang])
    return state, gang


def lose(state: ClusterState, key: str) -> None:
    state.delete_pod(key)


def test_a_running_gang_gets_a_budget_of_min_member_over_its_label() -> None:
    state, _ = running_gang(count=5, min_member=4)
    review = GangHealth().review(state, now=0.0)
    gang_budget = review.budgets[TRAIN]
    assert gang_budget.min_available == 4
    assert gang_budget.selector == ((SIGS_POD_GROUP_LABEL, "train"),)
    assert gang_budget.name == budget_name(TRAIN) == "gang-sigs-train"
    assert review.broken == [] and review.released == [] and review.decisions == []


def test_the_budget_waits_for_min_member_started_then_stays_through_replacements() -> None:
    """A bound member still Pending may be evicted whatever the budgets say (the Eviction
    API's rule), so a budget is first wanted once minMember members run; a replacement that
    has not started yet does not take it away."""
    gang = group("train", 4)
    bound = members(4, phase="Pending")
    state = cluster([node(f"n{i}") for i in range(4)], bound, [gang])
    health = GangHealth()
    assert health.review(state, now=0.0).budgets == {}  # bound, none started
    for member in bound[:3]:
        state.upsert_pod(replace(member, phase="Running"))
    assert health.review(state, now=1.0).budgets == {}  # 3 of minMember 4 started
    state.upsert_pod(replace(bound[3], phase="Running"))
    assert TRAIN in health.review(state, now=2.0).budgets
    lose(state, "default/train-0")
    state.upsert_pod(replace(bound[0], name="train-4", phase="Pending"))  # its replacement
    review = health.review(state, now=3.0)
    assert TRAIN in review.budgets and review.released == []


def test_a_restarted_scheduler_keeps_the_budget_of_a_gang_not_started() -> None:
    gang = group("train", 4)
    state = cluster([node(f"n{i}") for i in range(4)], members(4, phase="Pending"), [gang])
    review = GangHealth().review(state, now=0.0, budgeted=frozenset({TRAIN}))
    assert TRAIN in review.budgets  # deleted and created again later would only churn


def test_a_gang_still_being_placed_gets_no_budget_and_is_never_released() -> None:
    state, _ = running_gang(count=4)
    lose(state, "default/train-3")  # 3 of 4 bound, never ran whole
    health = GangHealth(GangHealthConfig(grace_seconds=0))
    for now in (0.0, 1000.0):
        review = health.review(state, now=now)
        assert review.budgets == {} and review.released == [] and review.decisions == []


def test_opted_out_group_gets_no_budget_but_the_default_off_can_be_overridden_on() -> None:
    state, _ = running_gang(disruption_protection=False)
    assert GangHealth().review(state, now=0.0).budgets == {}
    state, _ = running_gang(disruption_protection=True)
    assert TRAIN in GangHealth(GangHealthConfig(protect=False)).review(state, now=0).budgets
    state, _ = running_gang()
    assert GangHealth(GangHealthConfig(protect=False)).review(state, now=0).budgets == {}


def test_broken_gang_is_released_whole_after_its_grace_period() -> None:
    state, _ = running_gang()
    health = GangHealth(GangHealthConfig(grace_seconds=60))
    health.review(state, now=0.0)
    lose(state, "default/train-0")
    first = health.review(state, now=10.0)
    assert first.broken == [TRAIN] and first.released == []
    assert [d.reason for d in first.decisions if isinstance(d, Event)] == [GANG_BROKEN]
    assert TRAIN in first.budgets  # what is left stays protected while it may recover
    assert health.review(state, now=69.0).released == []
    last = health.review(state, now=70.0)
    assert last.released == [TRAIN] and TRAIN not in last.budgets
    evicted = sorted(d.pod for d in last.decisions if isinstance(d, Evict))
    assert evicted == ["default/train-1", "default/train-2", "default/train-3"]
    conditions = [d for d in last.decisions if isinstance(d, SetCondition)]
    assert {(c.type, c.status, c.reason) for c in conditions} == {
        ("DisruptionTarget", "True", STALE_GANG_RELEASED)
    }
    group_events = [
        d for d in last.decisions if isinstance(d, Event) and d.regarding_kind == "PodGroup"
    ]
    assert [(e.type, e.reason) for e in group_events] == [("Warning", STALE_GANG_RELEASED)]
    assert (
        "1 of minMember 4" not in group_events[0].note
        and "3 of minMember 4" in group_events[0].note
    )
    # Released: forgotten, so the rest going away is not a second break or release.
    for key in evicted:
        lose(state, key)
    assert health.review(state, now=80.0).decisions == []


def test_replacements_bound_within_the_grace_period_cancel_the_release() -> None:
    state, _ = running_gang()
    health = GangHealth(GangHealthConfig(grace_seconds=60))
    health.review(state, now=0.0)
    lose(state, "default/train-0")
    health.review(state, now=1.0)
    replacement = members(1, nodes=1)[0]
    state.upsert_pod(replacement)
    back = health.review(state, now=30.0)
    assert [d.reason for d in back.decisions if isinstance(d, Event)] == [GANG_RECOVERED]
    assert health.review(state, now=1000.0).released == []


def test_a_member_on_a_deleted_node_is_lost_and_a_failed_one_too() -> None:
    state, _ = running_gang()
    health = GangHealth(GangHealthConfig(grace_seconds=5))
    health.review(state, now=0.0)
    state.delete_node("n0")
    review = health.review(state, now=1.0)
    assert review.broken == [TRAIN]
    note = next(d.note for d in review.decisions if isinstance(d, Event))
    assert "default/train-0 (node n0 gone)" in note
    released = health.review(state, now=6.0)
    # Every remaining member is evicted, the one on the lost node too (PodGC would only
    # delete it later; its owner gets it back sooner).
    assert len([d for d in released.decisions if isinstance(d, Evict)]) == 4

    state, _ = running_gang()
    health = GangHealth(GangHealthConfig(grace_seconds=5))
    health.review(state, now=0.0)
    failed = state.pods["default/train-1"]
    state.upsert_pod(members(2, phase="Failed")[1])
    assert failed is not state.pods["default/train-1"]
    assert health.review(state, now=1.0).broken == [TRAIN]


def test_a_member_on_a_node_gone_not_ready_is_lost_until_the_node_is_back() -> None:
    """The node lifecycle controller's NoExecute taint (NotReady or unreachable), not its
    NoSchedule one: the member stays bound for the taint manager's 300 s, doing no work."""
    state, _ = running_gang()
    health = GangHealth(GangHealthConfig(grace_seconds=5))
    health.review(state, now=0.0)
    before = state.node_set_revision
    starting = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
    state.upsert_node(node("n0", taints=[starting]))
    assert state.node_set_revision == before  # a NoSchedule taint takes no member's place
    assert health.review(state, now=1.0).broken == []
    unreachable = Taint("node.kubernetes.io/unreachable", "", "NoExecute")
    state.upsert_node(node("n0", taints=[unreachable]))
    assert state.node_set_revision == before + 1
    review = health.review(state, now=2.0)
    assert review.broken == [TRAIN]
    assert TRAIN in review.budgets  # what is left stays protected while it waits
    note = next(d.note for d in review.decisions if isinstance(d, Event))
    assert "3 of 4 members hold their place" in note
    assert "default/train-0 (node n0 not ready)" in note
    state.upsert_node(node("n0"))  # Ready again within the grace period
    back = health.review(state, now=4.0)
    assert [d.reason for d in back.decisions if isinstance(d, Event)] == [GANG_RECOVERED]
    assert health.review(state, now=9.0).released == []

    state, _ = running_gang()
    health = GangHealth(GangHealthConfig(grace_seconds=5))
    health.review(state, now=0.0)
    state.replace_nodes(  # a relist finds n1 NotReady
        [
            node(
                f"n{i}", taints=[Taint("node.kubernetes.io/not-ready", "", "NoExecute")] * (i == 1)
            )
            for i in range(4)
        ]
    )
    assert health.review(state, now=1.0).broken == [TRAIN]
    released = health.review(state, now=7.0)
    assert released.released == [TRAIN]
    assert len([d for d in released.decisions if isinstance(d, Evict)]) == 4


def test_never_and_per_group_grace() -> None:
    state, _ = running_gang(stale_grace_seconds=math.inf)
    health = GangHealth(GangHealthConfig(grace_seconds=0))
    health.review(state, now=0.0)
    lose(state, "default/train-0")
    review = health.review(state, now=1.0)
    assert review.broken == [TRAIN]
    assert "never released" in next(d.note for d in review.decisions if isinstance(d, Event))
    assert health.review(state, now=10.0**9).released == []

    state, _ = running_gang(stale_grace_seconds=5.0)
    health = GangHealth(GangHealthConfig(grace_seconds=math.inf))
    health.review(state, now=0.0)
    lose(state, "default/train-0")
    health.review(state, now=1.0)
    assert health.review(state, now=6.0).released == [TRAIN]


def test_a_completing_gang_is_not_broken() -> None:
    state, _ = running_gang()
    health = GangHealth(GangHealthConfig(grace_seconds=0))
    health.review(state, now=0.0)
    state.upsert_pod(members(1, phase="Succeeded")[0])
    review = health.review(state, now=1.0)
    assert review.broken == [] and review.budgets == {} and review.decisions == []


def test_a_restarted_scheduler_knows_running_gangs_from_their_budgets() -> None:
    state, _ = running_gang()
    lose(state, "default/train-0")
    health = GangHealth(GangHealthConfig(grace_seconds=0))
    assert health.review(state, now=0.0).broken == []  # no memory: never ran whole here
    fresh = GangHealth(GangHealthConfig(grace_seconds=0))
    assert fresh.review(state, now=0.0, budgeted=frozenset({TRAIN})).released == [TRAIN]


def test_unprotectable_gangs_are_told_once() -> None:
    # A Volcano gang: membership is an annotation; its members share no label.
    gang = group("vc", 2, dialect=Dialect.VOLCANO)
    pods = [
        pod(f"vc-{i}", group="vc", dialect=Dialect.VOLCANO, node_name="n0", labels={"i": str(i)})
        for i in range(2)
    ]
    state = cluster([node("n0")], pods, [gang])
    health = GangHealth()
    review = health.review(state, now=0.0)
    assert review.budgets == {} and "share no label" in review.unprotected[gang.ref]
    assert [d.reason for d in review.decisions if isinstance(d, Event)] == [GANG_UNPROTECTED]
    assert health.review(state, now=1.0).decisions == []


def test_shared_labels_select_a_gang_without_a_membership_label_unless_others_match() -> None:
    gang = group("vc", 2, dialect=Dialect.VOLCANO)
    labels = {"job": "vc", "role": "worker"}
    pods = [
        pod(f"vc-{i}", group="vc", dialect=Dialect.VOLCANO, node_name="n0", labels=labels)
        for i in range(2)
    ]
    state = cluster([node("n0")], pods, [gang])
    review = GangHealth().review(state, now=0.0)
    assert review.budgets[gang.ref].selector == (("job", "vc"), ("role", "worker"))
    assert review.budgets[gang.ref].name == "gang-volcano-vc"
    state.upsert_pod(pod("stranger", node_name="n0", labels=labels))
    review = GangHealth().review(state, now=0.0)
    assert "also select default/stranger" in review.unprotected[gang.ref]


def test_a_users_budget_on_the_members_wins() -> None:
    state, _ = running_gang()
    state.budgets["default/mine"] = budget("mine", 1, **{SIGS_POD_GROUP_LABEL: "train"})
    review = GangHealth().review(state, now=0.0)
    assert review.budgets == {}
    assert "default/mine already selects" in review.unprotected[TRAIN]


@settings(max_examples=60, deadline=None)
@given(
    lost=st.sets(st.integers(0, 5), max_size=6),
    grace=st.sampled_from([0.0, 10.0, math.inf]),
    protect=st.sampled_from([None, True, False]),
    waited=st.floats(0, 100),
)
def test_released_gangs_keep_no_member_and_opted_out_gangs_never_get_a_budget(
    lost: set[int], grace: float, protect: bool | None, waited: float
) -> None:
    state, _ = running_gang(count=6, min_member=4, disruption_protection=protect)
    health = GangHealth(GangHealthConfig(grace_seconds=grace))
    reviews = [health.review(state, now=0.0)]
    for i in sorted(lost):
        lose(state, f"default/train-{i}")
    reviews.append(health.review(state, now=1.0))
    reviews.append(health.review(state, now=1.0 + waited))
    for review in reviews:
        if protect is False:
            assert TRAIN not in review.budgets
        if TRAIN in review.released:
            evicted = {d.pod for d in review.decisions if isinstance(d, Evict)}
            left = {p.key for p in state.group_members(TRAIN) if p.node_name is not None}
            assert evicted == left  # no member left bound once the evictions are carried out
            assert TRAIN not in review.budgets
    released = any(TRAIN in r.released for r in reviews)
    # Released exactly when some but too few members are left and the grace ran out.
    assert released == (0 < 6 - len(lost) < 4 and waited >= grace)


def test_the_selector_is_recomputed_when_the_members_change() -> None:
    gang = group("vc", 2, dialect=Dialect.VOLCANO)
    pods = [
        pod(f"vc-{i}", group="vc", dialect=Dialect.VOLCANO, node_name="n0", labels={"job": "vc"})
        for i in range(2)
    ]
    pods[0].labels["extra"] = "x"
    state = cluster([node("n0")], pods, [gang])
    health = GangHealth()
    assert health.review(state, now=0.0).budgets[gang.ref].selector == (("job", "vc"),)
    state.delete_pod("default/vc-1")  # replaced by a member with another label set
    state.upsert_pod(
        pod(
            "vc-2",
            group="vc",
            dialect=Dialect.VOLCANO,
            node_name="n0",
            labels={"job": "vc", "extra": "x"},
        )
    )
    assert health.review(state, now=1.0).budgets[gang.ref].selector == (
        ("extra", "x"),
        ("job", "vc"),
    )
