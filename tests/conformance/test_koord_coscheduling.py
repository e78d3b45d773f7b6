"""Koordinator's pkg/scheduler/plugins/coscheduling tests, ported to simulate.

Koordinator's cases are unit tests of its plugin stages (PreEnqueue, Permit, PostFilter) and of
its gang cache. Each is ported as the scheduling outcome the stage's verdict leads to: "allow" or
"no error" means the pod is placed with its gang, "wait" or a PreEnqueue error means the pod is
held before the cycle (reported in `waiting`). Groups are scheduling.sigs.k8s.io/v1alpha1
PodGroups (minMember, scheduleTimeoutSeconds 10) joined by the `pod-group.scheduling.sigs.k8s.io`
label, or pod annotations alone. Upstream's namespaces such as "gangA_ns" are not valid
Kubernetes names; here they are "ganga-ns" and so on. The node is roomy unless a case needs a
pod that fits nowhere. Cases that only set in-memory flags of Koordinator's cache (schedule
cycles, representative pods, "once satisfied" without any bound member) are listed in
tests/conformance/README.md as not ported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from tests.conformance.harness import (
    SIGS_API,
    SIGS_LABEL,
    Manifest,
    Scenario,
    coscheduling_group,
    node,
    pod,
    simulate_problems,
)

SOURCE = "Koordinator `pkg/scheduler/plugins/coscheduling` (coscheduling_test.go, core/core_test.go, core/gang_cache_test.go)"
KOORD = "gang.scheduling.koordinator.sh"
MATCH_POLICY = f"{KOORD}/match-policy"
MODE = f"{KOORD}/mode"
TOTAL = f"{KOORD}/total-number"
GROUPS = f"{KOORD}/groups"


def pg(name: str, namespace: str, min_member: int, **annotations: str) -> Manifest:
    return coscheduling_group(
        name,
        min_member,
        api=SIGS_API,
        namespace=namespace,
        schedule_timeout_seconds=10,
        annotations=annotations or None,
    )


def gang_group(*members: str) -> str:
    return json.dumps(list(members))


def member(name: str, namespace: str, group: str | None, **extra: object) -> Manifest:
    labels = {SIGS_LABEL: group} if group else None
    return pod(name, namespace=namespace, labels=labels, **extra)  # type: ignore[arg-type]


def members(namespace: str, group: str, *names: str) -> list[Manifest]:
    return [member(name, namespace, group) for name in names]


def cluster(*objects: Manifest | Iterable[Manifest]) -> Scenario:
    sc = Scenario()
    sc.create(node("node", cpu="8", memory="16Gi"), node("n1", cpu="8", memory="16Gi"))
    sc.create(*objects)
    return sc


def placed(sc: Scenario, *names: str) -> None:
    sc.settle()
    sc.assert_scheduled(*names)


def held(sc: Scenario, *keys: str) -> None:
    """Held before the cycle: pending and reported waiting (keys are "namespace/name")."""
    outcome = sc.settle()
    missing = [key for key in keys if key not in outcome.waiting]
    assert not missing, f"not waiting: {missing}; waiting {outcome.waiting}, bound {outcome.bound}"
    bound = [key for key in keys if key in outcome.bound]
    assert not bound, f"bound: {bound}"


# -- core/core_test.go TestPlugin_PreEnqueue -----------------------------------------------------
def test_preenqueue_pod_does_not_belong_to_any_gang() -> None:
    """core/core_test.go TestPlugin_PreEnqueue: pod does not belong to any gang."""
    placed(cluster(member("pod1", "ns1", None)), "ns1/pod1")


def test_preenqueue_pod_belongs_to_a_non_existing_pg() -> None:
    """core/core_test.go TestPlugin_PreEnqueue: pod belongs to a non-existing pg."""
    held(cluster(member("pod2", "ganga-ns", "wenshiqi222")), "ganga-ns/pod2")


def test_preenqueue_gang_resource_satisfied() -> None:
    """core/core_test.go TestPlugin_PreEnqueue: gang ResourceSatisfied (upstream sets the flag directly; here the gang is satisfied the only way objects show it: minMember 4 members already bound)."""
    bound = [member(f"podq-{i}", "gangq-ns", "gangq", node_name="node") for i in range(1, 5)]
    placed(
        cluster(pg("gangq", "gangq-ns", 4), bound, member("podq", "gangq-ns", "gangq")),
        "gangq-ns/podq",
    )


def test_preenqueue_pod_count_less_than_min_member() -> None:
    """core/core_test.go TestPlugin_PreEnqueue: pod count less than minMember."""
    sc = cluster(pg("ganga", "ganga-ns", 4), members("ganga-ns", "ganga", "pod3-1", "pod3"))
    held(sc, "ganga-ns/pod3-1", "ganga-ns/pod3")


def test_preenqueue_pods_count_equal_with_min_member_non_strict_mode() -> None:
    """core/core_test.go TestPlugin_PreEnqueue: pods count equal with minMember,but is NonStrictMode."""
    names = ("pod5-1", "pod5-2", "pod5-3", "pod5")
    sc = cluster(
        pg("gangb", "gangb-ns", 4, **{MODE: "NonStrict"}), members("gangb-ns", "gangb", *names)
    )
    placed(sc, *(f"gangb-ns/{name}" for name in names))


def test_preenqueue_strict_mode_children_below_total_number() -> None:
    """core/core_test.go TestPlugin_PreEnqueue: pods count equal with minMember,is StrictMode,scheduleCycle valid,but childrenNum is not reach to total num."""
    names = ("pod8-1", "pod8-2", "pod8-3", "pod8")
    sc = cluster(pg("gange", "ganga-ns", 4, **{TOTAL: "5"}), members("ganga-ns", "gange", *names))
    placed(sc, *(f"ganga-ns/{name}" for name in names))


# -- core/core_test.go TestPermit ----------------------------------------------------------------
def test_core_permit_pod_without_pg_is_allowed() -> None:
    """core/core_test.go TestPermit: pod1 does not belong to any pg, allow."""
    placed(cluster(member("pod1", "ns1", None)), "ns1/pod1")


def test_core_permit_pod_of_a_non_existing_pg_waits() -> None:
    """core/core_test.go TestPermit: pod2 belongs to a non-existing pg."""
    held(cluster(member("pod2", "ns1", "gangnonexist")), "ns1/pod2")


def test_core_permit_gang_without_enough_pods_waits() -> None:
    """core/core_test.go TestPermit: pod3 belongs to gangA that doesn't have enough assumed pods."""
    sc = cluster(pg("ganga", "ganga-ns", 3), members("ganga-ns", "ganga", "pod3-1", "pod3"))
    held(sc, "ganga-ns/pod3-1", "ganga-ns/pod3")


def _running_member_case(policy: str) -> Scenario:
    return cluster(
        pg("ganga", "ganga-ns", 3, **{MATCH_POLICY: policy}),
        member("pod3-2", "ganga-ns", "ganga", node_name="n1"),
        members("ganga-ns", "ganga", "pod3-1", "pod3"),
    )


def test_core_permit_running_member_does_not_count_for_only_waiting() -> None:
    """core/core_test.go TestPermit: pod3 belongs to gangA that doesn't have enough assumed pods, but with Running pods is enough, matchPolicy waiting-and-running (the first of two cases of this name: its policy is only-waiting, so the running member does not count)."""
    held(_running_member_case("only-waiting"), "ganga-ns/pod3-1", "ganga-ns/pod3")


def test_core_permit_running_member_counts_for_waiting_and_running() -> None:
    """core/core_test.go TestPermit: pod3 belongs to gangA that doesn't have enough assumed pods, but with Running pods is enough, matchPolicy waiting-and-running (the second case of this name)."""
    placed(_running_member_case("waiting-and-running"), "ganga-ns/pod3-1", "ganga-ns/pod3")


def test_core_permit_gang_with_enough_pods_is_allowed() -> None:
    """core/core_test.go TestPermit: pod4 belongs to gangB that gangA has resourceSatisfied."""
    names = ("pod4-1", "pod4-2", "pod4")
    sc = cluster(pg("gangb", "ganga-ns", 3), members("ganga-ns", "gangb", *names))
    placed(sc, *(f"ganga-ns/{name}" for name in names))


def test_core_permit_gang_group_waits_for_its_unsatisfied_member_gang() -> None:
    """core/core_test.go TestPermit: pod5 belongs to gangC that gangC has resourceSatisfied, but gangD has not satisfied."""
    groups = gang_group("gangc-ns/gangc", "gangd-ns/gangd")
    sc = cluster(
        pg("gangc", "gangc-ns", 2, **{GROUPS: groups}),
        pg("gangd", "gangd-ns", 2, **{GROUPS: groups}),
        members("gangc-ns", "gangc", "pod5-1", "pod5"),
        members("gangd-ns", "gangd", "pod5-2"),
    )
    held(sc, "gangc-ns/pod5-1", "gangc-ns/pod5", "gangd-ns/pod5-2")


def test_core_permit_gang_group_with_every_gang_satisfied_is_allowed() -> None:
    """core/core_test.go TestPermit: pod6 belongs to gangE that gangE has resourceSatisfied, and gangF has satisfied too."""
    groups = gang_group("gange-ns/gange", "gangf-ns/gangf")
    sc = cluster(
        pg("gange", "gange-ns", 2, **{GROUPS: groups}),
        pg("gangf", "gangf-ns", 3, **{GROUPS: groups}),
        members("gange-ns", "gange", "pod6-1", "pod6"),
        members("gangf-ns", "gangf", "pod6-2", "pod6-3", "pod6-4"),
    )
    placed(
        sc,
        "gange-ns/pod6-1",
        "gange-ns/pod6",
        "gangf-ns/pod6-2",
        "gangf-ns/pod6-3",
        "gangf-ns/pod6-4",
    )


# -- coscheduling_test.go TestPostFilter ---------------------------------------------------------
def test_postfilter_pod_without_pod_group() -> None:
    """coscheduling_test.go TestPostFilter: pod does not belong to any pod group (it failed its filters: it stays unschedulable, nothing else is touched)."""
    sc = cluster(member("pod1", "ganga-ns", None, cpu="64"))
    sc.settle()
    sc.assert_unschedulable("ganga-ns/pod1")


def test_postfilter_pod_of_a_non_existing_gang() -> None:
    """coscheduling_test.go TestPostFilter: pod belongs to non-existing gang."""
    held(cluster(member("pod1", "ganga-ns", "wenshiqi")), "ganga-ns/pod1")


def test_postfilter_non_strict_gang_short_of_min_member() -> None:
    """coscheduling_test.go TestPostFilter: resource not Satisfied,but gangB is NonStrictMode,do not reject the gang (NonStrict keeps Koordinator's partial reservations; the gang still cannot go with one of four members)."""
    held(
        cluster(
            pg("gangb", "gangb-ns", 4, **{MODE: "NonStrict"}), member("pod2", "gangb-ns", "gangb")
        ),
        "gangb-ns/pod2",
    )


def test_postfilter_strict_gang_short_of_min_member_rejects_all() -> None:
    """coscheduling_test.go TestPostFilter: resource not Satisfied,StrictMode,reject all pods belong to gangA."""
    sc = cluster(
        pg("ganga", "ganga-ns", 4), members("ganga-ns", "ganga", "pod3-1", "pod3-2", "pod3")
    )
    held(sc, "ganga-ns/pod3-1", "ganga-ns/pod3-2", "ganga-ns/pod3")


# -- coscheduling_test.go TestPermit -------------------------------------------------------------
def permit_groups() -> list[Manifest]:
    """ganga (3) alone; gangb (2) names ganga and gangb; gangc and gangd (2 each) name each other."""
    cd = gang_group("gangc-ns/gangc", "gangd-ns/gangd")
    return [
        pg("ganga", "ganga-ns", 3),
        pg("gangb", "gangb-ns", 2, **{GROUPS: gang_group("ganga-ns/ganga", "gangb-ns/gangb")}),
        pg("gangc", "gangc-ns", 2, **{GROUPS: cd}),
        pg("gangd", "gangd-ns", 2, **{GROUPS: cd}),
    ]


def test_plugin_permit_pod_without_pg_is_allowed() -> None:
    """coscheduling_test.go TestPermit: pod1 does not belong to any pg, allow."""
    placed(cluster(permit_groups(), member("pod1", "ns1", None)), "ns1/pod1")


def test_plugin_permit_pod_of_a_non_existing_pg_waits() -> None:
    """coscheduling_test.go TestPermit: pod2 belongs to a non-existing pg."""
    held(cluster(permit_groups(), member("pod2", "ns1", "gangnonexist")), "ns1/pod2")


def test_plugin_permit_gang_without_enough_pods_waits() -> None:
    """coscheduling_test.go TestPermit: pod3 belongs to gangA that doesn't have enough assumed pods."""
    sc = cluster(permit_groups(), members("ganga-ns", "ganga", "pod3-1", "pod3"))
    held(sc, "ganga-ns/pod3-1", "ganga-ns/pod3")


def _ganga_complete() -> Scenario:
    return cluster(permit_groups(), members("ganga-ns", "ganga", "pod4-1", "pod4-2", "pod4"))


def test_plugin_permit_gang_named_by_another_groups_annotation_goes_alone() -> None:
    """coscheduling_test.go TestPermit: pod4 belongs to gangA that gangA has resourceSatisfied (ganga carries no groups annotation; gangb's annotation naming it does not bind ganga to gangb)."""
    placed(_ganga_complete(), "ganga-ns/pod4-1", "ganga-ns/pod4-2", "ganga-ns/pod4")


def test_plugin_permit_gang_satisfied_with_default_match_policy() -> None:
    """coscheduling_test.go TestPermit: pod4 belongs to gangA that gangA has resourceSatisfied, but gangA matchPolicy is not once-satisfied (upstream's setup sets no policy; the outcome is the same)."""
    placed(_ganga_complete(), "ganga-ns/pod4-1", "ganga-ns/pod4-2", "ganga-ns/pod4")


def test_plugin_permit_one_sided_gang_group_waits_for_the_named_gang() -> None:
    """coscheduling_test.go TestPermit: pod5 belongs to gangB that gangB has resourceSatisfied, but gangA has not satisfied."""
    sc = cluster(
        permit_groups(),
        members("gangb-ns", "gangb", "pod5-1", "pod5"),
        members("ganga-ns", "ganga", "pod5-2"),
    )
    held(sc, "gangb-ns/pod5-1", "gangb-ns/pod5", "ganga-ns/pod5-2")


def test_plugin_permit_gang_group_goes_when_both_gangs_are_complete() -> None:
    """coscheduling_test.go TestPermit: pod6 belongs to gangD that gangD has resourceSatisfied, and gangC is waiting for gangD."""
    sc = cluster(
        permit_groups(),
        members("gangd-ns", "gangd", "pod6-1", "pod6"),
        members("gangc-ns", "gangc", "pod6-2", "pod6-3", "pod6-4"),
    )
    placed(
        sc,
        "gangd-ns/pod6-1",
        "gangd-ns/pod6",
        "gangc-ns/pod6-2",
        "gangc-ns/pod6-3",
        "gangc-ns/pod6-4",
    )


# -- core/gang_cache_test.go TestGangCache_OnPodAdd ----------------------------------------------
def annotated(name: str, annotations: Mapping[str, str], **extra: object) -> Manifest:
    return pod(name, annotations=annotations, **extra)  # type: ignore[arg-type]


def test_gang_announced_in_annotation_way() -> None:
    """core/gang_cache_test.go TestGangCache_OnPodAdd: add pod announcing Gang in Annotation way (the first pod's annotations define the gang: minimum 2, NonStrict, GangGroup with gangb, which never appears, so the gang waits for it)."""
    first = annotated(
        "pod1",
        {
            f"{KOORD}/name": "ganga",
            f"{KOORD}/min-available": "2",
            f"{KOORD}/waiting-time": "30s",
            MODE: "NonStrict",
            GROUPS: gang_group("default/ganga", "default/gangb"),
        },
        node_name="nba",
    )
    second = annotated(
        "pod2",
        {
            f"{KOORD}/name": "ganga",
            f"{KOORD}/min-available": "7",
            f"{KOORD}/waiting-time": "3000s",
            GROUPS: gang_group("default/gangc", "default/gangd"),
        },
    )
    sc = Scenario().create(node("nba", cpu="8"), first, second)
    held(sc, "default/pod2")
    assert sc.outcomes[-1].group("default/ganga")["minMember"] == 2


def test_gang_announced_in_lightweight_coscheduling_way() -> None:
    """core/gang_cache_test.go TestGangCache_OnPodAdd: add pod announcing Gang in lightweight-coscheduling way."""
    labels = {f"{SIGS_LABEL}/name": "ganga", f"{SIGS_LABEL}/min-available": "2"}
    sc = Scenario().create(
        node("nba", cpu="8"),
        pod("pod1", labels=labels, node_name="nba"),
        pod("pod2", labels=labels),
    )
    outcome = sc.settle()
    sc.assert_scheduled("pod2")
    assert outcome.group("default/ganga")["minMember"] == 2


def test_gang_annotations_with_illegal_args_are_refused() -> None:
    """core/gang_cache_test.go TestGangCache_OnPodAdd: add pods announcing Gang in Annotation way,but with illegal args (the first of two cases of this name: Koordinator falls back to defaults; gangsched refuses, naming the object and field - a deliberate difference)."""
    problems = simulate_problems(
        [
            node("nba", cpu="8"),
            annotated("pod3", {f"{KOORD}/name": "gangb", f"{KOORD}/min-available": "xxx"}),
            annotated(
                "pod4",
                {
                    f"{KOORD}/name": "gangb",
                    f"{KOORD}/min-available": "2",
                    TOTAL: "1",
                    MODE: "WenShiqi222",
                    f"{KOORD}/waiting-time": "WenShiqi222",
                    GROUPS: "ganga,gangx",
                },
            ),
        ]
    )
    text = "\n".join(problems)
    assert "default/pod3" in text and "min-available" in text, text


def test_gang_annotations_with_zero_minimum_are_refused() -> None:
    """core/gang_cache_test.go TestGangCache_OnPodAdd: add pods announcing Gang in Annotation way,but with illegal args (the second case of this name: minimum 0, waiting times 0 and -20s, groups "[a,b]"; refused, naming the object and field)."""
    problems = simulate_problems(
        [
            node("nba", cpu="8"),
            annotated(
                "pod5",
                {
                    f"{KOORD}/name": "gangc",
                    f"{KOORD}/min-available": "0",
                    f"{KOORD}/waiting-time": "0",
                    GROUPS: "[a,b]",
                },
            ),
            annotated(
                "pod6",
                {
                    f"{KOORD}/name": "gangd",
                    f"{KOORD}/min-available": "0",
                    f"{KOORD}/waiting-time": "-20s",
                    GROUPS: "[a,b]",
                },
            ),
        ]
    )
    text = "\n".join(problems)
    assert "default/pod5" in text and "default/pod6" in text and "min-available" in text, text


def test_gang_announced_in_crd_way_before_the_crd_exists() -> None:
    """core/gang_cache_test.go TestGangCache_OnPodAdd: add pod announcing Gang in CRD way before CRD created,gang should be created but not initialized (the pod waits; once the PodGroup exists it goes)."""
    sc = Scenario().create(node("nba", cpu="8"), member("crdPod", "default", "test"))
    held(sc, "default/crdPod")
    sc.create(pg("test", "default", 1))
    placed(sc, "default/crdPod")


def test_podgroup_with_annotations() -> None:
    """core/gang_cache_test.go TestGangCache_OnPodGroupAdd: update podGroup with annotations (NonStrict, minMember 2, GangGroup with gangB, which does not exist: gangA's two members wait for it)."""
    groups = gang_group("default/gangA", "default/gangB")
    sc = cluster(
        pg("gangA", "default", 2, **{MODE: "NonStrict", GROUPS: groups}),
        members("default", "gangA", "pod-a1", "pod-a2"),
    )
    held(sc, "default/pod-a1", "default/pod-a2")
    assert sc.outcomes[-1].group("default/gangA")["minMember"] == 2


def test_podgroup_with_illegal_annotations_is_refused() -> None:
    """core/gang_cache_test.go TestGangCache_OnPodGroupAdd: update podGroup with illegal annotations (mode "WenShiqi222", groups "a,b", total-number 2 below minMember 4: Koordinator falls back to defaults; gangsched refuses, naming the object and field - a deliberate difference)."""
    problems = simulate_problems(
        [
            node("nba", cpu="8"),
            pg("gangA", "default", 4, **{MODE: "WenShiqi222", GROUPS: "a,b", TOTAL: "2"}),
        ]
    )
    text = "\n".join(problems)
    assert "PodGroup default/gangA" in text and GROUPS in text, text
