"""`make demo` itself (hack/demo.sh), run as a newcomer runs it, on its own control plane.

The demo once waited out two 60 s timeouts on a `nominatedNodeName` that gangsched had already
cleared by binding. Its step 3 is now a timeline read from a pod watch
(devtools/demo_timeline.py), which fails the demo unless the victims were marked
DisruptionTarget and the members nominated before their bind; this test checks the script
ends well and shows those steps in that order.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from devtools.processes import free_ports

from .conftest import REPO_ROOT

pytestmark = [pytest.mark.e2e]


def _facts(output: str) -> list[str]:
    """The timeline's lines ('  +1.23s  pod: fact'), as 'pod: fact'."""
    return [m.group(1) for m in re.finditer(r"^\s+\+\s*[\d.]+s\s+(.+)$", output, re.MULTILINE)]


def test_the_demo_shows_the_preemption_before_the_bind_and_ends(tmp_path: Path) -> None:
    etcd, peer, apiserver, kwok, metrics, health = free_ports(6)
    env = dict(os.environ)
    env.update(
        {
            "DEMO_CLUSTER_DIR": str(tmp_path / "cluster"),
            "DEMO_ETCD_PORT": str(etcd),
            "DEMO_ETCD_PEER_PORT": str(peer),
            "DEMO_APISERVER_PORT": str(apiserver),
            "DEMO_KWOK_PORT": str(kwok),
            "DEMO_METRICS_PORT": str(metrics),
            "DEMO_HEALTH_PORT": str(health),
        }
    )
    proc = subprocess.run(
        [str(REPO_ROOT / "hack" / "demo.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    facts = _facts(proc.stdout)
    for member in ("hp-worker-1", "hp-worker-2"):
        nominated = [i for i, f in enumerate(facts) if f.startswith(f"{member}: nominated to")]
        bound = [i for i, f in enumerate(facts) if f.startswith(f"{member}: bound to")]
        assert nominated and bound and nominated[0] < bound[0], facts
        assert f"{member}: Running" in facts, facts
    for victim in ("lp-pod-1", "lp-pod-2"):
        marked = [i for i, f in enumerate(facts) if f.startswith(f"{victim}: DisruptionTarget")]
        assert marked and facts.index(f"{victim}: deleted") > marked[0], facts
    assert "Done: the gang runs whole" in proc.stdout
    # Torn down: no process of the demo's control plane is left registered.
    assert not list((tmp_path / "cluster" / "pids").glob("*.pid"))
