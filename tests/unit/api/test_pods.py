"""pod_from_raw: what kube-scheduler would derive from a pod after defaulting and admission."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw
from gangsched.core.labels import LabelSelector, NodeSelectorTerm, Requirement
from gangsched.core.model import (
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    Dialect,
    GroupRef,
    HostPort,
    PodAffinityTerm,
    PreferredNodeTerm,
    PriorityClass,
    Toleration,
    TopologySpreadConstraint,
)

MI = 1024**2
NO_CLASSES = PriorityResolver()


def raw_pod(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    body["spec"].update(spec)
    return body


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources, **extra}


def problems_of(raw: dict[str, Any], priorities: PriorityResolver = NO_CLASSES) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        pod_from_raw(raw, priorities=priorities)
    return [str(problem) for problem in caught.value.problems]


# -- basics -------------------------------------------------------------------------------------
def test_defaults_for_a_minimal_pod() -> None:
    pod = pod_from_raw(raw_pod(), priorities=NO_CLASSES)
    assert (pod.namespace, pod.name) == ("default", "web-1")
    assert pod.scheduler_name == "default-scheduler"
    assert pod.phase == "Pending"
    assert pod.priority == 0
    assert pod.preemption_policy == PREEMPT_LOWER_PRIORITY
    assert pod.requests == {}
    assert pod.group is None
    assert pod.node_name is None
    assert pod.created == 0.0
    assert not pod.terminating


def test_namespace_defaults_to_default() -> None:
    raw = raw_pod()
    del raw["metadata"]["namespace"]
    assert pod_from_raw(raw, priorities=NO_CLASSES).namespace == "default"


def test_metadata_and_status_fields() -> None:
    raw = raw_pod(schedulerName="gangsched")
    raw["metadata"].update(
        uid="u-1",
        labels={"app": "web"},
        creationTimestamp="2026-01-01T00:00:01Z",
        deletionTimestamp="2026-01-01T00:10:00Z",
    )
    raw["status"] = {"phase": "Running", "nominatedNodeName": "n2"}
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.uid == "u-1"
    assert pod.labels == {"app": "web"}
    assert pod.scheduler_name == "gangsched"
    assert pod.created == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC).timestamp()
    assert pod.terminating
    assert pod.phase == "Running"
    assert pod.nominated_node_name == "n2"


def test_unquoted_yaml_timestamp_is_accepted() -> None:
    raw = raw_pod()
    raw["metadata"]["creationTimestamp"] = datetime(2026, 1, 1, tzinfo=UTC)
    assert (
        pod_from_raw(raw, priorities=NO_CLASSES).created
        == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    )


def test_node_name_binds_the_pod_and_is_not_a_constraint() -> None:
    pod = pod_from_raw(raw_pod(nodeName="n1"), priorities=NO_CLASSES)
    assert pod.node_name == "n1"
    assert pod.is_bound
    assert pod.constraints.node_name is None


# -- requests ---------------------------------------------------------------------------------
def test_requests_sum_containers_with_cpu_in_millicores() -> None:
    raw = raw_pod(
        containers=[
            container({"cpu": "500m", "memory": "100Mi"}),
            container({"cpu": 1, "memory": "1e6", "nvidia.com/gpu": "1"}),
        ]
    )
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.requests == {"cpu": 1500, "memory": 100 * MI + 10**6, "nvidia.com/gpu": 1}


def test_requests_default_to_limits_per_resource() -> None:
    raw = raw_pod(containers=[container({"cpu": "250m"}, {"cpu": "1", "memory": "1Gi"})])
    assert pod_from_raw(raw, priorities=NO_CLASSES).requests == {"cpu": 250, "memory": 1024 * MI}


def test_init_containers_and_sidecars_and_overhead() -> None:
    raw = raw_pod(
        containers=[container({"cpu": "1"})],
        initContainers=[
            container({"cpu": "200m"}, restartPolicy="Always"),  # sidecar: stays for life
            container({"cpu": "3"}),  # plain init: peak 3 + sidecar 0.2
        ],
        overhead={"cpu": "100m", "memory": "10Mi"},
    )
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.requests == {"cpu": 3200 + 100, "memory": 10 * MI}


def test_pod_level_resources_replace_the_container_sum() -> None:
    raw = raw_pod(
        containers=[container({"cpu": "1", "memory": "1Gi", "example.com/dev": "2"})],
        resources={"requests": {"cpu": "4"}, "limits": {"memory": "2Gi"}},
        overhead={"cpu": "100m"},
    )
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.requests == {"cpu": 4100, "memory": 2048 * MI, "example.com/dev": 2}


def test_zero_requests_are_dropped() -> None:
    raw = raw_pod(containers=[container({"cpu": "0", "memory": "0"})])
    assert pod_from_raw(raw, priorities=NO_CLASSES).requests == {}


def test_bad_quantity_is_reported_with_its_field() -> None:
    raw = raw_pod(containers=[container({"cpu": "abc"})])
    assert problems_of(raw) == [
        'Pod default/web-1: spec.containers[0].resources.requests.cpu: "abc" is not a valid '
        "quantity (e.g. 500m, 2, 1.5Gi, 1e3)"
    ]


def test_extended_resource_names_are_bracketed_in_field_paths() -> None:
    raw = raw_pod(containers=[container({"nvidia.com/gpu": "x"})])
    assert problems_of(raw) == [
        'Pod default/web-1: spec.containers[0].resources.requests[nvidia.com/gpu]: "x" is not a '
        "valid quantity (e.g. 500m, 2, 1.5Gi, 1e3)"
    ]


def test_negative_and_over_limit_requests() -> None:
    raw = raw_pod(containers=[container({"cpu": "-1", "memory": "2Gi"}, {"memory": "1Gi"})])
    assert problems_of(raw) == [
        'Pod default/web-1: spec.containers[0].resources.requests.cpu: "-1" must not be negative',
        "Pod default/web-1: spec.containers[0].resources.requests.memory: must be less than or "
        "equal to the memory limit",
    ]


def test_all_problems_of_one_pod_are_collected() -> None:
    raw = raw_pod(
        containers=[container({"cpu": "lots", "memory": "much"})],
        tolerations=[{"key": "k", "operator": "Equals"}],
        priority="high",
    )
    raw["metadata"]["labels"] = {"version": 2}
    found = problems_of(raw)
    assert len(found) == 5
    assert any("metadata.labels.version: must be a string" in line for line in found)
    assert any("spec.tolerations[0].operator" in line for line in found)
    assert any("spec.priority: must be an integer" in line for line in found)


def test_missing_name_and_containers() -> None:
    raw = raw_pod()
    del raw["metadata"]["name"]
    raw["spec"]["containers"] = []
    assert problems_of(raw) == [
        "Pod default/<unnamed>: metadata.name: is required",
        "Pod default/<unnamed>: spec.containers: at least one container is required",
    ]


# -- host ports ---------------------------------------------------------------------------------
def test_host_ports_from_containers_and_sidecars_only() -> None:
    raw = raw_pod(
        containers=[
            container(
                ports=[
                    {"containerPort": 80, "hostPort": 8080},
                    {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                    {"containerPort": 9090},  # no host port
                ]
            )
        ],
        initContainers=[
            container(ports=[{"containerPort": 1, "hostPort": 7000}], restartPolicy="Always"),
            container(ports=[{"containerPort": 2, "hostPort": 7001}]),  # init only: not held
        ],
    )
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.host_ports == (
        HostPort("TCP", "", 7000),
        HostPort("TCP", "", 8080),
        HostPort("UDP", "10.0.0.1", 53),
    )


def test_bad_host_port() -> None:
    raw = raw_pod(containers=[container(ports=[{"hostPort": 70000, "protocol": "HTTP"}])])
    assert problems_of(raw) == [
        "Pod default/web-1: spec.containers[0].ports[0].hostPort: must be at most 65535, got 70000",
        'Pod default/web-1: spec.containers[0].ports[0].protocol: unknown value "HTTP"; must be '
        "one of TCP, UDP, SCTP",
    ]


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


# -- priority -----------------------------------------------------------------------------------
CLASSES = PriorityResolver(
    [
        PriorityClass("high", 1000),
        PriorityClass("gentle", 500, preemption_policy=PREEMPT_NEVER),
    ]
)


def test_priority_from_class_name() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="high"), priorities=CLASSES)
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (
        1000,
        "high",
        PREEMPT_LOWER_PRIORITY,
    )


def test_explicit_priority_wins_over_the_class() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="high", priority=7), priorities=CLASSES)
    assert pod.priority == 7


def test_explicit_priority_tolerates_a_deleted_class() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="gone", priority=7), priorities=CLASSES)
    assert (pod.priority, pod.priority_class_name) == (7, "gone")


def test_unknown_class_is_an_error() -> None:
    assert problems_of(raw_pod(priorityClassName="nope"), CLASSES) == [
        'Pod default/web-1: spec.priorityClassName: no PriorityClass with name "nope" was found'
    ]


def test_system_classes_always_exist() -> None:
    pod = pod_from_raw(raw_pod(priorityClassName="system-node-critical"), priorities=NO_CLASSES)
    assert pod.priority == 2_000_001_000


def test_group_label_sigs() -> None:
    raw = raw_pod()
    raw["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "train"}
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.group == GroupRef(Dialect.SIGS, "default", "train")
    assert pod.annotation_min_available is None


def test_group_label_x_k8s() -> None:
    raw = raw_pod()
    raw["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "train"}
    assert pod_from_raw(raw, priorities=NO_CLASSES).group == GroupRef(
        Dialect.X_K8S, "default", "train"
    )


def test_group_upstream_scheduling_group() -> None:
    raw = raw_pod(schedulingGroup={"podGroupName": "train"})
    assert pod_from_raw(raw, priorities=NO_CLASSES).group == GroupRef(
        Dialect.UPSTREAM, "default", "train"
    )


def test_group_koordinator_annotations() -> None:
    raw = raw_pod()
    raw["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": "gang-a",
        "gang.scheduling.koordinator.sh/min-available": "3",
    }
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.group == GroupRef(Dialect.KOORDINATOR, "default", "gang-a")
    assert pod.annotation_min_available == 3


def test_sigs_label_wins_over_koordinator_annotation() -> None:
    raw = raw_pod()
    raw["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "pg"}
    raw["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": "gang-a",
        "gang.scheduling.koordinator.sh/min-available": "3",
    }
    pod = pod_from_raw(raw, priorities=NO_CLASSES)
    assert pod.group == GroupRef(Dialect.SIGS, "default", "pg")
    assert pod.annotation_min_available is None


def test_bad_koordinator_min_available() -> None:
    raw = raw_pod()
    raw["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": "gang-a",
        "gang.scheduling.koordinator.sh/min-available": "three",
    }
    assert problems_of(raw) == [
        "Pod default/web-1: metadata.annotations[gang.scheduling.koordinator.sh/min-available]: "
        '"three" must be a whole number of pods'
    ]


def test_bad_phase_and_preemption_policy() -> None:
    raw = raw_pod(preemptionPolicy="Sometimes")
    raw["status"] = {"phase": "Sleeping"}
    assert problems_of(raw) == [
        'Pod default/web-1: spec.preemptionPolicy: unknown value "Sometimes"; must be one of '
        "PreemptLowerPriority, Never",
        'Pod default/web-1: status.phase: unknown value "Sleeping"; must be one of Pending, '
        "Running, Succeeded, Failed, Unknown",
    ]


def test_not_a_mapping() -> None:
    with pytest.raises(InvalidObject, match="must be a mapping"):
        pod_from_raw(["not", "a", "pod"], priorities=NO_CLASSES)  # type: ignore[arg-type]


# -- scheduling gates ---------------------------------------------------------------------------
def test_scheduling_gates_are_read_in_order() -> None:
    gates = [{"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/quota"}]
    pod = pod_from_raw(raw_pod(schedulingGates=gates), priorities=NO_CLASSES)
    assert pod.scheduling_gates == ("kueue.x-k8s.io/admission", "example.com/quota")
    assert pod.is_gated
    assert not pod_from_raw(raw_pod(), priorities=NO_CLASSES).is_gated


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        ({"schedulingGates": [{}]}, "spec.schedulingGates[0].name", "is required"),
        (
            {"schedulingGates": [{"name": "a"}, {"name": "a"}]},
            "spec.schedulingGates[1].name",
            'duplicate gate "a"',
        ),
        (
            {"schedulingGates": [{"name": "a"}], "nodeName": "n1"},
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ),
        ({"schedulingGates": "a"}, "spec.schedulingGates", "must be a list"),
    ],
)
def test_bad_gates_name_the_field(spec: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        pod_from_raw(raw_pod(**spec), priorities=NO_CLASSES)
    text = str(caught.value)
    assert field in text and problem in text, text


# -- OS and host network ------------------------------------------------------------------------
def test_os_name_is_read_and_checked() -> None:
    assert pod_from_raw(raw_pod(os={"name": "windows"}), priorities=NO_CLASSES).os_name == "windows"
    assert pod_from_raw(raw_pod(), priorities=NO_CLASSES).os_name == ""
    with pytest.raises(InvalidObject) as caught:
        pod_from_raw(raw_pod(os={"name": "plan9"}), priorities=NO_CLASSES)
    assert 'spec.os.name: must be linux or windows, got "plan9"' in str(caught.value)


def test_host_network_container_ports_are_host_ports() -> None:
    """The API server defaults hostPort to containerPort under hostNetwork (manifests have
    not been through it): two such pods conflict on a node."""
    containers = [
        {
            "name": "main",
            "ports": [{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}],
        }
    ]
    pod = pod_from_raw(raw_pod(hostNetwork=True, containers=containers), priorities=NO_CLASSES)
    assert pod.host_ports == (HostPort("TCP", "", 8080), HostPort("UDP", "", 53))
    plain = pod_from_raw(raw_pod(containers=containers), priorities=NO_CLASSES)
    assert plain.host_ports == ()


# -- in-place resize ----------------------------------------------------------------------------
def _resizing(**status: Any) -> dict[str, Any]:
    raw = raw_pod(
        nodeName="n1",
        containers=[{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        initContainers=[
            {
                "name": "proxy",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m"}},
            }
        ],
    )
    raw["status"] = {"phase": "Running", **status}
    return raw


def test_a_container_resized_down_counts_what_it_still_holds() -> None:
    """Spec lowered to 1 CPU; the kubelet still gives the container 3 (and the sidecar 500m):
    the node holds the larger until the resize is done, as kube-scheduler counts it."""
    status = {
        "containerStatuses": [
            {
                "name": "main",
                "allocatedResources": {"cpu": "3"},
                "resources": {"requests": {"cpu": "2"}},
            }
        ],
        "initContainerStatuses": [{"name": "proxy", "allocatedResources": {"cpu": "500m"}}],
    }
    pod = pod_from_raw(_resizing(**status), priorities=NO_CLASSES)
    assert pod.requests["cpu"] == 3500
    assert pod.requests["memory"] == 1024 * MI


def test_an_infeasible_resize_counts_only_what_the_container_holds() -> None:
    status = {
        "containerStatuses": [
            {"name": "main", "allocatedResources": {"cpu": "500m", "memory": "1Gi"}}
        ],
        "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
    }
    pod = pod_from_raw(_resizing(**status), priorities=NO_CLASSES)
    assert pod.requests["cpu"] == 600  # 500m held + the sidecar's 100m
    assert pod_from_raw(_resizing(), priorities=NO_CLASSES).requests["cpu"] == 1100
