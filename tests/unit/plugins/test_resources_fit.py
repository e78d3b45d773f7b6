"""NodeResourcesFit: requests against free capacity, with kube-scheduler's reasons and codes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest

from gangsched.core.model import Node, Pod
from gangsched.core.plugins.resources_fit import ResourcesFit
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import snapshot

from .probe import context, passing, rejections

GPU = "nvidia.com/gpu"


def nodes() -> list[Node]:
    return [
        make_node("cpu-small", cpu="2", memory="4Gi", pods=3),
        make_node("cpu-big", cpu="16", memory="64Gi"),
        make_node("gpu", cpu="8", memory="32Gi", extra={GPU: 2}),
    ]


@dataclass
class Case:
    id: str
    pod: Pod
    existing: list[Pod] = field(default_factory=list)
    rejected: dict[str, list[tuple[str, Code]]] = field(default_factory=dict)


def used(node: str, name: str, **kw: Any) -> Pod:
    return make_pod(name, node_name=node, **kw)


CASES = [
    Case("small pod fits everywhere", make_pod(cpu="500m", memory="1Gi")),
    Case("no requests: only the pod count matters", make_pod(cpu=None, memory=None)),
    Case(
        "CPU larger than an empty node cannot be fixed by eviction",
        make_pod(cpu="4", memory=None),
        rejected={"cpu-small": [("Insufficient cpu", Code.UNRESOLVABLE)]},
    ),
    Case(
        "CPU taken by running pods can be freed",
        make_pod(cpu="1", memory=None),
        [used("cpu-small", "a", cpu="1500m")],
        {"cpu-small": [("Insufficient cpu", Code.UNSCHEDULABLE)]},
    ),
    Case(
        "exact fit is a fit",
        make_pod(cpu="500m", memory=None),
        [used("cpu-small", "a", cpu="1500m")],
    ),
    Case(
        "several missing resources give several reasons",
        make_pod(cpu="3", memory="5Gi"),
        rejected={
            "cpu-small": [
                ("Insufficient cpu", Code.UNRESOLVABLE),
                ("Insufficient memory", Code.UNRESOLVABLE),
            ]
        },
    ),
    Case(
        "mixed: one reason resolvable, one not: the node is unresolvable",
        make_pod(cpu="1", memory="5Gi"),
        [used("cpu-small", "a", cpu="1500m")],
        {
            "cpu-small": [
                ("Insufficient cpu", Code.UNSCHEDULABLE),
                ("Insufficient memory", Code.UNRESOLVABLE),
            ]
        },
    ),
    Case(
        "extended resources: only the GPU node has them",
        make_pod(cpu="1", extra={GPU: 1}, memory=None),
        rejected={
            "cpu-small": [(f"Insufficient {GPU}", Code.UNRESOLVABLE)],
            "cpu-big": [(f"Insufficient {GPU}", Code.UNRESOLVABLE)],
        },
    ),
    Case(
        "extended resources in use",
        make_pod(extra={GPU: 1}, cpu=None, memory=None),
        [used("gpu", "a", extra={GPU: 2})],
        {
            "cpu-small": [(f"Insufficient {GPU}", Code.UNRESOLVABLE)],
            "cpu-big": [(f"Insufficient {GPU}", Code.UNRESOLVABLE)],
            "gpu": [(f"Insufficient {GPU}", Code.UNSCHEDULABLE)],
        },
    ),
    Case(
        "a resource no node offers",
        make_pod(extra={"example.com/fpga": 1}, cpu=None, memory=None),
        rejected={
            name: [("Insufficient example.com/fpga", Code.UNRESOLVABLE)]
            for name in ("cpu-small", "cpu-big", "gpu")
        },
    ),
    Case(
        "Too many pods",
        make_pod(cpu=None, memory=None),
        [used("cpu-small", f"p{i}") for i in range(3)],
        {"cpu-small": [("Too many pods", Code.UNSCHEDULABLE)]},
    ),
    Case(
        "finished pods hold nothing",
        make_pod(cpu="2", memory=None),
        [make_pod("done", node_name="cpu-small", cpu="2", phase="Succeeded", memory=None)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fit(case: Case) -> None:
    snap = snapshot(nodes(), case.existing)
    names = [n.name for n in snap.nodes]
    assert passing(ResourcesFit(), case.pod, snap) == [n for n in names if n not in case.rejected]
    assert rejections(ResourcesFit(), case.pod, snap) == case.rejected


GANG = "gang"


@pytest.mark.parametrize(
    ("priority", "group", "fits"),
    [
        pytest.param(0, None, False, id="lower priority must leave the reservation alone"),
        pytest.param(10, None, False, id="equal priority too"),
        pytest.param(20, None, True, id="higher priority may take it"),
        pytest.param(0, GANG, True, id="members of the nominated pod's own group may take it"),
    ],
)
def test_capacity_reserved_for_nominated_pods(priority: int, group: str | None, fits: bool) -> None:
    snap = snapshot([make_node("n", cpu="4", memory="8Gi")])
    nominated = make_pod("preemptor", cpu="3", priority=10, group=GANG, nominated="n", memory=None)
    snap.nominate(nominated, 0)
    pod = make_pod(cpu="2", priority=priority, group=group, memory=None)
    assert passing(ResourcesFit(), pod, snap) == (["n"] if fits else [])
    if not fits:
        assert rejections(ResourcesFit(), pod, snap) == {
            "n": [("Insufficient cpu", Code.UNSCHEDULABLE)]
        }


def test_pods_assumed_in_the_cycle_use_capacity() -> None:
    snap = snapshot([make_node("n", cpu="4", memory="8Gi")])
    snap.assume(make_pod("a", cpu="3", memory=None), 0)
    assert passing(ResourcesFit(), make_pod(cpu="2", memory=None), snap) == []
    assert passing(ResourcesFit(), make_pod(cpu="1", memory=None), snap) == ["n"]


def test_filter_respects_candidates() -> None:
    snap = snapshot(nodes())
    pod = make_pod(cpu="1", memory=None)
    ctx = context(pod, snap)
    result = ResourcesFit().filter(ctx, snap, np.array([True, False, True]))
    assert result.tolist() == [True, False, True]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_few_candidates_get_the_verdict_all_nodes_get(case: Case) -> None:
    # Below a quarter of the nodes the filter compares the candidates' rows only (a topology
    # domain's nodes): the same verdict as over every node, restricted to the candidates.
    copies = [replace(n, name=f"{n.name}-{i}") for i in range(4) for n in nodes()]
    existing = [
        replace(p, name=f"{p.name}-{i}", node_name=f"{p.node_name}-{i}")
        for i in range(4)
        for p in case.existing
    ]
    snap = snapshot(copies, existing)
    ctx = context(case.pod, snap)
    everywhere = ResourcesFit().filter(ctx, snap, np.ones(len(snap), dtype=np.bool_))
    assert not everywhere.all() or not case.rejected
    for first in range(len(snap)):
        few = np.zeros(len(snap), dtype=np.bool_)
        few[[first, (first + 5) % len(snap)]] = True
        assert ResourcesFit().filter(ctx, snap, few).tolist() == (everywhere & few).tolist()
