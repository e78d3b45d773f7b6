"""edge/domain_pinning.py: a gated gang's members are all narrowed before any gate is lifted,
and a failed narrowing lifts no gate, says so on the PodGroup, and is retried."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from gangsched.core.cluster import ClusterState
from gangsched.core.domain_pinning import DOMAIN_CHOSEN, DOMAIN_GATE, DOMAIN_PIN_FAILED
from gangsched.core.model import Dialect
from gangsched.core.scheduler import Scheduler
from gangsched.edge.cache import ClusterCache
from gangsched.edge.domain_pinning import DomainPinner
from gangsched.edge.kube import KubeError
from tests.builders import raw_node, raw_pod, raw_pod_group
from tests.unit.edge.test_actuator_faults import actuator_for

ZONE = "topology.kubernetes.io/zone"
MINE = {"key": "team", "operator": "In", "values": ["ml"]}


class FakeKube:
    """Holds the pods; GET returns them, PATCH records and applies what edge writes."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {f"/api/v1/namespaces/default/pods/{p['metadata']['name']}": p for p in pods}
        self.calls: list[tuple[str, str, dict[str, Any] | None]] = []
        self.refuse: set[str] = set()

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        return copy.deepcopy(self.pods[path])

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("POST", path, body))
        return body

    async def patch(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("PATCH", path, body))
        if path.rsplit("/", 1)[-1] in self.refuse:
            raise KubeError(422, "Invalid", "Pod is invalid: spec: Forbidden")
        spec = self.pods[path]["spec"]
        if "affinity" in body["spec"]:
            spec["affinity"] = body["spec"]["affinity"]
        else:
            spec["schedulingGates"] = []
        return self.pods[path]

    def writes(self) -> list[tuple[str, str]]:
        """(what, pod) of every pod spec patch, in order."""
        return [
            ("affinity" if "affinity" in (body or {}).get("spec", {}) else "gate", path[-7:])
            for verb, path, body in self.calls
            if verb == "PATCH" and "/pods/" in path
        ]

    def event_reasons(self) -> list[str]:
        return [str((b or {}).get("reason")) for v, p, b in self.calls if p.endswith("/events")]


def pinner() -> tuple[FakeKube, DomainPinner]:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [MINE]}]
            }
        }
    }
    pods = [
        raw_pod(
            f"train-{i}",
            group="train",
            schedulingGates=[{"name": DOMAIN_GATE}],
            affinity=affinity,
            metadata={"resourceVersion": "1"},
        )
        for i in range(2)
    ]
    kube = FakeKube(copy.deepcopy(pods))
    cache = ClusterCache(Scheduler(ClusterState(scheduler_name="gangsched")), clock=lambda: 0.0)
    cache.nodes().replace(
        [raw_node("na", cpu="8", labels={ZONE: "a"}), raw_node("nb", cpu="1", labels={ZONE: "b"})]
    )
    cache.pod_groups().replace([raw_pod_group("train", 2, topology={"required": ZONE})])
    cache.pods().replace(pods)
    actuator = actuator_for(kube, cache)
    actuator.api_versions[Dialect.SIGS] = "scheduling.sigs.k8s.io/v1alpha1"
    pin = DomainPinner(
        kube=kube,  # type: ignore[arg-type]
        cache=cache,
        actuator=actuator,
        metrics=actuator.metrics,
    )
    return kube, pin


@pytest.mark.asyncio(loop_scope="function")
async def test_a_failed_narrowing_lifts_no_gate_and_the_retry_finishes_the_pin() -> None:
    kube, pin = pinner()
    kube.refuse = {"train-1"}
    assert await pin.review(0.0) == []
    await asyncio.sleep(0.05)  # the event is posted in the background
    assert sorted(kube.writes()) == [("affinity", "train-0"), ("affinity", "train-1")]
    assert kube.event_reasons() == [DOMAIN_PIN_FAILED]
    assert await pin.review(1.0) == []  # not before retry_seconds
    kube.refuse = set()
    kube.calls.clear()
    written = await pin.review(pin.retry_seconds + 1)
    assert [(p.key, p.domain) for p in written] == [(ZONE, "a")]
    # train-0 was narrowed already: only train-1's narrowing, then both gates.
    writes = kube.writes()
    assert writes[0] == ("affinity", "train-1")
    assert sorted(writes[1:]) == [("gate", "train-0"), ("gate", "train-1")]
    for path, pod in kube.pods.items():
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert terms == [
            {"matchExpressions": [MINE, {"key": ZONE, "operator": "In", "values": ["a"]}]}
        ], path
    gate_patch = next(b for v, p, b in kube.calls if b and "schedulingGates" in b.get("spec", {}))
    assert gate_patch["spec"]["schedulingGates"] == [{"$patch": "delete", "name": DOMAIN_GATE}]
    await asyncio.sleep(0.05)
    assert kube.event_reasons() == [DOMAIN_CHOSEN]
