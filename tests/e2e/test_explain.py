"""`gangsched explain` against a live cluster, with `gangsched run` scheduling it.

The command runs as a separate process (as a user would run it, and as `kubectl gangsched`):
it lists the cluster once, runs the core in a dry run and adds the PodGroup's status and
events written by the running scheduler. Pods with another schedulerName let a test ask
"would preemption help?" without the live scheduler acting on the answer first.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO_ROOT, Cluster
from .k8s import Kube, condition, wait_for
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .scene import SIGS, Scene

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

HIGH, LOW = "explain-high", "explain-low"
DRY = "explain-dry"  # a schedulerName nothing serves: explain with --scheduler-name DRY


def explain(
    *args: str,
    kubeconfig: Path | None = None,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = command or [sys.executable, "-m", "gangsched.cli"]
    extra = ["--kubeconfig", str(kubeconfig)] if kubeconfig is not None else []
    return subprocess.run(
        [*cmd, "explain", *args, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO_ROOT,
        env=env,
    )


async def explain_json(*args: str, kubeconfig: Path) -> dict[str, Any]:
    proc = await asyncio.to_thread(explain, *args, "-o", "json", kubeconfig=kubeconfig)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


async def populate(scene: Scene) -> None:
    """Two 4-CPU nodes, each 3/4 full of low-priority pods, and gangs that cannot fit."""
    await scene.start()
    await scene.victims_on_every_node("3", priority_class=LOW)
    # Can never fit: 8 CPUs per pod on 4-CPU nodes.
    await scene.gang("big", 2, "8", priority_class_name=HIGH)
    # A lone pod that cannot fit either.
    await scene.create_pod(scene.pod("lonely", "100", priority_class_name=HIGH))
    # Fits only if both victims go; its schedulerName keeps the live scheduler away.
    await scene.gang("hp", 2, "3", priority_class_name=HIGH, scheduler_name=DRY)


@pytest.fixture(scope="module")
async def scene(cluster: Cluster, gangsched: Gangsched) -> AsyncIterator[Scene]:  # noqa: F811
    kube = await Kube.from_kubeconfig(cluster.kubeconfig)
    s = Scene(kube, "explain", priority_classes={HIGH: 1_000_000, LOW: 1_000})
    try:
        await populate(s)
        # The live scheduler has reported on both: PodGroup condition and events.
        await kube.wait_for_object(
            f"/apis/{SIGS}/namespaces/{s.ns}/podgroups/big",
            # Unschedulable (not an earlier False saying the gang waits for its members).
            lambda g: (condition(g, "PodGroupScheduled") or {}).get("reason") == "Unschedulable",
            what="PodGroupScheduled=False/Unschedulable on big",
            timeout=90,
        )
        await wait_for(
            lambda: s.events("FailedScheduling", "PodGroup", "big"),
            timeout=60,
            what="FailedScheduling event on PodGroup big",
        )
        await wait_for(
            lambda: s.events("FailedScheduling", "Pod", "lonely"),
            timeout=60,
            what="FailedScheduling event on pod lonely",
        )
        # The pod's condition is written apart from its event: explain reads both.
        await kube.wait_for_object(
            f"/api/v1/namespaces/{s.ns}/pods/lonely",
            lambda p: (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable",
            what="PodScheduled=False/Unschedulable on pod lonely",
            timeout=60,
        )
        gangsched.assert_alive()
        yield s
    finally:
        try:
            await s.stop()
        finally:
            await kube.close()


# ---------------------------------------------------------------------------------- tests
async def test_unschedulable_gang_reasons_status_and_events(scene: Scene, cluster: Cluster) -> None:
    data = await explain_json(f"{scene.ns}/big", kubeconfig=cluster.kubeconfig)
    assert data["kind"] == "PodGroup" and data["source"] == "cluster"
    assert data["result"] == "unschedulable"
    [group] = data["groups"]
    assert (group["minMember"], group["present"], group["pending"], group["missing"]) == (
        2,
        2,
        2,
        0,
    )
    unschedulable = {entry["pod"]: entry for entry in data["unschedulable"]}
    assert set(unschedulable) == {f"{scene.ns}/big-0", f"{scene.ns}/big-1"}
    for entry in unschedulable.values():
        # Our two nodes lack CPU; every other node of the cluster fails the selector.
        assert entry["reasons"]["Insufficient cpu"] == 2
        assert sum(entry["reasons"].values()) == entry["nodes"]
    preemption = data["preemption"]
    assert preemption["attempted"] and not preemption["wouldHelp"]
    assert preemption["message"].startswith("preemption cannot help")
    scheduled = next(c for c in data["status"]["conditions"] if c["type"] == "PodGroupScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    reasons = {(e["reason"], e["object"]) for e in data["events"]}
    assert ("FailedScheduling", "PodGroup/big") in reasons

    table = await asyncio.to_thread(explain, f"{scene.ns}/big", kubeconfig=cluster.kubeconfig)
    assert table.returncode == 0, table.stderr
    for text in (
        f"PodGroup {scene.ns}/big (from the live cluster",
        "Verdict: unschedulable",
        "Insufficient cpu",
        "Preemption (mincost): cannot help",
        "PodGroupScheduled=False (Unschedulable)",
        "Recent events (oldest first):",
        "FailedScheduling",
    ):
        assert text in table.stdout, f"{text!r} not in:\n{table.stdout}"


async def test_preemption_that_would_help_names_victims_and_nominations(
    scene: Scene, cluster: Cluster
) -> None:
    data = await explain_json(
        f"{scene.ns}/hp", "--scheduler-name", DRY, kubeconfig=cluster.kubeconfig
    )
    assert data["result"] == "waiting_on_preemption"
    preemption = data["preemption"]
    assert preemption["wouldHelp"]
    assert {v["pod"] for v in preemption["victims"]} == {
        f"{scene.ns}/victim-0",
        f"{scene.ns}/victim-1",
    }
    assert set(preemption["nominations"]) == {f"{scene.ns}/hp-0", f"{scene.ns}/hp-1"}
    assert set(preemption["nominations"].values()) == set(scene.nodes)
    # A dry run: the victims are still there, untouched.
    pods = (await scene.kube.get(f"/api/v1/namespaces/{scene.ns}/pods"))["items"]
    victims = [p for p in pods if p["metadata"]["name"].startswith("victim-")]
    assert len(victims) == 2
    assert not any(p["metadata"].get("deletionTimestamp") for p in victims)
    assert not any(condition(p, "DisruptionTarget") for p in victims)


async def test_kubectl_plugin_runs_the_same_command(scene: Scene, cluster: Cluster) -> None:
    plugin = Path(sys.executable).with_name("kubectl-gangsched")
    assert plugin.exists(), f"{plugin} missing: reinstall the package (make venv)"
    env = {
        **os.environ,
        "PATH": f"{plugin.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(cluster.kubeconfig),
    }
    proc = await asyncio.to_thread(
        explain,
        f"{scene.ns}/hp",
        "--scheduler-name",
        DRY,
        "-o",
        "json",
        env=env,
        command=[str(cluster.kubectl_path), "gangsched"],
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["preemption"]["wouldHelp"]


async def test_lone_pod_is_its_own_group(scene: Scene, cluster: Cluster) -> None:
    data = await explain_json(f"{scene.ns}/lonely", kubeconfig=cluster.kubeconfig)
    assert data["kind"] == "Pod" and data["result"] == "unschedulable"
    [entry] = data["unschedulable"]
    assert entry["reasons"]["Insufficient cpu"] == 2
    scheduled = next(c for c in data["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "False"
    assert ("FailedScheduling", "Pod/lonely") in {
        (e["reason"], e["object"]) for e in data["events"]
    }
    # Asking about a member pod explains its group.
    data = await explain_json(f"{scene.ns}/big-1", kubeconfig=cluster.kubeconfig)
    assert data["kind"] == "Pod" and data["gang"]["name"] == f"{scene.ns}/big"


async def test_errors_are_one_line_with_the_right_status(
    scene: Scene, cluster: Cluster, tmp_path: Path
) -> None:
    proc = await asyncio.to_thread(explain, f"{scene.ns}/nope", kubeconfig=cluster.kubeconfig)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"gangsched explain: no PodGroup or pod {scene.ns}/nope in the cluster"
    )
    proc = await asyncio.to_thread(explain, "a/b/c", kubeconfig=cluster.kubeconfig)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1

    # A ServiceAccount with no RBAC at all: no access, one line, status 1.
    await scene.kube.create(
        f"/api/v1/namespaces/{scene.ns}/serviceaccounts", {"metadata": {"name": "nobody"}}
    )
    token = cluster.kubectl("-n", scene.ns, "create", "token", "nobody").stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    nobody = tmp_path / "nobody.kubeconfig"
    nobody.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": "nobody", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "nobody",
                        "context": {"cluster": admin["clusters"][0]["name"], "user": "nobody"},
                    }
                ],
                "current-context": "nobody",
            }
        )
    )
    proc = await asyncio.to_thread(explain, f"{scene.ns}/big", kubeconfig=nobody)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no access" in lines[0] and "403" in lines[0], proc.stderr
    assert proc.stdout == ""
