"""Issue 29 item 4 through the CLI: `gangsched simulate` on a rack-constrained gang with a member
already bound that needs preemption (tests/fixtures/manifests/topology-bound-member-preemption.yaml)
once printed a traceback (TypeError: unhashable type: 'numpy.ndarray') and left the gang
pending. Now the victim in the bound member's rack goes and the gang is scheduled there."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from gangsched.cli import main

MANIFESTS = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "manifests"
    / "topology-bound-member-preemption.yaml"
)


def simulate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", str(MANIFESTS), *args])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("strategy", ["kep", "mincost"])
def test_gang_with_a_bound_member_preempts_in_its_rack(strategy: str) -> None:
    code, out, err = simulate("--preemption", strategy, "-o", "json")
    assert code == 0, err
    assert "Traceback" not in out + err, err
    result = json.loads(out)
    assert sorted(result["preempted"]) == ["default/low-a"]
    assert result["bound"]["default/train-1"] == "a-1"
    assert result["podGroups"]["default/train"]["phase"] == "Scheduled"


def test_table_output_has_no_traceback() -> None:
    code, out, err = simulate()
    assert code == 0, err
    assert "Traceback" not in out + err, err
    assert "default/train   2     2           Scheduled" in out
