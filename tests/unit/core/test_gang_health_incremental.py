"""core/gang_health.py's incremental review: only the gangs whose members or PodGroup changed
(ClusterState.group_revisions), the short ones and those a budget newly names are looked at
again, and the review says the same as one that looks at every gang."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core import gang_health
from gangsched.core.api.dialects import SIGS_POD_GROUP_LABEL
from gangsched.core.cluster import ClusterState
from gangsched.core.gang_health import GangHealth, GangHealthConfig, HealthReview
from gangsched.core.model import NODE_DOWN_TAINTS, Dialect, GroupRef, Pod, PodGroup, Taint
from tests.builders import budget, cluster, group, node, pod, ref


def gangs(count: int, *, size: int = 3) -> tuple[ClusterState, list[PodGroup]]:
    groups = [group(f"g{g}", size) for g in range(count)]
    pods = [
        pod(f"g{g}-{i}", group=f"g{g}", labels={SIGS_POD_GROUP_LABEL: f"g{g}"}, node_name="n0")
        for g in range(count)
        for i in range(size)
    ]
    return cluster([node("n0", pods=500), node("n1", pods=500)], pods, groups), groups


def counted(monkeypatch: pytest.MonkeyPatch) -> list[GroupRef]:
    """The gangs censused from now on, in order."""
    seen: list[GroupRef] = []
    census = gang_health._census

    def counting(state: ClusterState, gang: GroupRef) -> tuple[list[Pod], int, int, bool]:
        seen.append(gang)
        return census(state, gang)

    monkeypatch.setattr(gang_health, "_census", counting)
    return seen


def test_an_unchanged_gang_is_not_censused_again(monkeypatch: pytest.MonkeyPatch) -> None:
    state, _ = gangs(3)
    health = GangHealth()
    seen = counted(monkeypatch)
    first = health.review(state, now=0.0)
    assert sorted(seen, key=str) == [ref("g0"), ref("g1"), ref("g2")] and len(first.budgets) == 3
    seen.clear()
    assert health.review(state, now=1.0).budgets == first.budgets
    assert seen == []  # nothing changed: nothing looked at
    member = state.pods["default/g1-0"]
    state.upsert_pod(replace(member, labels=dict(member.labels)))
    again = health.review(state, now=2.0)
    assert seen == [ref("g1")]
    # Every gang's budget, not only the one looked at (the edge deletes the budgets missing).
    assert again.budgets == first.budgets and set(again.budgets) == {
        ref("g0"),
        ref("g1"),
        ref("g2"),
    }


def test_every_gang_is_looked_at_again_when_what_all_read_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, _ = gangs(2)
    health = GangHealth()
    health.review(state, now=0.0)
    seen = counted(monkeypatch)
    state.upsert_node(node("n2"))  # a new node name
    health.review(state, now=1.0)
    assert len(seen) == 2
    seen.clear()
    state.upsert_node(node("n2", cpu=8))  # the same names
    health.review(state, now=2.0)
    assert seen == []
    state.budgets["default/other"] = budget("other", 1, app="other")
    health.review(state, now=3.0)
    assert len(seen) == 2
    seen.clear()
    health.config = GangHealthConfig(grace_seconds=5.0)
    health.review(state, now=4.0)
    assert len(seen) == 2


def test_a_member_that_fails_breaks_its_gang_and_one_that_starts_protects_it() -> None:
    state, _ = gangs(2)
    health = GangHealth(GangHealthConfig(grace_seconds=10))
    health.review(state, now=0.0)
    state.upsert_pod(replace(state.pods["default/g0-1"], phase="Failed"))
    review = health.review(state, now=1.0)
    assert review.broken == [ref("g0")] and set(review.budgets) == {ref("g0"), ref("g1")}
    assert health.review(state, now=11.0).released == [ref("g0")]

    pending = [
        pod(f"p-{i}", group="p", labels={SIGS_POD_GROUP_LABEL: "p"}, node_name="n0")
        for i in range(2)
    ]
    state = cluster([node("n0")], [replace(p, phase="Pending") for p in pending], [group("p", 2)])
    health = GangHealth()
    assert health.review(state, now=0.0).budgets == {}
    for member in pending:
        state.upsert_pod(member)  # started
    assert ref("p") in health.review(state, now=1.0).budgets


def test_a_deleted_node_or_a_terminating_member_breaks_the_gang() -> None:
    state, _ = gangs(2)
    state.upsert_pod(replace(state.pods["default/g1-0"], node_name="n1"))
    health = GangHealth()
    health.review(state, now=0.0)
    state.delete_node("n1")
    assert health.review(state, now=1.0).broken == [ref("g1")]
    state.set_terminating(state.pods["default/g0-0"], True)
    assert health.review(state, now=2.0).broken == [ref("g0")]


def test_a_changed_min_member_or_a_deleted_group_is_seen() -> None:
    state, groups = gangs(2)
    health = GangHealth()
    assert health.review(state, now=0.0).budgets[ref("g0")].min_available == 3
    state.upsert_group(replace(groups[0], min_member=2))
    assert health.review(state, now=1.0).budgets[ref("g0")].min_available == 2
    state.upsert_group(replace(groups[0], min_member=4))  # more than are bound
    review = health.review(state, now=2.0)
    assert review.broken == [ref("g0")]
    state.delete_group(ref("g1"))
    review = health.review(state, now=3.0)
    assert ref("g1") not in review.budgets and ref("g1") not in health.running


def test_a_users_budget_added_between_reviews_takes_the_gangs_protection() -> None:
    state, _ = gangs(2)
    health = GangHealth()
    assert set(health.review(state, now=0.0).budgets) == {ref("g0"), ref("g1")}
    state.budgets["default/mine"] = budget("mine", 1, **{SIGS_POD_GROUP_LABEL: "g1"})
    review = health.review(state, now=1.0)
    assert set(review.budgets) == {ref("g0")}
    assert "default/mine already selects" in review.unprotected[ref("g1")]
    del state.budgets["default/mine"]
    review = health.review(state, now=2.0)
    assert set(review.budgets) == {ref("g0"), ref("g1")} and review.unprotected == {}


def test_a_budget_of_a_gang_forgotten_names_it_again_in_the_same_set() -> None:
    """The edge passes the same set while its budgets do not change; a gang forgotten since
    (its group deleted) and named by it is running again, as when the set was new."""
    state, groups = gangs(1)
    budgeted = frozenset({ref("g0")})
    health = GangHealth(GangHealthConfig(grace_seconds=0))
    health.review(state, now=0.0, budgeted=budgeted)
    state.delete_group(ref("g0"))
    health.review(state, now=1.0, budgeted=budgeted)
    assert ref("g0") not in health.running
    state.upsert_group(groups[0])
    state.delete_pod("default/g0-0")
    assert health.review(state, now=2.0, budgeted=budgeted).released == [ref("g0")]


def test_a_review_that_fails_half_way_is_followed_by_a_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, _ = gangs(2)
    health = GangHealth()
    first = health.review(state, now=0.0)
    for key in ("default/g0-0", "default/g1-0"):
        state.upsert_pod(replace(state.pods[key]))
    census = gang_health._census

    def failing(state: ClusterState, gang: GroupRef) -> tuple[list[Pod], int, int, bool]:
        if gang == ref("g1"):
            raise RuntimeError("a bug")
        return census(state, gang)

    monkeypatch.setattr(gang_health, "_census", failing)
    with pytest.raises(RuntimeError):
        health.review(state, now=1.0)
    monkeypatch.setattr(gang_health, "_census", census)
    assert health.review(state, now=2.0).budgets == first.budgets


def test_group_revisions_of_gone_groups_are_dropped_and_readers_told() -> None:
    state = ClusterState()
    for i in range(1100):
        state.upsert_pod(pod(f"p{i}", group=f"p{i}"))
        state.delete_pod(f"default/p{i}")
    assert state.group_revisions_pruned == 1 and len(state.group_revisions) < 1100
    state.upsert_pod(pod("lone"))
    assert GroupRef(Dialect.LONE_POD, "default", "lone") not in state.group_revisions


# ------------------------------------------------------------------------------- property
GANGS = ("g0", "g1", "v0")
NODES = ("n0", "n1", "n2")


def member(gang: str, index: int, *, where: str | None, phase: str | None, extra: bool) -> Pod:
    if gang.startswith("v"):  # Volcano: no membership label; the labels members share
        dialect, labels = Dialect.VOLCANO, {"job": gang}
    else:
        dialect, labels = Dialect.SIGS, {SIGS_POD_GROUP_LABEL: gang}
    if extra:
        labels["extra"] = "x"
    return pod(
        f"{gang}-{index}", group=gang, dialect=dialect, labels=labels, node_name=where, phase=phase
    )


def gang_ref(gang: str) -> GroupRef:
    return ref(gang, dialect=Dialect.VOLCANO if gang.startswith("v") else Dialect.SIGS)


def same(review: HealthReview, reference: HealthReview) -> None:
    assert review.budgets == reference.budgets
    assert review.unprotected == reference.unprotected
    assert review.broken == reference.broken
    assert review.released == reference.released
    assert review.decisions == reference.decisions


def change(state: ClusterState, data: st.DataObject) -> None:
    """One random change of the cluster, through ClusterState's methods as the drivers do."""
    gang = data.draw(st.sampled_from(GANGS))
    key = f"default/{gang}-{data.draw(st.integers(0, 3))}"
    existing = state.pods.get(key)
    kind = data.draw(st.integers(0, 9))
    if kind <= 2:
        state.upsert_pod(
            member(
                gang,
                int(key[-1]),
                where=data.draw(st.sampled_from((*NODES, None))),
                phase=data.draw(st.sampled_from((None, "Pending", "Failed", "Succeeded"))),
                extra=data.draw(st.booleans()),
            )
        )
    elif kind == 3:
        state.delete_pod(key)
    elif kind == 4 and existing is not None:
        if existing.node_name is None:
            state.bind(existing, data.draw(st.sampled_from(NODES)))
        elif data.draw(st.booleans()):
            state.forget(existing)
        else:
            state.set_terminating(existing, not existing.terminating)
    elif kind == 5:
        name = data.draw(st.sampled_from(NODES))
        if name in state.nodes and data.draw(st.booleans()):
            state.delete_node(name)
        else:  # NotReady or unreachable (Node.down), or Ready
            taint = Taint(data.draw(st.sampled_from(sorted(NODE_DOWN_TAINTS))), "", "NoExecute")
            state.upsert_node(node(name, taints=[taint] * data.draw(st.integers(0, 1))))
    elif kind == 6:
        gang_group = replace(
            group(gang, data.draw(st.integers(1, 4)), dialect=gang_ref(gang).dialect),
            disruption_protection=data.draw(st.sampled_from((None, True, False))),
            stale_grace_seconds=data.draw(st.sampled_from((None, 0.0, 3.0))),
        )
        if data.draw(st.booleans()):
            state.delete_group(gang_group.ref)
        else:
            state.upsert_group(gang_group)
    elif kind == 7:
        drop = data.draw(st.booleans())
        if state.budgets and drop:
            state.budgets.pop(next(iter(state.budgets)))
        else:
            label = data.draw(st.sampled_from((SIGS_POD_GROUP_LABEL, "job")))
            state.budgets[f"default/b-{gang}"] = budget(f"b-{gang}", 1, **{label: gang})
    elif kind == 8:  # a pod of no gang that may carry a Volcano gang's shared labels
        stranger = pod("stranger", node_name="n0", labels={"job": "v0"})
        if data.draw(st.booleans()):
            state.upsert_pod(stranger)
        else:
            state.delete_pod(stranger.key)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_incremental_reviews_say_what_full_reviews_say(data: st.DataObject) -> None:
    state = cluster(
        [node(name) for name in NODES],
        [
            member(g, i, where=NODES[i % 3], phase=None, extra=False)
            for g in GANGS
            for i in range(3)
        ],
        [group(g, 3, dialect=gang_ref(g).dialect) for g in GANGS],
    )
    incremental = GangHealth(GangHealthConfig(grace_seconds=2.0))
    reference = GangHealth(GangHealthConfig(grace_seconds=2.0))
    now = 0.0
    budgeted: frozenset[GroupRef] = frozenset()
    for _ in range(data.draw(st.integers(1, 25))):
        for _ in range(data.draw(st.integers(0, 3))):
            change(state, data)
        now += data.draw(st.sampled_from((0.0, 1.0, 2.5)))
        if data.draw(st.integers(0, 5)) == 0:  # the edge's budgets changed
            budgeted = frozenset(data.draw(st.sets(st.sampled_from([gang_ref(g) for g in GANGS]))))
        if data.draw(st.integers(0, 15)) == 0:
            config = GangHealthConfig(
                protect=data.draw(st.booleans()), grace_seconds=data.draw(st.sampled_from((0, 2)))
            )
            incremental.config = reference.config = config
        reference._cluster = None  # look at every gang, as before the incremental review
        reference._budgeted = None
        got = incremental.review(state, now=now, budgeted=budgeted)
        same(got, reference.review(state, now=now, budgeted=budgeted))
        assert incremental.running == reference.running
        assert incremental.short_since == reference.short_since
        assert incremental.protecting == reference.protecting
