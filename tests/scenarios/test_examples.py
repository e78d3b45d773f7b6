"""The public acceptance scenarios (examples/) run through `gangsched simulate -o json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gangsched.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    code = main(["simulate", *args, "-o", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


@pytest.mark.parametrize("strategy", ["mincost", "kep"])
def test_seed_walkthrough(capsys: pytest.CaptureFixture[str], strategy: str) -> None:
    result = simulate(capsys, str(EXAMPLES / "seed-walkthrough.yaml"), "--preemption", strategy)
    assert set(result["preempted"]) == {"default/lp-pod-1", "default/lp-pod-2"}
    for message in result["preempted"].values():
        assert message.startswith(
            "gangsched: preempting to accommodate a higher priority pod group, "
            "preemptor: default/hp-training-job, triggerpod: default/hp-worker-"
        )
    bound = result["bound"]
    assert set(bound) == {"default/hp-worker-1", "default/hp-worker-2"}
    assert sorted(bound.values()) == ["cn-beijing.1", "cn-beijing.2"]
    assert set(result["nominated"]) == {"default/hp-worker-1", "default/hp-worker-2"}
    assert result["unschedulable"] == {}
    group = result["podGroups"]["default/hp-training-job"]
    assert group["minMember"] == 2 and group["scheduled"] == 2 and group["phase"] == "Scheduled"


@pytest.mark.parametrize("strategy", ["mincost", "kep"])
def test_full_preemption(capsys: pytest.CaptureFixture[str], strategy: str) -> None:
    result = simulate(capsys, str(EXAMPLES / "wap-full-preemption.yaml"), "--preemption", strategy)
    assert set(result["preempted"]) == {"default/low-1", "default/low-2", "default/low-3"}
    assert set(result["bound"]) == {"default/high-1", "default/high-2", "default/high-3"}


def test_no_deadlock(capsys: pytest.CaptureFixture[str]) -> None:
    result = simulate(capsys, str(EXAMPLES / "gang-no-deadlock.yaml"))
    groups = {key.split("/")[1][0] for key in result["bound"]}
    assert len(groups) == 1, "exactly one gang is bound"
    assert len(result["bound"]) == 3
    assert len(result["unschedulable"]) == 3
    assert result["preempted"] == {}, "equal priority never preempts"
    phases = sorted(g["scheduled"] for g in result["podGroups"].values())
    assert phases == [0, 3]


@pytest.mark.parametrize("strategy", ["mincost", "kep"])
def test_victim_group_in_all_mode_goes_whole(
    capsys: pytest.CaptureFixture[str], strategy: str
) -> None:
    result = simulate(capsys, str(EXAMPLES / "wap-victim-all-mode.yaml"), "--preemption", strategy)
    assert set(result["preempted"]) == {"default/v-1", "default/v-2", "default/v-3"}
    assert result["bound"] == {"default/preemptor": "n1"}


@pytest.mark.parametrize("strategy", ["mincost", "kep"])
def test_pdb_protected_pods_are_spared(capsys: pytest.CaptureFixture[str], strategy: str) -> None:
    result = simulate(capsys, str(EXAMPLES / "wap-pdb-reprieve.yaml"), "--preemption", strategy)
    assert set(result["preempted"]) == {"default/low-3"}
    assert set(result["bound"]) == {"default/high-1", "default/high-2"}


def test_without_preemption_the_seed_gang_stays_pending(capsys: pytest.CaptureFixture[str]) -> None:
    result = simulate(capsys, str(EXAMPLES / "seed-walkthrough.yaml"), "--preemption", "off")
    assert result["bound"] == {} and result["preempted"] == {}
    assert set(result["unschedulable"]) == {"default/hp-worker-1", "default/hp-worker-2"}
    assert "2 Insufficient cpu" in result["unschedulable"]["default/hp-worker-1"]


def test_table_output_lists_pods_groups_victims_and_timeline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", str(EXAMPLES / "seed-walkthrough.yaml")]) == 0
    out = capsys.readouterr().out
    assert "NOMINATED NODE" in out and "hp-worker-1" in out
    assert "Preempted" in out and "Timeline:" in out
    assert "PreemptionByScheduler" in out


def test_bad_input_exits_2_with_one_line_per_problem_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 'lots'}}\n"
        "---\napiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: g}\nspec: {minMember: 0}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "gangsched.cli", "simulate", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, proc.stderr
    assert any("Node n1" in line and "cpu" in line for line in lines)
    assert any("PodGroup default/g" in line and "minMember" in line for line in lines)


def test_bad_config_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("scoring:\n  strategy: Random\nbackof: {}\n")
    code = main(["simulate", str(EXAMPLES / "seed-walkthrough.yaml"), "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert "scoring.strategy" in err and "backof" in err


def test_local_pv_gang_binds_each_claim_to_the_pv_on_its_pods_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = simulate(capsys, str(EXAMPLES / "vol-local-pv-gang.yaml"))
    bound = result["bound"]
    assert set(bound) == {"default/w1", "default/w2"}
    assert sorted(bound.values()) == ["n2", "n3"]
    claim_of = {"default/w1": "default/data1", "default/w2": "default/data2"}
    for pod_key, node_name in bound.items():
        assert result["volumes"][claim_of[pod_key]] == {"volumeName": f"disk-{node_name}"}
    assert result["podGroups"]["default/job"]["phase"] == "Scheduled"


def test_gated_member_makes_the_gang_wait(capsys: pytest.CaptureFixture[str]) -> None:
    """/work/shared/scenarios/gates-gang-waits.yaml: nothing is bound, b is listed as gated
    with its gate, and neither pod is reported unschedulable (a waits, not unschedulable)."""
    result = simulate(capsys, str(EXAMPLES / "gates-gang-waits.yaml"))
    assert result["bound"] == {}
    assert result["gated"] == {"default/b": ["kueue.x-k8s.io/admission"]}
    assert result["unschedulable"] == {}
    assert set(result["waiting"]) == {"default/a"}
    assert "1 member gated: kueue.x-k8s.io/admission (b)" in result["waiting"]["default/a"]
    group = result["podGroups"]["default/job"]
    assert group["scheduled"] == 0 and group["phase"] == "Pending"
    assert "1 of minMember 2 pods bound or ungated" in group["message"]


def test_removing_the_gate_binds_the_gang_whole(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (EXAMPLES / "gates-gang-waits.yaml").read_text()
    ungated = tmp_path / "ungated.yaml"
    ungated.write_text(text.replace("  schedulingGates:\n  - name: kueue.x-k8s.io/admission\n", ""))
    result = simulate(capsys, str(ungated))
    assert result["bound"] == {"default/a": "n1", "default/b": "n1"}
    assert result["gated"] == {} and result["waiting"] == {} and result["unschedulable"] == {}


def test_pods_of_an_incomplete_or_missing_group_wait(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 19 item 5: held before the cycle, reported under "waiting", never unschedulable."""
    text = (EXAMPLES / "gates-gang-waits.yaml").read_text()
    path = tmp_path / "incomplete.yaml"
    # No gate, minMember 3, and a pod naming a PodGroup that does not exist.
    path.write_text(
        text.replace("  schedulingGates:\n  - name: kueue.x-k8s.io/admission\n", "").replace(
            "minMember: 2", "minMember: 3"
        )
        + "---\n"
        + text.split("---\n")[-1]
        .replace("name: b", "name: c")
        .replace("pod-group.scheduling.sigs.k8s.io: job", "pod-group.scheduling.sigs.k8s.io: ghost")
        .replace("  schedulingGates:\n  - name: kueue.x-k8s.io/admission\n", "")
    )
    result = simulate(capsys, str(path))
    assert result["bound"] == {} and result["unschedulable"] == {} and result["gated"] == {}
    assert set(result["waiting"]) == {"default/a", "default/b", "default/c"}
    assert "minMember 3 pods must exist" in result["waiting"]["default/a"]
    assert (
        result["waiting"]["default/c"] == "scheduling.sigs.k8s.io PodGroup default/ghost not found"
    )


def test_dra_two_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    result = simulate(capsys, str(EXAMPLES / "dra-two-gpus.yaml"))
    assert result["bound"] == {"default/trainer": "n2"}  # n1 has one GPU
    claim = result["claims"]["default/trainer-gpu"]
    assert claim["node"] == "n2"
    assert len(claim["devices"]) == 2
    assert {d["pool"] for d in claim["devices"]} == {"n2"}
    assert {d["driver"] for d in claim["devices"]} == {"gpu.example.com"}
    assert len({d["device"] for d in claim["devices"]}) == 2


def test_dra_explain_says_per_node_why_devices_do_not_fit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = tmp_path / "eight.yaml"
    manifest.write_text(
        (EXAMPLES / "dra-two-gpus.yaml").read_text().replace("count: 2", "count: 8")
    )
    result = simulate(capsys, str(manifest))
    assert result["bound"] == {} and result["claims"] == {}
    message = result["unschedulable"]["default/trainer"]
    assert "0/2 nodes are available" in message
    for free in ("1 of 1", "4 of 4"):
        assert (
            f"cannot allocate all claims (claim default/trainer-gpu: {free} device(s) free, "
            "8 needed)"
        ) in message
    code = main(["explain", "--kind", "pod", "-f", str(manifest), "trainer"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 of 1 device(s) free, 8 needed" in out
    assert "(2 of 2 node(s) cannot be fixed by preemption)" in out
