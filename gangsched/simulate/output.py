"""Rendering a simulation: JSON/YAML for tools, tables and a timeline for people."""

from __future__ import annotations

import json
from collections.abc import Sequence

import yaml

from gangsched.simulate.runner import SimulationResult


def render(result: SimulationResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(result.as_dict(), indent=2) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(result.as_dict(), sort_keys=False, width=120)
    return render_table(result)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["   ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _status(result: SimulationResult, key: str) -> str:
    if key in result.preempted:
        return "Preempted"
    if key in result.bound:
        return "Bound"
    if key in result.unschedulable:
        return "Pending"
    if key in result.gated:
        return "SchedulingGated"
    if key in result.waiting:
        return "Waiting"
    return "Running" if key in result.running_at_start else "Pending"


def render_table(result: SimulationResult) -> str:
    out: list[str] = []
    rows = []
    for key, pod in sorted(result.pods.items()):
        node = result.bound.get(key) or pod.node_name or "<none>"
        if key in result.preempted:
            node = "<none>"
        rows.append(
            [
                pod.namespace,
                pod.name,
                _status(result, key),
                node,
                result.nominated.get(key, "<none>"),
                pod.group.name if pod.group else "<none>",
                str(pod.priority),
            ]
        )
    out.append(
        _table(["NAMESPACE", "NAME", "STATUS", "NODE", "NOMINATED NODE", "GROUP", "PRIORITY"], rows)
    )
    if result.pod_groups:
        out.append("")
        out.append(
            _table(
                ["PODGROUP", "MIN", "SCHEDULED", "PHASE", "MESSAGE"],
                [
                    [key, str(g.min_member), str(g.scheduled), g.phase, g.message]
                    for key, g in sorted(result.pod_groups.items())
                ],
            )
        )
    if result.preempted:
        out.append("")
        out.append("Preemption victims (DisruptionTarget condition, reason PreemptionByScheduler):")
        for key, message in sorted(result.preempted.items()):
            out.append(f"  {key}: {message}")
    if result.unschedulable:
        out.append("")
        out.append("Unschedulable:")
        for key, message in sorted(result.unschedulable.items()):
            out.append(f"  {key}: {message}")
    if result.waiting:
        out.append("")
        out.append("Waiting (held before the cycle, not unschedulable):")
        for key, message in sorted(result.waiting.items()):
            out.append(f"  {key}: {message}")
    if result.gated:
        out.append("")
        out.append("Scheduling gates (never attempted until they are removed):")
        for key, gates in sorted(result.gated.items()):
            out.append(f"  {key}: {', '.join(gates)}")
    out.append("")
    out.append("Timeline:")
    for step in result.timeline:
        line = f"  {step.number:>3}. {step.gang}: {step.result}"
        if step.strategy:
            line += f" [{step.strategy}]"
        details = []
        if step.bound:
            details.append("bound " + ", ".join(f"{p} -> {n}" for p, n in step.bound))
        if step.preempted:
            details.append("preempted " + ", ".join(step.preempted))
        nominated = [f"{p} -> {n}" for p, n in step.nominated if n]
        if nominated:
            details.append("nominated " + ", ".join(nominated))
        if not details and step.message:
            details.append(step.message)
        out.append(line + (" - " + "; ".join(details) if details else ""))
    return "\n".join(out) + "\n"
