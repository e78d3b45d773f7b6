"""Scaffolding of the conformance suite: upstream-shaped objects as raw manifests, run step by step
through `gangsched simulate` in-process.

Upstream's integration tests create objects against a live API server and wait for the scheduler
between steps ("create the blocker, wait until it is scheduled, create the gang, ..."). A
`Scenario` reproduces that offline: it keeps the cluster as manifests, and `settle()` writes them
to a file, runs the very `gangsched simulate FILE -o json` command (the CLI entry point, so the
loader, config, queue, cycle and preemption are exactly what users run), and folds the outcome
back into the manifests (bound pods get `spec.nodeName`, preemption victims disappear) so that
the next step starts from the state the cluster would be in. Objects get increasing creation
timestamps in the order a test creates them, because queue order depends on them.

The objects themselves are built by tests/conformance/objects.py (re-exported here, so a test
imports everything it needs from this module).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from gangsched.cli import main
from gangsched.core.api.dialects import api_group
from gangsched.simulate.documents import KNOWN_KINDS
from tests.conformance.objects import (
    EPOCH,
    HOSTNAME,
    NAMESPACE,
    SIGS_API,
    SIGS_LABEL,
    UPSTREAM_API,
    X_K8S_API,
    X_K8S_LABEL,
    Manifest,
    composite_group,
    coscheduling_group,
    node,
    pdb,
    pod,
    priority_class,
    upstream_group,
    workload,
)

#: The objects are re-exported: tests import everything from this module.
__all__ = [
    "EPOCH",
    "HOSTNAME",
    "NAMESPACE",
    "SIGS_API",
    "SIGS_LABEL",
    "UPSTREAM_API",
    "X_K8S_API",
    "X_K8S_LABEL",
    "Manifest",
    "composite_group",
    "coscheduling_group",
    "node",
    "pdb",
    "pod",
    "priority_class",
    "upstream_group",
    "workload",
]


# -- running ------------------------------------------------------------------------------------
@dataclass(slots=True)
class Outcome:
    """One `gangsched simulate -o json` answer, with lookups by pod name."""

    raw: dict[str, Any]
    namespace: str = NAMESPACE

    def _key(self, name: str) -> str:
        return name if "/" in name else f"{self.namespace}/{name}"

    @property
    def bound(self) -> dict[str, str]:
        return dict(self.raw["bound"])

    @property
    def preempted(self) -> set[str]:
        return set(self.raw["preempted"])

    @property
    def unschedulable(self) -> dict[str, str]:
        return dict(self.raw["unschedulable"])

    @property
    def waiting(self) -> dict[str, str]:
        """Pods held before the cycle (issue 19 item 5); absent from older outputs."""
        return dict(self.raw.get("waiting", {}))

    def nominated(self, name: str) -> str | None:
        value = self.raw["nominated"].get(self._key(name))
        return value if isinstance(value, str) else None

    def group(self, name: str) -> dict[str, Any]:
        return dict(self.raw["podGroups"][self._key(name)])


@dataclass(slots=True)
class Scenario:
    """A cluster built up step by step and scheduled by `gangsched simulate` between steps."""

    namespace: str = NAMESPACE
    #: Extra `gangsched simulate` arguments (e.g. ["--preemption", "kep"]).
    args: list[str] = field(default_factory=list)
    #: Scheduler configuration (YAML text) passed with --config, if any.
    config: str | None = None
    objects: dict[tuple[str, str, str, str], Manifest] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    _clock: int = 0

    # -- building
    def create(self, *objects: Manifest | Iterable[Manifest]) -> Scenario:
        """Create objects in order, each one second after the previous (creationTimestamp)."""
        for item in objects:
            for given in [item] if isinstance(item, Mapping) else item:
                raw = copy.deepcopy(dict(given))
                meta = raw.setdefault("metadata", {})
                self._clock += 1
                meta.setdefault("creationTimestamp", _timestamp(self._clock))
                meta.setdefault("uid", f"uid-{raw['kind'].lower()}-{meta['name']}")
                key = _identity(raw)
                if key in self.objects:
                    raise ValueError(f"{key} created twice")
                self.objects[key] = raw
        return self

    def delete(self, *names: str, kind: str = "Pod") -> Scenario:
        """Delete objects of `kind` by name (pods by default), as a client would."""
        for name in names:
            matches = [key for key in self.objects if key[1] == kind and key[3] == name]
            if not matches:
                raise KeyError(f"no {kind} {name} to delete")
            for key in matches:
                del self.objects[key]
        return self

    def update(self, name: str, *, kind: str = "Pod", **changes: Any) -> Scenario:
        """Merge `changes` (top-level sections such as metadata, spec, status) into an object."""
        (key,) = [key for key in self.objects if key[1] == kind and key[3] == name]
        _merge(self.objects[key], changes)
        return self

    # -- reading the current state
    def pod(self, name: str) -> Manifest | None:
        """The pod called `name`, or "namespace/name"."""
        namespace, _, short = name.rpartition("/")
        for key, raw in self.objects.items():
            if key[1] == "Pod" and key[3] == short and (not namespace or key[2] == namespace):
                return raw
        return None

    def node_of(self, name: str) -> str | None:
        raw = self.pod(name)
        if raw is None:
            raise KeyError(f"pod {name} does not exist (preempted or deleted)")
        value = raw.get("spec", {}).get("nodeName")
        return value if isinstance(value, str) else None

    def exists(self, name: str) -> bool:
        return self.pod(name) is not None

    # -- running
    def settle(self) -> Outcome:
        """Run `gangsched simulate` until nothing changes and fold the result into the cluster."""
        outcome = Outcome(run_simulate(self._manifests(), args=self.args, config=self.config))
        outcome.namespace = self.namespace
        for key, node_name in outcome.bound.items():
            raw = self._pod_by_key(key)
            raw["spec"]["nodeName"] = node_name
            raw.setdefault("status", {})["phase"] = "Running"
        for key in outcome.preempted:
            raw = self._pod_by_key(key)
            del self.objects[_identity(raw)]
        for key, node_name in outcome.raw["nominated"].items():
            raw = self._pod_by_key(key, missing_ok=True)
            if raw is not None and not raw["spec"].get("nodeName"):
                raw.setdefault("status", {})["nominatedNodeName"] = node_name
        self.outcomes.append(outcome)
        return outcome

    def _pod_by_key(self, key: str, *, missing_ok: bool = False) -> Any:
        namespace, _, name = key.partition("/")
        raw = self.objects.get(("v1", "Pod", namespace, name))
        if raw is None and not missing_ok:
            raise KeyError(f"simulate reported pod {key}, which is not in the input")
        return raw

    def _manifests(self) -> list[Manifest]:
        return [raw for raw in self.objects.values() if _loader_reads(raw)]

    # -- assertions shared by the ported cases
    def assert_scheduled(self, *names: str) -> None:
        missing = [name for name in names if self.node_of(name) is None]
        assert not missing, f"not scheduled: {missing}; last outcome {self._last()}"

    def assert_pending(self, *names: str) -> None:
        bound = {name: self.node_of(name) for name in names if self.node_of(name) is not None}
        assert not bound, f"scheduled but should be pending: {bound}"

    def assert_unschedulable(self, *names: str) -> None:
        """Pending with PodScheduled=False/Unschedulable: tried by the cycle and failed."""
        self.assert_pending(*names)
        outcome = self.outcomes[-1]
        keys = [outcome._key(name) for name in names]
        absent = [key for key in keys if key not in outcome.unschedulable]
        assert not absent, f"not reported unschedulable: {absent}; last outcome {self._last()}"
        held = [key for key in keys if key in outcome.waiting]
        assert not held, f"reported waiting, expected unschedulable: {held}"

    def assert_waiting(self, *names: str) -> None:
        """Held before the cycle (upstream's PreEnqueue gate): pending, no Unschedulable."""
        self.assert_pending(*names)
        outcome = self.outcomes[-1]
        keys = [outcome._key(name) for name in names]
        absent = [key for key in keys if key not in outcome.waiting]
        assert not absent, f"not reported waiting: {absent}; last outcome {self._last()}"
        marked = [key for key in keys if key in outcome.unschedulable]
        assert not marked, f"waiting pods must not be reported unschedulable: {marked}"

    def assert_removed(self, *names: str) -> None:
        alive = [name for name in names if self.exists(name)]
        assert not alive, f"still present, expected preempted: {alive}"

    def assert_nodes(self, expected: Mapping[str, str]) -> None:
        actual = {name: self.node_of(name) for name in expected}
        assert actual == dict(expected)

    def assert_group_scheduled(self, name: str) -> None:
        """PodGroupInitiallyScheduled=True/Scheduled: minCount (or, basic, one) pods placed."""
        entry = self.outcomes[-1].group(name)
        assert entry["scheduled"] >= entry["minMember"], entry
        _assert_condition(entry, status="True", reason="Scheduled")

    def assert_group_unschedulable(self, name: str) -> None:
        """PodGroupInitiallyScheduled=False/Unschedulable after a failed attempt."""
        entry = self.outcomes[-1].group(name)
        assert entry["scheduled"] < entry["minMember"], entry
        assert entry["message"], f"no reason given for {name}: {entry}"
        _assert_condition(entry, status="False", reason="Unschedulable")

    def _last(self) -> dict[str, Any]:
        if not self.outcomes:
            return {}
        raw = dict(self.outcomes[-1].raw)
        raw.pop("timeline", None)
        return raw


def _assert_condition(entry: Mapping[str, Any], *, status: str, reason: str) -> None:
    """Checks the PodGroup condition where simulate reports conditions (issue 19 item 6)."""
    conditions = entry.get("conditions")
    if conditions is None:
        return
    types = {"PodGroupInitiallyScheduled", "PodGroupScheduled"}
    found = [c for c in conditions if c.get("type") in types]
    assert found, f"no scheduling condition in {conditions}"
    assert (found[0].get("status"), found[0].get("reason")) == (status, reason), found[0]


def run_simulate(
    manifests: list[Manifest], *, args: Iterable[str] = (), config: str | None = None
) -> dict[str, Any]:
    """`gangsched simulate FILE -o json [args]` in-process; a non-zero exit fails the case."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as directory:
        path = Path(directory) / "cluster.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
        argv = ["simulate", str(path), "-o", "json", *args]
        if config is not None:
            config_path = Path(directory) / "config.yaml"
            config_path.write_text(config)
            argv += ["--config", str(config_path)]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    assert code == 0, f"gangsched simulate exited {code}: {err.getvalue()}"
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def simulate_problems(manifests: list[Manifest]) -> list[str]:
    """The problems `gangsched simulate` reports for input it refuses (exit status 2)."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as directory:
        path = Path(directory) / "cluster.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["simulate", str(path), "-o", "json"])
    assert code == 2, f"gangsched simulate accepted the input (exit {code}): {out.getvalue()[:500]}"
    return err.getvalue().splitlines()


def _loader_reads(raw: Manifest) -> bool:
    """Workload objects go to simulate once it reads them (issue 19 item 6); kube-scheduler
    ignores them when placing pods, so leaving them out changes no outcome meanwhile."""
    group = api_group(str(raw.get("apiVersion", "")))
    return raw.get("kind") != "Workload" or (group, "Workload") in KNOWN_KINDS


def _identity(raw: Manifest) -> tuple[str, str, str, str]:
    meta = raw["metadata"]
    return (str(raw["apiVersion"]), raw["kind"], meta.get("namespace", ""), meta["name"])


def _timestamp(seconds: int) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(target: dict[str, Any], changes: Mapping[str, Any]) -> None:
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


# -- the shape of upstream's table-driven preemption tests ---------------------------------------
def preemption_case(
    *,
    nodes: Iterable[Manifest],
    groups: Iterable[Manifest],
    initial: Iterable[Manifest],
    preemptors: Iterable[Manifest],
    scheduled: Iterable[str],
    candidates: Iterable[str] = (),
    preempted: int = 0,
    unschedulable: Iterable[str] = (),
    nominated: Iterable[str] = (),
    pdbs: Iterable[Manifest] = (),
    regroup: bool = False,
    remove: Iterable[tuple[str, str]] = (),
    args: Iterable[str] = (),
) -> Scenario:
    """Upstream's preemption table row: nodes, PDBs and groups, then the initial pods (scheduled
    first), then the preemptors; `regroup` first deletes the groups and recreates them once all
    preemptors exist (upstream's tempRemovePG: every preemptor is tried in one cycle);
    `remove` lists (kind, name) objects deleted once the initial pods run.

    Checks: `scheduled` are bound, `unschedulable` are not; exactly `preempted` pods are gone and
    all of them are among `candidates`; `nominated` got a nominated node on the way.
    """
    sc = Scenario(args=list(args))
    groups = list(groups)
    initial = list(initial)
    sc.create(nodes, pdbs, groups, initial)
    sc.settle()
    sc.assert_scheduled(*(raw["metadata"]["name"] for raw in initial))
    first = len(sc.outcomes)
    for kind, name in remove:
        sc.delete(name, kind=kind)
    if regroup:
        for raw in groups:
            sc.delete(raw["metadata"]["name"], kind=raw["kind"])
        sc.create(preemptors)
        sc.settle()
        sc.create(groups)
    else:
        sc.create(preemptors)
    sc.settle()
    if unschedulable := list(unschedulable):
        sc.assert_unschedulable(*unschedulable)
    sc.assert_scheduled(*scheduled)
    gone = sorted(
        raw["metadata"]["name"] for raw in initial if not sc.exists(raw["metadata"]["name"])
    )
    allowed = set(candidates)
    assert set(gone) <= allowed, f"preempted {gone}, only {sorted(allowed)} may be"
    assert len(gone) == preempted, f"preempted {gone}, expected {preempted} of {sorted(allowed)}"
    given = {
        key.partition("/")[2]
        for outcome in sc.outcomes[first:]
        for key, node_name in outcome.raw["nominated"].items()
        if node_name
    }
    missing = sorted(set(nominated) - given)
    assert not missing, f"no nominated node for {missing}"
    return sc


# -- cases run under both preemption strategies --------------------------------------------------
STRATEGIES = ("kep", "mincost")
_F = TypeVar("_F", bound=Callable[..., None])


def fails_with(strategy: str, reason: str) -> Callable[[_F], _F]:
    """Strict expected failure of a case under one preemption strategy only (the `strategy`
    fixture in conftest.py applies it); the table in docs/conformance.md counts it with the
    strategy named."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy}")

    def mark(function: _F) -> _F:
        reasons = dict(getattr(function, "xfail_strategies", {}))
        reasons[strategy] = reason
        function.xfail_strategies = reasons  # type: ignore[attr-defined]
        return function

    return mark
