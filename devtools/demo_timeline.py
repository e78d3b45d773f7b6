"""The demo's step 3 as it happens: a timeline of the pods read from `kubectl get pods --watch`.

Why a watch and not `kubectl wait`: the steps of a preemption (victims marked DisruptionTarget
and terminating, the gang's members nominated, the victims gone, the members bound) can all
happen within a second on kwok, and gangsched clears `nominatedNodeName` when it binds, so a
`kubectl wait` for any one of them either sees it or waits out its timeout. The watch sees every
change in order; this prints each one as it arrives, with the seconds since the gang was
submitted, and exits once every member runs. It fails (exit 1) when the stream ends first or
when the run did not show what the demo is about: each victim marked DisruptionTarget before it
went, and each member nominated before it was bound.

    python -m devtools.demo_timeline --members hp-worker-1,hp-worker-2 \
        --victims lp-pod-1,lp-pod-2 --ready-file F \
        -- kubectl get pods --watch --output-watch-events -o json

It runs the watch command itself so that it can stop it once done. `--ready-file` is touched
once the watch has delivered its first event (the initial listing), so the caller applies the
gang only when nothing can be missed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

JSON = dict[str, Any]


def events(stream: Iterable[str]) -> Iterator[JSON]:
    """The JSON documents of kubectl's watch output, one per event, as soon as each is whole.

    kubectl prints each event as an indented JSON document, so the stream is read line by line
    and decoded whenever the text buffered so far holds a complete document."""
    decoder = json.JSONDecoder()
    buffer = ""
    for line in stream:
        buffer += line
        while True:
            text = buffer.lstrip()
            if not text:
                buffer = ""
                break
            try:
                event, end = decoder.raw_decode(text)
            except json.JSONDecodeError:
                break
            buffer = text[end:]
            if isinstance(event, dict):
                yield event


def _condition(pod: JSON, kind: str) -> JSON | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: JSON = cond
            return found
    return None


def facts(pod: JSON) -> list[str]:
    """What the demo shows of one pod, in the order it happens to a victim or a member."""
    spec, status, meta = pod.get("spec", {}), pod.get("status", {}), pod.get("metadata", {})
    shown: list[str] = []
    scheduled = _condition(pod, "PodScheduled")
    if not spec.get("nodeName") and scheduled and scheduled.get("status") == "False":
        shown.append(f"pending: {scheduled.get('reason')}: {scheduled.get('message', '')}")
    if status.get("nominatedNodeName"):
        shown.append(f"nominated to {status['nominatedNodeName']}")
    disruption = _condition(pod, "DisruptionTarget")
    if disruption and disruption.get("status") == "True":
        reason, message = disruption.get("reason"), disruption.get("message", "")
        shown.append(f"DisruptionTarget ({reason}): {message}")
    if meta.get("deletionTimestamp"):
        shown.append("terminating")
    if spec.get("nodeName"):
        shown.append(f"bound to {spec['nodeName']}")
    if status.get("phase") == "Running":
        shown.append("Running")
    return shown


@dataclass
class Timeline:
    """The facts seen per pod, printed once each, and what the demo requires of them."""

    members: frozenset[str]
    victims: frozenset[str]
    out: TextIO
    started: float | None = None
    seen: dict[str, list[str]] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)

    def _say(self, name: str, fact: str) -> None:
        # The clock starts with the gang's first member; what the victims were before that
        # (the watch's initial listing) is remembered, not shown.
        if self.started is not None:
            print(f"  +{time.monotonic() - self.started:5.2f}s  {name}: {fact}", file=self.out)
            self.out.flush()
        self.seen.setdefault(name, []).append(fact)

    def take(self, event: JSON) -> None:
        pod = event.get("object", {})
        name = pod.get("metadata", {}).get("name", "")
        if name not in self.members and name not in self.victims:
            return
        if name in self.members and self.started is None:
            self.started = time.monotonic()
        if event.get("type") == "DELETED":
            self._say(name, "deleted")
            return
        if name in self.members and "created" not in self.seen.get(name, []):
            self._say(name, "created")
        said = self.seen.get(name, [])
        for fact in facts(pod):
            if fact not in said:  # a new pending message is a new fact
                self._say(name, fact)
        if name in self.members and pod.get("status", {}).get("phase") == "Running":
            self.running.add(name)

    @property
    def done(self) -> bool:
        return self.running >= self.members

    def problems(self) -> list[str]:
        """What the run did not show: empty when the preemption was seen before the bind."""
        found = []
        for name in sorted(self.members - self.running):
            found.append(f"{name} is not running")
        for name in sorted(self.victims):
            said = self.seen.get(name, [])
            marked = [i for i, f in enumerate(said) if f.startswith("DisruptionTarget")]
            if not marked:
                found.append(f"victim {name} was never marked DisruptionTarget")
            elif "deleted" in said and said.index("deleted") < marked[0]:
                found.append(f"victim {name} went before it was marked DisruptionTarget")
        for name in sorted(self.members):
            said = self.seen.get(name, [])
            nominated = [i for i, f in enumerate(said) if f.startswith("nominated to")]
            bound = [i for i, f in enumerate(said) if f.startswith("bound to")]
            if not nominated:
                found.append(f"member {name} was never nominated before its bind")
            elif bound and bound[0] < nominated[0]:
                found.append(f"member {name} was bound before it was nominated")
        return found


def follow(
    stream: Iterable[JSON], timeline: Timeline, *, ready_file: Path | None = None
) -> list[str]:
    """Feed events until every member runs (or the stream ends); the problems found."""
    for event in stream:
        if ready_file is not None and not ready_file.exists():
            ready_file.touch()
        timeline.take(event)
        if timeline.done:
            break
    return timeline.problems()


def _names(text: str) -> frozenset[str]:
    return frozenset(name for name in text.split(",") if name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--members", required=True, help="the gang's pods, comma-separated")
    parser.add_argument("--victims", required=True, help="the pods to be preempted")
    parser.add_argument("--ready-file", type=Path, help="touched once the watch delivers")
    parser.add_argument("watch", nargs="+", help="the watch command, after --")
    args = parser.parse_args(argv)
    timeline = Timeline(members=_names(args.members), victims=_names(args.victims), out=sys.stdout)
    with subprocess.Popen(args.watch, stdout=subprocess.PIPE, text=True) as watch:
        assert watch.stdout is not None
        try:
            problems = follow(events(watch.stdout), timeline, ready_file=args.ready_file)
        finally:
            watch.terminate()
    for problem in problems:
        print(f"demo failed: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
