"""Koordinator's gang semantics in the core: GangGroups named on one side, match policies."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import SCHEDULED, UNSCHEDULABLE, WAITING, Bind, GroupOutcome
from gangsched.core.model import Dialect, GangAnnotations, GroupRef, MatchPolicy, Pod
from gangsched.core.scheduler import Scheduler
from tests.builders import cluster, gang_pods, group, node, pod

A = GroupRef(Dialect.SIGS, "default", "a")
B = GroupRef(Dialect.SIGS, "default", "b")


def bound(state: ClusterState) -> set[str]:
    return {key for key, p in state.pods.items() if p.node_name}


# -- GangGroups (directional, as Koordinator's Permit) ------------------------------------------
def run(state: ClusterState) -> list[str]:
    sched = Scheduler(state)
    sched.enqueue_pending()
    results = []
    while (report := sched.step(0.0)) is not None:
        results.append(report.result)
    return results


def one_sided(a_pods: list[Pod], b_pods: list[Pod], cpu: float = 8) -> ClusterState:
    """a (minMember 3) lists nothing; b (minMember 2) lists a and b."""
    groups = [group("a", 3), group("b", 2, gang_group=("a", "b"))]
    return cluster([node("n1", cpu=cpu)], [*a_pods, *b_pods], groups)


def test_gang_named_by_one_side_is_attempted_with_the_gang_it_names() -> None:
    # Before, b's pods were queued under a's key and a's unit did not include b: b's pods were
    # never attempted. Now b's cycle places b together with a.
    a_bound = [pod(f"a-{i}", group="a", node_name="n1") for i in range(3)]
    state = one_sided(a_bound, gang_pods("b", 2))
    assert state.unit_of(B) == (A, B) and state.unit_of(A) == (A,)
    assert state.unit_key(B) == B
    assert run(state) == [SCHEDULED]
    assert {"default/b-0", "default/b-1"} <= bound(state)


def test_the_named_gang_with_no_list_goes_alone() -> None:
    # coscheduling_test.go TestPermit "pod4": ganga is complete; gangb naming it does not
    # bind ganga to gangb, whose members do not exist.
    state = one_sided(gang_pods("a", 3), [])
    assert run(state) == [SCHEDULED]
    assert bound(state) == {"default/a-0", "default/a-1", "default/a-2"}


def test_the_listing_gang_waits_for_the_named_one() -> None:
    # TestPermit "pod5": gangb is complete but ganga (3) has one member: nothing goes.
    state = one_sided(gang_pods("a", 1), gang_pods("b", 2))
    assert set(run(state)) == {WAITING}
    assert bound(state) == set()


def test_both_complete_all_bound() -> None:
    state = one_sided(gang_pods("a", 3), gang_pods("b", 2))
    run(state)
    assert len(bound(state)) == 5


def test_gangs_listing_each_other_share_one_cycle() -> None:
    # TestPermit "pod6": gangc and gangd name each other; one queue entry places both.
    c = GroupRef(Dialect.SIGS, "default", "c")
    d = GroupRef(Dialect.SIGS, "default", "d")
    groups = [group("c", 2, gang_group=("c", "d")), group("d", 2, gang_group=("c", "d"))]
    state = cluster([node("n1", cpu=8)], gang_pods("c", 2) + gang_pods("d", 2), groups)
    assert state.unit_key(c) == state.unit_key(d) == c
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == SCHEDULED
    outcomes = {d_.group for d_ in report.decisions if isinstance(d_, GroupOutcome)}
    assert outcomes == {c, d}
    assert len([d_ for d_ in report.decisions if isinstance(d_, Bind)]) == 4
    assert sched.step(1.0) is None


def test_symmetric_lists_are_all_or_nothing() -> None:
    groups = [group("c", 2, gang_group=("c", "d")), group("d", 2, gang_group=("c", "d"))]
    pods = gang_pods("c", 2) + gang_pods("d", 2, cpu=2)
    state = cluster([node("n1", cpu=3)], pods, groups)
    assert run(state) == [UNSCHEDULABLE]
    assert bound(state) == set()


def test_annotation_gang_listing_a_pod_group_goes_with_it() -> None:
    # Koordinator names gangs "namespace/name" whatever defines them: the annotation gang k
    # lists the PodGroup a.
    k = GroupRef(Dialect.KOORDINATOR, "default", "k")
    listed = (GroupRef(Dialect.KOORDINATOR, "default", "a"), k)
    spec = GangAnnotations(min_available=1, gang_group=listed)
    members = [replace(pod("k-0", created=5), group=k, gang_annotations=spec)]
    state = cluster([node("n1", cpu=4)], members + gang_pods("a", 2), [group("a", 2)])
    assert state.unit_of(k) == (A, k)
    run(state)
    assert bound(state) == {"default/k-0", "default/a-0", "default/a-1"}


def test_annotation_gang_is_defined_by_its_first_member() -> None:
    # gang_cache_test.go: the first pod announcing the gang defines it; later pods' sizes
    # are ignored.
    k = GroupRef(Dialect.KOORDINATOR, "default", "k")
    first = replace(pod("k-0", created=1), group=k, gang_annotations=GangAnnotations(2))
    later = replace(pod("k-1", created=2), group=k, gang_annotations=GangAnnotations(7))
    state = cluster([node("n1")], [first, later])
    implicit = state.pod_group(k)
    assert implicit is not None and implicit.min_member == 2


# -- match policies -----------------------------------------------------------------------------
def half_bound(policy: MatchPolicy | None, *, room: int, pending: int = 2) -> list[str]:
    """A gang of minMember 3 with one member bound, `pending` more, room for `room`."""
    running = pod("g-0", group="g", node_name="n0")
    waiting = [pod(f"g-{i}", group="g", created=float(i)) for i in range(1, pending + 1)]
    g = replace(group("g", 3), match_policy=policy)
    state = cluster([node("n0", cpu=1), node("n1", cpu=room)], [running, *waiting], [g])
    sched = Scheduler(state)
    sched.enqueue_pending()
    results = []
    while (report := sched.step(0.0)) is not None:
        results.append(report.result)
    return results


def test_once_satisfied_is_the_default_and_places_later_members_one_by_one() -> None:
    # Once a member is bound the gang is satisfied: the next members need no quorum.
    assert half_bound(None, room=1)[0] == SCHEDULED
    assert half_bound(MatchPolicy.ONCE_SATISFIED, room=1)[0] == SCHEDULED


def test_waiting_and_running_counts_bound_members_toward_min_member() -> None:
    assert half_bound(MatchPolicy.WAITING_AND_RUNNING, room=1) == [UNSCHEDULABLE]  # 1 + 1 < 3
    assert half_bound(MatchPolicy.WAITING_AND_RUNNING, room=2) == [SCHEDULED]  # 1 + 2 >= 3


def test_only_waiting_counts_only_members_placed_together() -> None:
    # 1 bound + 2 pending: the 2 alone can never make minMember 3.
    assert half_bound(MatchPolicy.ONLY_WAITING, room=2) == [WAITING]
    assert half_bound(MatchPolicy.ONLY_WAITING, room=2, pending=3) == [UNSCHEDULABLE]
    assert half_bound(MatchPolicy.ONLY_WAITING, room=3, pending=3) == [SCHEDULED]


def test_dialects_without_match_policy_count_bound_members() -> None:
    # kube-scheduler's and scheduler-plugins' rule: bound members count toward minMember.
    running = pod("g-0", node_name="n0")
    waiting = [pod(f"g-{i}", created=float(i)) for i in (1, 2)]
    ref = GroupRef(Dialect.X_K8S, "default", "g")
    pods = [replace(p, group=ref) for p in (running, *waiting)]
    g = replace(group("g", 3), ref=ref)
    state = cluster([node("n0", cpu=1), node("n1", cpu=1)], pods, [g])
    sched = Scheduler(state)
    sched.enqueue_pending()
    report = sched.step(0.0)
    assert report is not None and report.result == UNSCHEDULABLE


# -- property -----------------------------------------------------------------------------------
NAMES = ["a", "b", "c", "d", "e"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES), max_size=3)),
        max_size=6,
    )
)
def test_every_gang_is_in_the_unit_of_its_queue_key(lists: list[tuple[str, list[str]]]) -> None:
    """Whoever lists whom, the unit a gang is queued under contains the gang (else its pods
    are never attempted), is exactly the gang's own list, and gangs with the same list share
    one key."""
    state = cluster([node("n1")], [], [group(name, 1) for name in NAMES])
    for name, listed in lists:
        state.upsert_group(group(name, 1, gang_group=tuple(listed)))
    for x in NAMES:
        ref = GroupRef(Dialect.SIGS, "default", x)
        key = state.unit_key(ref)
        unit = state.unit_of(key)
        assert unit == state.unit_of(ref)
        assert ref in unit
        for y in NAMES:
            other = GroupRef(Dialect.SIGS, "default", y)
            if state.unit_of(other) == unit:
                assert state.unit_key(other) == key
