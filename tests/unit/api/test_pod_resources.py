"""A pod's requests and host ports as kube-scheduler counts them (core/api/pod_resources.py):
containers, sidecars, init peak, pod-level resources, overhead, hostNetwork, in-place resize."""

from __future__ import annotations

from typing import Any

from gangsched.core.api import pod_from_raw
from gangsched.core.model import (
    HostPort,
)
from tests.unit.api.pod_json import MI, NO_CLASSES, container, problems_of, raw_pod


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


# -- host network ------------------------------------------------------------------------------
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
