"""Typed decoding (gangsched.edge.wire) of list pages and watch events reads pods and nodes
exactly as full decoding does.

A field the converters read but the typed shapes leave out would read as absent on a live
cluster while every test that builds dicts by hand still passed: these tests decode the same
bytes both ways and compare the models, on a pod that sets every field the scheduler reads
and on every Pod and Node in the repository's example and fixture manifests.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from gangsched.core.api import InvalidObject, PriorityResolver, node_from_raw
from gangsched.core.api import pod_from_raw as convert_pod
from gangsched.core.model import PriorityClass
from gangsched.edge.pod_fingerprint import pod_fingerprint
from gangsched.edge.wire import LIST_DECODERS, WATCH_DECODERS, decode_node, decode_pod

ROOT = Path(__file__).resolve().parents[3]
PRIORITIES = PriorityResolver(
    [PriorityClass(name=n, value=v) for n, v in (("high", 1000), ("ha-normal", 10), ("low", 1))]
)

EVERYTHING: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "everything",
        "namespace": "team",
        "uid": "u-1",
        "generation": 3,
        "resourceVersion": "77",
        "creationTimestamp": "2026-01-31T12:00:00Z",
        "deletionTimestamp": "2026-01-31T12:05:00Z",
        "labels": {"app": "x", "pod-group.scheduling.sigs.k8s.io": "g"},
        "annotations": {"note": "kept"},
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "j", "controller": True}
        ],
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {
        "schedulerName": "gangsched",
        "priorityClassName": "high",
        "priority": 1000,
        "preemptionPolicy": "Never",
        "nodeSelector": {"zone": "a"},
        "hostNetwork": True,
        "os": {"name": "linux"},
        "overhead": {"cpu": "50m"},
        "resources": {"limits": {"memory": "3Gi"}},
        "schedulingGroup": {"podGroupName": "upstream-group"},
        "schedulingGates": [{"name": "wait"}],
        "tolerations": [
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "t", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30},
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "preference": {"matchExpressions": [{"key": "p", "operator": "Exists"}]},
                    }
                ],
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "x"}},
                        "topologyKey": "zone",
                        "matchLabelKeys": ["app"],
                        "namespaces": ["team"],
                    }
                ]
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "app", "operator": "In", "values": ["y"]}
                                ]
                            },
                            "topologyKey": "kubernetes.io/hostname",
                            "namespaceSelector": {},
                        },
                    }
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 2,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
                "minDomains": 2,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
            }
        ],
        "initContainers": [
            {
                "name": "init",
                "image": "busybox",
                "command": ["sh", "-c", "true"],
                "resources": {"requests": {"cpu": "2"}},
            },
            {
                "name": "sidecar",
                "image": "proxy",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "ports": [{"containerPort": 15000, "hostPort": 15000, "protocol": "TCP"}],
            },
        ],
        "containers": [
            {
                "name": "main",
                "image": "trainer:1",
                "env": [{"name": "A", "value": "1"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "resources": {
                    "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                    "limits": {"memory": "2Gi", "nvidia.com/gpu": "1"},
                },
                "ports": [{"containerPort": 8080, "hostIP": "10.0.0.1", "protocol": "UDP"}],
            }
        ],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "config", "configMap": {"name": "cm"}},
        ],
        "resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "gpu-template"},
            {"name": "shared", "resourceClaimName": "shared-claim"},
        ],
    },
    "status": {
        "phase": "Pending",
        "nominatedNodeName": "n1",
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "everything-gpu-x1"}],
        "resize": "Infeasible",
        "conditions": [
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available",
                "lastProbeTime": None,
                "lastTransitionTime": "2026-01-31T12:01:00Z",
            },
        ],
        "containerStatuses": [
            {
                "name": "main",
                "image": "trainer:1",
                "state": {"waiting": {"reason": "Pending"}},
                "allocatedResources": {"cpu": "2"},
                "resources": {"requests": {"cpu": "1500m"}},
            }
        ],
        "initContainerStatuses": [
            {"name": "sidecar", "allocatedResources": {"cpu": "200m"}, "ready": False}
        ],
    },
}


def manifests(kind: str) -> list[dict[str, Any]]:
    found = []
    for path in [*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/fixtures/**/*.yaml")]:
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue
        for doc in documents:
            entries = doc.get("items", [doc]) if isinstance(doc, dict) else []
            found += [e for e in entries if isinstance(e, dict) and e.get("kind") == kind]
    return found


def model(convert: Any, raw: dict[str, Any]) -> object:
    try:
        return dataclasses.astuple(convert(raw))
    except InvalidObject as exc:
        return str(exc)


def pod_from_raw(raw: dict[str, Any]) -> Any:
    return convert_pod(raw, priorities=PRIORITIES)


def test_every_field_the_scheduler_reads_survives_typed_decoding() -> None:
    raw = orjson.dumps(EVERYTHING)
    typed = decode_pod(raw)
    full = orjson.loads(raw)
    assert model(pod_from_raw, typed) == model(pod_from_raw, full)
    assert pod_fingerprint(typed) == pod_fingerprint(full)
    pod = pod_from_raw(typed)
    # The pod really is read (not two identical refusals): its parts are there.
    assert pod.claims and pod.volume_claims and pod.spread and pod.host_ports and pod.terminating
    assert pod.unschedulable_since is not None  # where a wait for new capacity starts


def test_what_scheduling_never_reads_is_not_decoded() -> None:
    typed = decode_pod(orjson.dumps(EVERYTHING))
    assert "managedFields" not in typed["metadata"]
    main = typed["spec"]["containers"][0]
    assert set(main) == {"name", "resources", "ports"}  # no image, env, mounts
    assert [v["name"] for v in typed["spec"]["volumes"]] == ["data", "scratch", "config"]
    assert "configMap" not in typed["spec"]["volumes"][2]
    assert typed["status"]["containerStatuses"][0].keys() == {
        "name",
        "allocatedResources",
        "resources",
    }
    assert typed["status"]["conditions"][1].keys() == {
        "type",
        "status",
        "reason",
        "lastTransitionTime",
    }


@pytest.mark.parametrize("kind", ["Pod", "Node"])
def test_the_repository_manifests_read_the_same_either_way(kind: str) -> None:
    objects = manifests(kind)
    assert len(objects) >= (10 if kind == "Pod" else 3)
    convert = pod_from_raw if kind == "Pod" else node_from_raw
    decode = decode_pod if kind == "Pod" else decode_node
    for obj in objects:
        raw = orjson.dumps(obj, default=str)  # YAML timestamps as strings, as the API sends
        assert model(convert, decode(raw)) == model(convert, orjson.loads(raw)), obj


def test_a_page_that_does_not_fit_the_shapes_is_decoded_in_full() -> None:
    """Typed decoding may only make a list cheaper, never fail it: a value of an unexpected
    type (an aggregated API server, a patched one) falls back to the standard decoding, and
    the converter then names the field."""
    odd = {**EVERYTHING, "metadata": {**EVERYTHING["metadata"], "labels": {"n": 5}}}
    page = orjson.dumps({"metadata": {"continue": "c"}, "items": [EVERYTHING, odd]})
    decoded = LIST_DECODERS["/api/v1/pods"](page)
    assert decoded["items"][1]["metadata"]["labels"] == {"n": 5}
    assert "image" in decoded["items"][0]["spec"]["containers"][0]  # decoded in full
    assert decoded["metadata"]["continue"] == "c"
    with pytest.raises(InvalidObject, match=r"metadata\.labels\.n"):
        pod_from_raw(decoded["items"][1])


@pytest.mark.parametrize("kind", ["ADDED", "MODIFIED", "DELETED"])
def test_a_watched_pod_reads_as_a_listed_one(kind: str) -> None:
    raw = orjson.dumps({"type": kind, "object": EVERYTHING})
    event = WATCH_DECODERS["/api/v1/pods"](raw)
    assert event["type"] == kind
    assert event["object"] == decode_pod(orjson.dumps(EVERYTHING))
    assert "managedFields" not in event["object"]["metadata"]  # typed, not in full
    assert model(pod_from_raw, event["object"]) == model(pod_from_raw, EVERYTHING)


def test_a_watched_node_reads_as_a_listed_one() -> None:
    for node in manifests("Node"):
        raw = orjson.dumps({"type": "MODIFIED", "object": node}, default=str)
        event = WATCH_DECODERS["/api/v1/nodes"](raw)
        listed = decode_node(orjson.dumps(node, default=str))
        assert event == {"type": "MODIFIED", "object": listed}


@pytest.mark.parametrize("path", ["/api/v1/pods", "/api/v1/nodes"])
def test_a_watch_error_and_a_bookmark_keep_what_the_informer_reads(path: str) -> None:
    """An ERROR event carries a Status (its code says whether to list again); a bookmark,
    the resourceVersion to resume from."""
    gone = {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "too old resource version: 1 (5)",
            "reason": "Expired",
            "code": 410,
        },
    }
    assert WATCH_DECODERS[path](orjson.dumps(gone)) == gone
    mark = {
        "type": "BOOKMARK",
        "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "812"}},
    }
    assert WATCH_DECODERS[path](orjson.dumps(mark))["object"]["metadata"] == {
        "resourceVersion": "812"
    }


def test_a_watch_event_that_does_not_fit_is_decoded_in_full() -> None:
    odd = {**EVERYTHING, "metadata": {**EVERYTHING["metadata"], "labels": {"n": 5}}}
    event = WATCH_DECODERS["/api/v1/pods"](orjson.dumps({"type": "MODIFIED", "object": odd}))
    assert event["object"]["metadata"]["labels"] == {"n": 5}
    assert "image" in event["object"]["spec"]["containers"][0]
