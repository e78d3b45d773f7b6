"""`gangsched explain` lists the topology domains tried and why each failed."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from gangsched.cli import main
from tests.unit.topology.test_simulate import RACK, members, nodes


def explain(tmp_path: Path, text: str, *args: str) -> tuple[int, str]:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["explain", "-f", str(path), *args, "default/train"])
    return code, out.getvalue() + err.getvalue()


GROUP = f"""\
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: train}}
spec:
  schedulingPolicy: {{gang: {{minCount: 5}}}}
  schedulingConstraints: {{topology: [{{key: {RACK}}}]}}
"""
LAYOUT = {"a1": "ra", "a2": "ra", "b1": "rb", "b2": "rb", "b3": "rb", "c1": "rc"}


def test_json_lists_every_domain(tmp_path: Path) -> None:
    code, text = explain(tmp_path, nodes(LAYOUT) + GROUP + members("train", 5, ""), "-o", "json")
    assert code == 0, text
    data = json.loads(text)
    topology = data["topology"]
    assert topology["chosen"] == {"key": RACK, "value": "rb"}
    outcomes = {d["domain"]: d["outcome"] for d in topology["domains"]}
    assert outcomes == {
        f"{RACK}=rb": "feasible",
        f"{RACK}=ra": "too-small",
        f"{RACK}=rc": "too-small",
    }


def test_table_says_why_each_domain_failed(tmp_path: Path) -> None:
    group = GROUP.replace("minCount: 5", "minCount: 7")
    code, text = explain(tmp_path, nodes(LAYOUT) + group + members("train", 7, ""))
    assert code == 0, text
    assert "Verdict: unschedulable" in text
    assert "Topology (required topology.example.com/rack): 3 candidate domain(s)" in text
    assert "too small: at most 4 pod(s) fit by free capacity" in text
    assert "too small: at most 6 pod(s) fit by free capacity" in text
    assert "too small: at most 2 pod(s) fit by free capacity" in text
