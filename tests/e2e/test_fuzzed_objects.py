"""Fuzzed PodGroups and pods (Koordinator annotations, minMember, priorities): every one
gangsched cannot use is reported on the object by an event, and none of them is bound."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.core.api import (
    InvalidObject,
    PriorityResolver,
    pod_from_raw,
    pod_group_from_raw,
    priority_class_from_raw,
)

from .conftest import Cluster
from .fault_runs import (
    no_tracebacks,
    scheduled_workload,
    workdir,  # noqa: F401  (fixture)
)
from .harness import SIGS, eventually
from .k8s import JSON, Kube
from .workload import Gang, Workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


# ------------------------------------------------------------------------ fuzzed objects
GANG_GROUPS = "gang.scheduling.koordinator.sh/groups"
MIN_AVAILABLE = "gang.scheduling.koordinator.sh/min-available"
GANG_NAME = "gang.scheduling.koordinator.sh/name"

garbage = st.one_of(
    st.text(alphabet="ab/ ,[]{}\"'0123456789-", max_size=12),
    st.sampled_from(["", "[", "{}", "3", '["x/y/z"]', "[1, 2]", '"solo"', "null", "-1", "0"]),
)


@st.composite
def fuzzed_gang(draw: st.DrawFn) -> dict[str, Any]:
    """A PodGroup (and its members' annotations) that the API server accepts but may be
    malformed for gangsched: unknown priority class, garbage GangGroup annotation, garbage
    Koordinator min-available on members."""
    annotations = {}
    if draw(st.booleans()):
        annotations[GANG_GROUPS] = draw(garbage)
    return {
        "minMember": draw(st.integers(1, 3)),
        "size": draw(st.integers(1, 3)),
        "priorityClassName": draw(st.sampled_from(["faults-low", "", "no-such-class"])),
        "annotations": annotations,
        "podAnnotation": draw(st.one_of(st.none(), garbage)),
        "lone_koordinator": draw(st.booleans()),
    }


def draw_examples(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """`count` examples, the same on every run (derandomized, no example database)."""
    examples: list[Any] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        examples.append(example)

    collect()
    return examples[:count]


async def test_fuzzed_objects_are_reported_and_never_bound(
    cluster: Cluster,
    kube: Kube,
    workdir: Path,  # noqa: F811  (the fixture)
) -> None:
    run = scheduled_workload(cluster, kube, workdir, "fuzz", nodes=3, record=False)
    async with run as (workload, replica, _, _):
        specs = draw_examples(fuzzed_gang(), 24)
        created: list[JSON] = []
        for i, spec in enumerate(specs):
            name = f"f{i:02d}"
            if spec["lone_koordinator"]:
                pod = workload.pod(name, Gang(name, 1, 1, "100m", "faults-low", 100, lone=True))
                pod["metadata"]["annotations"] = {GANG_NAME: name}
                if spec["podAnnotation"] is not None:
                    pod["metadata"]["annotations"][MIN_AVAILABLE] = spec["podAnnotation"]
                created += await _create_all(kube, workload, [pod])
                continue
            group: JSON = {
                "apiVersion": SIGS,
                "kind": "PodGroup",
                "metadata": {
                    "name": name,
                    "namespace": workload.ns,
                    "annotations": spec["annotations"],
                },
                "spec": {"minMember": spec["minMember"]},
            }
            if spec["priorityClassName"]:
                group["spec"]["priorityClassName"] = spec["priorityClassName"]
            gang = Gang(name, spec["size"], spec["minMember"], "100m", "faults-low", 100)
            members = [workload.pod(p, gang) for p in gang.pod_names()]
            created += await _create_all(kube, workload, [group, *members])
        classes = (await kube.get("/apis/scheduling.k8s.io/v1/priorityclasses"))["items"]
        resolver = PriorityResolver(
            [priority_class_from_raw({**c, "kind": "PriorityClass"}) for c in classes]
        )
        invalid: dict[tuple[str, str], str] = {}
        for obj in created:
            try:
                if obj["kind"] == "Pod":
                    pod_from_raw(obj, priorities=resolver)
                else:
                    pod_group_from_raw(obj, priorities=resolver)
            except InvalidObject as exc:
                invalid[(obj["kind"], obj["metadata"]["name"])] = str(exc.problems[0].message)
        assert invalid, "the fuzzer should produce objects gangsched cannot use"

        async def all_reported() -> bool:
            events = (await kube.get(f"/apis/events.k8s.io/v1/namespaces/{workload.ns}/events"))[
                "items"
            ]
            reported = {
                (e["regarding"]["kind"], e["regarding"]["name"])
                for e in events
                if e["reason"] in ("InvalidObject", "FailedScheduling")
                and "cannot use this object" in e.get("note", "")
                and e["regarding"].get("uid")
            }
            return set(invalid) <= reported

        await eventually(all_reported, timeout=120, what="an event on every invalid object")
        await asyncio.sleep(3)  # give the scheduler time to (wrongly) bind them
        pods = await workload.pods()
        wrongly = []
        for (kind, name), problem in invalid.items():
            names = [name] if kind == "Pod" else [p for p in pods if p.startswith(f"{name}-")]
            wrongly += [f"{p} ({problem})" for p in names if pods[p]["spec"].get("nodeName")]
        assert not wrongly, f"bound despite an invalid object: {wrongly}"
        assert replica.alive
        print(
            f"\nfuzz: {len(created)} objects accepted by the API server, {len(invalid)} invalid "
            f"for gangsched, all reported by event, none bound"
        )
        assert await replica.stop() == 0
        no_tracebacks(replica)


async def _create_all(kube: Kube, workload: Workload, objects: list[JSON]) -> list[JSON]:
    """Create what the API server accepts (it rejects some fuzzed objects itself)."""
    from .k8s import KubeError

    out = []
    for obj in objects:
        path = (
            f"/api/v1/namespaces/{workload.ns}/pods"
            if obj["kind"] == "Pod"
            else f"/apis/{SIGS}/namespaces/{workload.ns}/podgroups"
        )
        with contextlib.suppress(KubeError):
            created = await kube.create(path, obj)
            created.setdefault("kind", obj["kind"])
            created.setdefault("apiVersion", obj["apiVersion"])
            out.append(created)
    return out
