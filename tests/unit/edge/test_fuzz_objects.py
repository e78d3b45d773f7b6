"""Fuzzed objects through the informer handlers into the scheduler (no API server).

Valid Nodes, PriorityClasses, PodDisruptionBudgets, PodGroups of every dialect and pods are
mutated at random (a value replaced by any JSON, a key dropped), delivered by relist, update
and delete in any order, then the scheduler runs until nothing is left to do. It must never
raise, never bind a pod it cannot read or whose PodGroup it cannot read, never bind a gang
short of minMember, and report every object it cannot read (what becomes an event on the
object in the live scheduler).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched.config import Config
from gangsched.core.api import (
    InvalidObject,
    PriorityResolver,
    pdb_from_raw,
    pod_from_raw,
    pod_group_from_raw,
    priority_class_from_raw,
)
from gangsched.core.decisions import Bind, Event
from gangsched.core.model import Dialect
from gangsched.core.preemption import build_preemptor
from gangsched.edge.cache import ClusterCache
from gangsched.edge.handlers import object_key
from gangsched.edge.operator import Operator
from gangsched.edge.pod_fingerprint import pod_fingerprint, rebound

JSON = dict[str, Any]
API = {
    Dialect.SIGS: "scheduling.sigs.k8s.io/v1alpha1",
    Dialect.X_K8S: "scheduling.x-k8s.io/v1alpha1",
    Dialect.UPSTREAM: "scheduling.k8s.io/v1beta1",
}


def node(name: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"u-{name}", "labels": {"zone": name[-1]}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def priority_class(name: str, value: int) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": f"u-{name}"},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
    }


def budget() -> JSON:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb", "namespace": "ns", "uid": "u-pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "low"}}},
    }


def pod_group(dialect: Dialect, name: str, min_member: int) -> JSON:
    spec: JSON
    if dialect is Dialect.UPSTREAM:
        spec = {"schedulingPolicy": {"gang": {"minCount": min_member}}, "priorityClassName": "high"}
    else:
        spec = {"minMember": min_member, "scheduleTimeoutSeconds": 30}
        if dialect is Dialect.SIGS:
            spec.update(priorityClassName="high", disruptionMode="All")
    meta: JSON = {"name": name, "namespace": "ns", "uid": f"u-{name}"}
    if dialect is Dialect.SIGS:
        meta["annotations"] = {"gang.scheduling.koordinator.sh/groups": f'["ns/{name}"]'}
    return {"apiVersion": API[dialect], "kind": "PodGroup", "metadata": meta, "spec": spec}


def pod(name: str, *, group: tuple[Dialect, str] | None = None, node: str | None = None) -> JSON:
    labels: dict[str, str] = {"app": "low" if node else "gang"}
    annotations: dict[str, str] = {}
    spec: JSON = {
        "schedulerName": "other" if node else "gangsched",
        "priorityClassName": "low" if node else "high",
        "priority": 10 if node else 1000,  # resolved by admission, as on a live cluster
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "ports": [{"containerPort": 80}],
            }
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["1"]}]
                        },
                    }
                ]
            }
        },
    }
    if node:
        spec["nodeName"] = node
    if group is not None:
        dialect, group_name = group
        if dialect is Dialect.SIGS:
            labels["pod-group.scheduling.sigs.k8s.io"] = group_name
        elif dialect is Dialect.X_K8S:
            labels["scheduling.x-k8s.io/pod-group"] = group_name
        elif dialect is Dialect.UPSTREAM:
            spec["schedulingGroup"] = {"podGroupName": group_name}
        else:
            annotations["gang.scheduling.koordinator.sh/name"] = group_name
            annotations["gang.scheduling.koordinator.sh/min-available"] = "2"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def templates() -> list[JSON]:
    objects = [node("n1"), node("n2"), node("n3")]
    objects += [priority_class("low", 10), priority_class("high", 1000), budget()]
    objects += [pod("low-0", node="n1"), pod("low-1", node="n2"), pod("lone")]
    for dialect, size in (
        (Dialect.SIGS, 3),
        (Dialect.X_K8S, 2),
        (Dialect.UPSTREAM, 2),
        (Dialect.KOORDINATOR, 2),
    ):
        name = f"g-{dialect.name.lower()}"
        if dialect is not Dialect.KOORDINATOR:
            objects.append(pod_group(dialect, name, size))
        objects += [pod(f"{name}-{i}", group=(dialect, name)) for i in range(size)]
    return objects


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths(child, (*prefix, index))


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**40), 2**40),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(["", "1", "-1", "0.5", "1e3", "1Gi", "lots", "[", "ns/x", "All", "In"]),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=5,
)


@st.composite
def mutated(draw: st.DrawFn, template: JSON) -> JSON:
    obj = copy.deepcopy(template)
    for _ in range(draw(st.integers(0, 2))):
        # Never the kind/apiVersion: the informer of a resource only delivers its own kind.
        candidates = [p for p in paths(obj) if p and p[0] not in ("kind", "apiVersion")]
        path = draw(st.sampled_from(candidates))
        parent = obj
        for part in path[:-1]:
            parent = parent[part]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return obj


@st.composite
def scenarios(draw: st.DrawFn) -> list[tuple[str, JSON]]:
    """A relist of every (maybe mutated) object, then updates and deletes in any order."""
    objects = templates()
    chosen = [draw(mutated(o)) if draw(st.booleans()) else o for o in objects]
    steps = [("replace", o) for o in chosen]
    for _ in range(draw(st.integers(0, 6))):
        template = draw(st.sampled_from(objects))
        steps.append((draw(st.sampled_from(["upsert", "delete"])), draw(mutated(template))))
    return steps


def dialect_of(obj: JSON) -> Dialect | None:
    group = str(obj.get("apiVersion", "")).split("/", 1)[0]
    return next((d for d in API if d.value == group), None)


def deliver(
    cache: ClusterCache, steps: list[tuple[str, JSON]]
) -> tuple[dict[tuple[str, str], tuple[bool, JSON]], set[tuple[str, str]]]:
    """Feed the steps to the cache; returns, per object still present, whether it was
    readable when delivered (with the PriorityClasses known at that moment), and its last
    delivered copy; and the PodGroups read again, readable, when their class arrived."""
    state: dict[tuple[str, str], tuple[bool, JSON]] = {}
    forgiven: set[tuple[str, str]] = set()

    def note(obj: JSON, present: bool = True) -> None:
        if not isinstance(obj.get("metadata"), dict):
            return
        key = (str(obj["kind"]), object_key(obj))
        cached = cache.cluster.pods.get(key[1]) if obj["kind"] == "Pod" else None
        if cached is not None:
            old, new = cache._fingerprints.get(key[1]), pod_fingerprint(obj)
            if old == new or rebound(cached, old, new) is not None:
                # Fields the API server never changes (a pod's spec but for its bind): the
                # cache skips the update, or takes only the bound pod's node, phase and
                # nomination from it, and keeps its reading of the rest.
                return
        forgiven.discard(key)
        if present:
            state[key] = (readable(obj, cache._resolver()), obj)
        else:
            state.pop(key, None)

    def forgive() -> None:
        """A PodGroup unreadable for want of its PriorityClass is read again when the class
        arrives and keeps that reading, like a pod's priority resolved at admission: deleting
        the class later changes nothing."""
        for key, (ok, raw) in state.items():
            if key[0] == "PodGroup" and not ok and readable(raw, cache._resolver()):
                forgiven.add(key)

    handlers = {
        "Node": cache.nodes(),
        "PriorityClass": cache.priority_classes(),
        "PodDisruptionBudget": cache.budgets(),
        "Pod": cache.pods(),
    }
    for dialect in API:
        handlers[f"PodGroup/{dialect.value}"] = cache.pod_groups(dialect)

    def handler(obj: JSON) -> Any:
        if obj["kind"] == "PodGroup":
            return handlers[f"PodGroup/{dialect_of(obj).value}"]  # type: ignore[union-attr]
        return handlers[obj["kind"]]

    relist: dict[str, list[JSON]] = {k: [] for k in handlers}
    order = ["PriorityClass", "Node", "PodDisruptionBudget", *[k for k in handlers if "/" in k]]
    for action, obj in steps:
        if action == "replace":
            key = obj["kind"] if obj["kind"] != "PodGroup" else f"PodGroup/{dialect_of(obj).value}"  # type: ignore[union-attr]
            relist[key].append(obj)
    for key in [*order, "Pod"]:
        for obj in relist[key]:
            note(obj)
        handlers[key].replace(relist[key])
    for action, obj in steps:
        if action == "upsert":
            note(obj)
            handler(obj).upsert(obj)
            if obj["kind"] == "PriorityClass":
                forgive()
        elif action == "delete":
            note(obj, present=False)
            handler(obj).delete(obj)
    return state, forgiven


def readable(obj: JSON, resolver: PriorityResolver) -> bool:
    try:
        if obj["kind"] == "Pod":
            pod_from_raw(obj, priorities=resolver)
        elif obj["kind"] == "PodGroup":
            pod_group_from_raw(obj, priorities=resolver)
        elif obj["kind"] == "PodDisruptionBudget":
            pdb_from_raw(obj)
        elif obj["kind"] == "PriorityClass":
            priority_class_from_raw(obj)
    except InvalidObject:
        return False
    return True


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(steps=scenarios())
def test_fuzzed_objects_never_crash_never_bind_what_is_unreadable(
    steps: list[tuple[str, JSON]],
) -> None:
    # The live scheduler's own step (contains a cycle that raises), without an API server.
    operator = Operator(
        config=Config(),
        kube=SimpleNamespace(),  # type: ignore[arg-type]
        preemptor=build_preemptor(strategy="mincost", scheduler_name="gangsched"),
    )
    events: list[Event] = []
    operator.actuator.apply_event = lambda event, regarding=None: events.append(event)  # type: ignore[method-assign]
    scheduler, cache = operator.scheduler, operator.cache
    cache.clock = lambda: 0.0
    reported: list[tuple[str, str]] = []
    cache.on_problem = lambda kind, key, message: reported.append((kind, key))
    state, forgiven = deliver(cache, steps)

    cluster = scheduler.cluster
    binds: list[Bind] = []
    for now in range(60):
        operator.wake.clear()
        report = operator.step(float(now))
        if report is None and operator.wake.is_set():
            # Contained: the gang was told why (a FailedScheduling event) and is retried.
            assert events and events[-1].reason == "FailedScheduling", events
            continue
        if report is None:
            break
        for decision in report.decisions:
            if isinstance(decision, Bind):
                binds.append(decision)
                assert f"Pod/{decision.pod}" not in cache.problems
                bound = cluster.pods[decision.pod]
                if bound.group is not None and bound.group.dialect in API:
                    assert bound.group in cluster.groups, "bound into an unreadable PodGroup"
                    assert f"PodGroup/{bound.group.key}" not in cache.problems
        if report.bound:
            for ref in cluster.unit_of(report.gang):
                group = cluster.pod_group(ref)
                placed = [p for p in cluster.group_members(ref) if p.node_name is not None]
                assert group is not None and len(placed) >= group.min_member, report.message

    # Every pod and PodGroup that could not be read when it arrived was reported.
    # A PodGroup that named a PriorityClass created after it is read again when the class
    # arrives: it is then forgiven, and only then.
    for (kind, key), (ok, raw) in state.items():
        if kind in ("Pod", "PodGroup") and not ok:
            assert (kind, key) in reported, (kind, key)
            readable_now = kind == "PodGroup" and (
                readable(raw, cache._resolver()) or (kind, key) in forgiven
            )
            assert (f"{kind}/{key}" in cache.problems) != readable_now, (kind, key)
