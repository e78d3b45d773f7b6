"""`gangsched explain` offline, on manifests: the dry run's verdict, reasons and victims, and
the command's output and exit codes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangsched.cli import main
from gangsched.core.cluster import ClusterState
from gangsched.core.preemption import build_preemptor
from gangsched.explain import NOTHING_PENDING, Explanation, NotFound, explain, render
from gangsched.explain.sources import from_manifests
from tests.builders import kubeconfig_file, raw_node, raw_pod, raw_pod_group, raw_priority_class

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SEED = str(EXAMPLES / "seed-walkthrough.yaml")


def load(*paths: str | Path) -> ClusterState:
    return from_manifests([str(p) for p in paths], scheduler_name="gangsched")


def run(
    paths: Sequence[str | Path], target: str, *, preemption: bool = True, **kw: Any
) -> Explanation:
    namespace, name = target.split("/")
    preemptor = build_preemptor() if preemption else None
    return explain(load(*paths), namespace, name, preemptor=preemptor, strategy="mincost", **kw)


def write(tmp_path: Path, docs: list[dict[str, Any]]) -> Path:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


# ------------------------------------------------------------------------------- analysis
def test_seed_gang_needs_preemption_and_names_victims_and_nominations() -> None:
    e = run([SEED], "default/hp-training-job")
    assert e.kind == "PodGroup"
    assert e.result == "waiting_on_preemption"
    [group] = e.groups
    assert (group.min_member, group.present, group.pending, group.missing) == (2, 2, 2, 0)
    assert group.schedule_timeout_seconds == 300
    assert [f.pod for f in e.unplaced] == ["default/hp-worker-1", "default/hp-worker-2"]
    assert e.unplaced[0].reasons == {"Insufficient cpu": 2}
    assert e.unplaced[0].message == "0/2 nodes are available: 2 Insufficient cpu."
    assert e.preemption is not None and e.preemption.would_help
    assert sorted(v.pod for v in e.preemption.victims) == ["default/lp-pod-1", "default/lp-pod-2"]
    assert sorted(e.preemption.nominations) == ["default/hp-worker-1", "default/hp-worker-2"]
    assert set(e.preemption.nominations.values()) == {"cn-beijing.1", "cn-beijing.2"}
    assert e.status is None and e.events == []  # offline


def test_a_member_pod_explains_its_group() -> None:
    e = run([SEED], "default/hp-worker-2")
    assert e.kind == "Pod"
    assert e.gang.key == "default/hp-training-job"
    assert any("belongs to the scheduling.sigs.k8s.io PodGroup" in n for n in e.notes)
    with pytest.raises(NotFound, match="no PodGroup default/hp-worker-2"):
        run([SEED], "default/hp-worker-2", kind="podgroup")


def test_bound_lone_pod_and_unknown_names() -> None:
    e = run([SEED], "default/lp-pod-1")
    assert e.result == NOTHING_PENDING
    assert e.message == "the pod is bound to cn-beijing.1"
    with pytest.raises(NotFound, match="no PodGroup or pod default/missing"):
        run([SEED], "default/missing")


def test_without_preemption_the_gang_is_unschedulable_and_says_preemption_is_off() -> None:
    e = run([SEED], "default/hp-training-job", preemption=False)
    assert e.result == "unschedulable"
    assert e.preemption is not None and not e.preemption.enabled
    assert "off" in e.preemption.message


def test_a_gang_that_fits_lists_its_placements() -> None:
    e = run([EXAMPLES / "gang-no-deadlock.yaml"], "default/a")
    assert e.result == "scheduled"
    assert sorted(e.placements) == ["default/a-1", "default/a-2", "default/a-3"]
    assert not e.unplaced and e.preemption is None


def test_waiting_for_members_counts_the_missing(tmp_path: Path) -> None:
    path = write(tmp_path, [raw_node("n1"), raw_pod_group("g", 3), raw_pod("g-0", "1", group="g")])
    e = run([path], "default/g")
    assert e.result == "waiting"
    [group] = e.groups
    assert (group.present, group.missing) == (1, 2)
    assert e.preemption is not None and "waits for members" in e.preemption.message
    assert "waiting for 2 more" in render(e, "table")


def test_finished_members_are_not_counted_as_present(tmp_path: Path) -> None:
    docs = [
        raw_node("n1"),
        raw_pod_group("g", 2),
        raw_pod("g-0", "1", group="g", node_name="n1", phase="Succeeded"),
        raw_pod("g-1", "1", group="g", node_name="n1", phase="Failed"),
        raw_pod("g-2", "1", group="g"),
    ]
    e = run([write(tmp_path, docs)], "default/g")
    assert e.result == "waiting"
    [group] = e.groups
    assert (group.bound, group.pending, group.missing) == (0, 1, 1)
    states = {m.pod: m.state for m in e.members}
    assert states == {
        "default/g-0": "succeeded",
        "default/g-1": "failed",
        "default/g-2": "pending",
    }


def test_pods_naming_a_missing_pod_group(tmp_path: Path) -> None:
    path = write(tmp_path, [raw_node("n1"), raw_pod("x-0", "1", group="ghost")])
    e = run([path], "default/ghost")
    [group] = e.groups
    assert not group.exists
    assert e.result == "waiting"
    assert "not found" in e.message
    assert "NOT FOUND" in render(e, "table")


def test_unresolvable_reasons_and_preemption_cannot_help(tmp_path: Path) -> None:
    docs = [
        raw_priority_class("low", 10),
        raw_priority_class("high", 100),
        raw_node("n1", labels={"zone": "a"}),
        raw_node("n2", labels={"zone": "b"}),
        raw_pod("low-0", "4", node_name="n1", priorityClassName="low", scheduler="other"),
        raw_pod_group("g", 1),
        raw_pod("g-0", "1", group="g", priorityClassName="high", nodeSelector={"zone": "c"}),
    ]
    e = run([write(tmp_path, docs)], "default/g")
    assert e.result == "unschedulable"
    [fit] = e.unplaced
    assert fit.unresolvable_nodes == 2
    assert sum(fit.reasons.values()) == 2
    assert e.preemption is not None and e.preemption.attempted and not e.preemption.would_help
    assert e.preemption.message.startswith("preemption cannot help")
    assert "cannot help" in render(e, "table")


def test_victims_still_terminating_on_nominated_nodes(tmp_path: Path) -> None:
    docs = [
        raw_priority_class("low", 10),
        raw_priority_class("high", 100),
        raw_node("n1"),
        raw_pod(
            "victim",
            "4",
            node_name="n1",
            priorityClassName="low",
            scheduler="other",
            metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"},
        ),
        raw_pod_group("g", 1),
        raw_pod(
            "g-0",
            "2",
            group="g",
            priorityClassName="high",
            status={"nominatedNodeName": "n1"},
        ),
    ]
    e = run([write(tmp_path, docs)], "default/g")
    assert [v.pod for v in e.terminating_victims] == ["default/victim"]
    assert e.members[0].nominated_node == "n1"
    assert e.result == "waiting_on_preemption"
    assert e.preemption is not None and e.preemption.would_help and not e.preemption.victims
    assert "terminate" in e.preemption.message
    assert "still terminating" in render(e, "table")


def _targets(path: Path) -> list[str]:
    targets = []
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") in ("Pod", "PodGroup"):
            meta = doc["metadata"]
            targets.append(f"{meta.get('namespace', 'default')}/{meta['name']}")
    return targets


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_pod_and_group_of_every_example_is_explained(path: Path) -> None:
    for target in _targets(path):
        e = run([path], target)
        assert json.loads(render(e, "json"))["target"] == target
        assert render(e, "table").startswith(f"{e.kind} {target} ")
        if e.result != NOTHING_PENDING:
            # The verdict is the scheduler's: an unschedulable gang names a reason per
            # unplaced member, a scheduled one places at least minMember.
            if e.result == "scheduled":
                assert len(e.placements) >= sum(g.min_member - g.bound for g in e.groups)
            elif e.result in ("unschedulable", "waiting_on_preemption"):
                assert e.message


def test_demo_manifests_together() -> None:
    demo = sorted((EXAMPLES / "demo").glob("*.yaml"))
    e = run(demo, "default/hp-training-job")
    assert e.result == "waiting_on_preemption"
    assert len(e.preemption.victims if e.preemption else []) == 2


# -------------------------------------------------------------------------------- command
def test_command_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "default/hp-training-job", "-f", SEED]) == 0
    out = capsys.readouterr().out
    assert "PodGroup default/hp-training-job (from the manifests" in out
    assert "preemption would make room" in out
    assert "2  Insufficient cpu" in out
    assert "default/lp-pod-1   cn-beijing.1" in out
    assert main(["explain", "-n", "default", "hp-training-job", "-f", SEED, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["result"] == "waiting_on_preemption"
    assert data["groups"][0]["minMember"] == 2
    assert data["unschedulable"][0]["reasons"] == {"Insufficient cpu": 2}
    assert {v["pod"] for v in data["preemption"]["victims"]} == {
        "default/lp-pod-1",
        "default/lp-pod-2",
    }
    assert data["status"] is None and data["source"] == "manifests"


def test_command_preemption_off_and_kep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "default/hp-training-job", "-f", SEED, "--preemption", "off"]) == 0
    assert "Preemption: preemption is off" in capsys.readouterr().out
    assert main(["explain", "default/hp-training-job", "-f", SEED, "--preemption", "kep"]) == 0
    assert "Preemption (kep): would help" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["default/nope", "-f", SEED], 1, "no PodGroup or pod default/nope in"),
        (["default/lp-pod-1", "--kind", "podgroup", "-f", SEED], 1, "no PodGroup default/lp"),
        (["a/b/c", "-f", SEED], 2, "bad target 'a/b/c'"),
        (["x/y", "-n", "z", "-f", SEED], 2, "bad target 'x/y'"),
        (["default/x", "-f", "/nonexistent.yaml"], 2, "cannot read the file"),
        (["default/x", "-f", SEED, "--config", "/nonexistent.yaml"], 2, "cannot read"),
        (["default/x", "--kubeconfig", "/nonexistent/kubeconfig"], 2, "kubeconfig"),
    ],
)
def test_command_errors_are_one_line(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", *argv]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert message in lines[0]
    assert "Traceback" not in captured.err


def test_command_bad_manifest_is_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n")
    assert main(["explain", "default/p", "-f", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "bad.yaml" in err


def test_command_unreachable_cluster_is_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = kubeconfig_file(tmp_path / "kubeconfig", server="http://127.0.0.1:1")
    assert main(["explain", "default/x", "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the API server" in err, err


def test_members_beyond_the_quorum_are_explained_with_their_preemption(tmp_path: Path) -> None:
    docs = [
        raw_node("n1", 2),
        raw_priority_class("high", 100),
        raw_priority_class("low", 10),
        raw_pod_group("g", 1, priority_class="high"),
        raw_pod("g-0", "1", group="g", node_name="n1", priorityClassName="high"),
        raw_pod("low", "1", node_name="n1", priorityClassName="low", scheduler="default"),
        raw_pod("g-1", "1", group="g", priorityClassName="high"),
    ]
    e = run([write(tmp_path, docs)], "default/g")
    assert e.result == "waiting_on_preemption"
    assert "minCount (1) is met: 1 scheduled" in e.message
    assert e.preemption is not None and e.preemption.would_help
    assert [v.pod for v in e.preemption.victims] == ["default/low"]
    assert e.preemption.nominations == {"default/g-1": "n1"}


def test_volume_reasons(tmp_path: Path) -> None:
    local_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "resources": {"requests": {"storage": "1Ti"}},
        },
    }
    volumes = [{"name": "d", "persistentVolumeClaim": {"claimName": "big"}}]
    missing = [{"name": "d", "persistentVolumeClaim": {"claimName": "nope"}}]
    docs = [
        raw_node("n1"),
        raw_node("n2"),
        local_class,
        claim,
        raw_pod_group("g", 2),
        raw_pod("g-0", "1", group="g", volumes=volumes),
        raw_pod("g-1", "1", group="g", volumes=missing),
    ]
    e = run([write(tmp_path, docs)], "default/g")
    assert e.result == "unschedulable"
    messages = {fit.pod: fit.message for fit in e.unplaced}
    assert messages["default/g-0"] == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )
    assert messages["default/g-1"] == (
        '0/2 nodes are available: persistentvolumeclaim "nope" not found.'
    )
    text = render(e, "table")
    assert "didn't find available persistent volumes to bind" in text
    assert 'persistentvolumeclaim "nope" not found' in text
