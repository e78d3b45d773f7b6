"""The demo's timeline (devtools/demo_timeline.py): it reads kubectl's watch output as it comes,
shows each step once, ends when the gang runs, and fails a run that did not show the preemption
before the bind."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from devtools.demo_timeline import Timeline, events, follow

MEMBERS = frozenset({"hp-worker-1", "hp-worker-2"})
VICTIMS = frozenset({"lp-pod-1", "lp-pod-2"})


def _pod(name: str, **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if fields.get("deleting"):
        meta["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    status: dict[str, Any] = {"phase": fields.get("phase", "Pending"), "conditions": []}
    if "nominated" in fields:
        status["nominatedNodeName"] = fields["nominated"]
    if fields.get("disrupted"):
        status["conditions"].append(
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        )
    spec = {"nodeName": fields["node"]} if "node" in fields else {}
    return {"metadata": meta, "spec": spec, "status": status}


def _event(kind: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": pod}


def _preemption(*, nominate: bool = True) -> list[dict[str, Any]]:
    """The watch as a working run delivers it: victims listed running, the gang created,
    victims marked and deleted, members nominated (unless told not to), bound, running."""
    seq = [_event("ADDED", _pod(v, node=f"n{v[-1]}", phase="Running")) for v in sorted(VICTIMS)]
    seq += [_event("ADDED", _pod(m)) for m in sorted(MEMBERS)]
    for v in sorted(VICTIMS):
        seq.append(_event("MODIFIED", _pod(v, node=f"n{v[-1]}", phase="Running", disrupted=True)))
        seq.append(
            _event(
                "MODIFIED",
                _pod(v, node=f"n{v[-1]}", phase="Running", disrupted=True, deleting=True),
            )
        )
    if nominate:
        seq += [_event("MODIFIED", _pod(m, nominated=f"n{m[-1]}")) for m in sorted(MEMBERS)]
    seq += [_event("DELETED", _pod(v, deleting=True)) for v in sorted(VICTIMS)]
    seq += [_event("MODIFIED", _pod(m, node=f"n{m[-1]}")) for m in sorted(MEMBERS)]
    seq += [_event("MODIFIED", _pod(m, node=f"n{m[-1]}", phase="Running")) for m in sorted(MEMBERS)]
    return seq


def _stream(seq: list[dict[str, Any]]) -> io.StringIO:
    # kubectl -o json prints each event indented over many lines.
    return io.StringIO("".join(json.dumps(e, indent=4) + "\n" for e in seq))


def test_events_are_decoded_from_indented_documents_across_lines() -> None:
    seq = _preemption()
    assert list(events(_stream(seq))) == seq


def test_a_run_that_preempts_then_binds_passes_and_shows_each_step_once(tmp_path: Path) -> None:
    out = io.StringIO()
    seq = _preemption()
    # Events after the gang runs are never read: the timeline stops there.
    seq.append(_event("MODIFIED", {"metadata": {"name": "hp-worker-1"}, "oops": True}))
    ready = tmp_path / "ready"
    timeline = Timeline(members=MEMBERS, victims=VICTIMS, out=out)
    assert follow(events(_stream(seq)), timeline, ready_file=ready) == []
    assert ready.exists()
    shown = out.getvalue().splitlines()
    facts = [line.split("  ", 2)[-1] for line in shown]
    # Nothing is shown before the gang exists (the victims' initial listing).
    assert facts[0].startswith("hp-worker-1")
    assert facts.index("lp-pod-1: terminating") < facts.index("hp-worker-1: nominated to n1")
    assert facts.index("hp-worker-1: nominated to n1") < facts.index("hp-worker-1: bound to n1")
    assert facts.count("hp-worker-1: nominated to n1") == 1
    assert facts[-1] == "hp-worker-2: Running"


def test_a_run_without_nomination_or_disruption_fails() -> None:
    seq = [e for e in _preemption(nominate=False) if e["object"]["metadata"]["name"] != "lp-pod-2"]
    timeline = Timeline(members=MEMBERS, victims=VICTIMS, out=io.StringIO())
    problems = follow(events(_stream(seq)), timeline)
    assert "member hp-worker-1 was never nominated before its bind" in problems
    assert "victim lp-pod-2 was never marked DisruptionTarget" in problems


def test_a_stream_that_ends_before_the_gang_runs_fails() -> None:
    seq = _preemption()[:-2]
    timeline = Timeline(members=MEMBERS, victims=VICTIMS, out=io.StringIO())
    assert follow(events(_stream(seq)), timeline) == [
        "hp-worker-1 is not running",
        "hp-worker-2 is not running",
    ]
