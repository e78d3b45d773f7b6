"""Where a pod may go (core/api/pod_placement.py): node selectors and affinity, tolerations,
pod (anti-)affinity with matchLabelKeys, topology spreading, and their validation."""

from __future__ import annotations

import copy

from gangsched.core.api import pod_from_raw
from gangsched.core.labels import LabelSelector, NodeSelectorTerm, Requirement
from gangsched.core.model import (
    PodAffinityTerm,
    PreferredNodeTerm,
    Toleration,
    TopologySpreadConstraint,
)
from tests.unit.api.pod_json import NO_CLASSES, problems_of, raw_pod


# -- node constraints -----------------------------------------------------------------------------
def test_node_selector_affinity_and_tolerations() -> None:
    raw = raw_pod(
        nodeSelector={"zone": "a", "disk": "ssd"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                            ]
                        },
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchExpressions": [
                                {"key": "cores", "operator": "Gt", "values": ["8"]}
                            ]
                        },
                    }
                ],
            }
        },
        tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
            {"operator": "Exists"},
            {"key": "spot"},
        ],
    )
    c = pod_from_raw(raw, priorities=NO_CLASSES).constraints
    assert c.node_name is None
    assert c.node_selector == (("disk", "ssd"), ("zone", "a"))
    assert c.required_terms == (
        NodeSelectorTerm(match_expressions=(Requirement("gpu", "Exists"),)),
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n1",)),)),
    )
    assert c.preferred_terms == (
        PreferredNodeTerm(10, NodeSelectorTerm((Requirement("cores", "Gt", ("8",)),))),
    )
    assert c.tolerations == (
        Toleration("dedicated", "Equal", "ml", "NoSchedule"),
        Toleration("", "Exists", "", ""),
        Toleration("spot", "Equal", "", ""),
    )


def test_no_required_node_affinity_is_none() -> None:
    raw = raw_pod(
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    )
    assert pod_from_raw(raw, priorities=NO_CLASSES).constraints.required_terms is None


def test_identical_pods_share_equal_hashable_constraints() -> None:
    raw = raw_pod(nodeSelector={"zone": "a"}, tolerations=[{"operator": "Exists"}])
    other = copy.deepcopy(raw)
    other["metadata"]["name"] = "web-2"
    a = pod_from_raw(raw, priorities=NO_CLASSES).constraints
    b = pod_from_raw(other, priorities=NO_CLASSES).constraints
    assert a == b and hash(a) == hash(b)


def test_bad_selector_operators_and_values() -> None:
    raw = raw_pod(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "in", "values": ["a"]},
                                {"key": "zone", "operator": "In"},
                                {"key": "cores", "operator": "Gt", "values": ["many"]},
                            ],
                            "matchFields": [
                                {"key": "metadata.uid", "operator": "In", "values": ["x"]}
                            ],
                        }
                    ]
                }
            }
        }
    )
    base = "Pod default/web-1: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnored"
    base += "DuringExecution.nodeSelectorTerms[0]"
    assert problems_of(raw) == [
        f'{base}.matchExpressions[0].operator: unknown operator "in"; use DoesNotExist, Exists, '
        "Gt, In, Lt, NotIn",
        f"{base}.matchExpressions[1].values: must be non-empty for operator In",
        f'{base}.matchExpressions[2].values[0]: "many" must be an integer',
        f'{base}.matchFields[0].key: unsupported field "metadata.uid"; only metadata.name is '
        "supported",
    ]


def test_empty_required_node_affinity_is_rejected() -> None:
    raw = raw_pod(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
            }
        }
    )
    assert problems_of(raw) == [
        "Pod default/web-1: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
        "Execution.nodeSelectorTerms: must have at least one term"
    ]


def test_bad_tolerations() -> None:
    raw = raw_pod(
        tolerations=[
            {"key": "a", "operator": "Exists", "value": "x"},
            {"operator": "Equal", "value": "x"},
            {"key": "b", "effect": "NoRun"},
            {"key": "c", "operator": "Gt", "value": "5"},
        ]
    )
    assert problems_of(raw) == [
        "Pod default/web-1: spec.tolerations[0].value: must be empty when operator is Exists",
        "Pod default/web-1: spec.tolerations[1].operator: must be Exists when key is empty",
        'Pod default/web-1: spec.tolerations[2].effect: unknown effect "NoRun"; must be one of '
        "NoSchedule, PreferNoSchedule, NoExecute",
        "Pod default/web-1: spec.tolerations[3].operator: operator Gt is not supported by "
        "gangsched",
    ]


# -- pod affinity and spreading -------------------------------------------------------------------
def test_required_pod_affinity_and_anti_affinity() -> None:
    raw = raw_pod(
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "db"}},
                        "topologyKey": "zone",
                        "namespaces": ["data"],
                    }
                ],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}
                ],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "app", "operator": "In", "values": ["web"]}
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                        "namespaceSelector": {},
                    }
                ]
            },
        }
    )
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.affinity == (
        PodAffinityTerm(
            selector=LabelSelector(match_labels=(("app", "db"),)),
            topology_key="zone",
            namespaces=frozenset({"data"}),
        ),
    )
    assert pod.anti_affinity == (
        PodAffinityTerm(
            selector=LabelSelector(match_expressions=(Requirement("app", "In", ("web",)),)),
            topology_key="kubernetes.io/hostname",
            namespace_selector=LabelSelector(),
        ),
    )


def test_match_label_keys_are_merged_with_the_pods_own_values() -> None:
    raw = raw_pod(
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "zone",
                        "matchLabelKeys": ["rev", "absent"],
                        "mismatchLabelKeys": ["tenant"],
                    }
                ]
            }
        },
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["rev"],
            }
        ],
    )
    raw["metadata"]["labels"] = {"app": "web", "rev": "abc", "tenant": "t1"}
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    selector = pod.anti_affinity[0].selector
    assert selector is not None
    assert selector.match_expressions == (
        Requirement("rev", "In", ("abc",)),
        Requirement("tenant", "NotIn", ("t1",)),
    )
    spread_selector = pod.spread[0].selector
    assert spread_selector is not None
    assert spread_selector.match_expressions == (Requirement("rev", "In", ("abc",)),)


def test_pod_affinity_term_needs_a_topology_key() -> None:
    raw = raw_pod(
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}
    )
    assert problems_of(raw) == [
        "Pod default/web-1: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuring"
        "Execution[0].topologyKey: is required"
    ]


def test_topology_spread_constraints() -> None:
    raw = raw_pod(
        topologySpreadConstraints=[
            {
                "maxSkew": 2,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": 3,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
            },
            {"maxSkew": 1, "topologyKey": "host", "whenUnsatisfiable": "ScheduleAnyway"},
        ]
    )
    assert pod_from_raw(raw, priorities=NO_CLASSES).spread == (
        TopologySpreadConstraint(
            max_skew=2,
            topology_key="zone",
            when_unsatisfiable="DoNotSchedule",
            selector=LabelSelector(match_labels=(("app", "web"),)),
            min_domains=3,
            honor_node_affinity=False,
            honor_node_taints=True,
        ),
        TopologySpreadConstraint(
            max_skew=1, topology_key="host", when_unsatisfiable="ScheduleAnyway", selector=None
        ),
    )


def test_bad_topology_spread_constraint() -> None:
    raw = raw_pod(
        topologySpreadConstraints=[
            {"maxSkew": 0, "whenUnsatisfiable": "Maybe", "nodeTaintsPolicy": "Sometimes"}
        ]
    )
    base = "Pod default/web-1: spec.topologySpreadConstraints[0]"
    assert problems_of(raw) == [
        f"{base}.maxSkew: must be at least 1, got 0",
        f"{base}.topologyKey: is required",
        f'{base}.whenUnsatisfiable: unknown value "Maybe"; use DoNotSchedule or ScheduleAnyway',
        f'{base}.nodeTaintsPolicy: unknown value "Sometimes"; must be one of Honor, Ignore',
    ]


def test_bad_label_selector_operator_in_spread() -> None:
    raw = raw_pod(
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {
                    "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]
                },
            }
        ]
    )
    assert problems_of(raw) == [
        "Pod default/web-1: spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0]"
        '.operator: unknown operator "Gt"; use DoesNotExist, Exists, In, NotIn'
    ]
