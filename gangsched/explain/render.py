"""`gangsched explain` output: a report for people, JSON for tools."""

from __future__ import annotations

import json
from collections.abc import Sequence

from gangsched.core.topology.report import TopologyReport
from gangsched.explain.report import (
    NOTHING_PENDING,
    Explanation,
    GroupMembers,
    PreemptionView,
    Victim,
)

_VERDICTS = {
    "scheduled": "would be scheduled now",
    "unschedulable": "unschedulable",
    "waiting": "waiting for members",
    "error": "invalid group",
    "waiting_on_preemption": "waiting on preemption",
    NOTHING_PENDING: "nothing to schedule",
}


def render(explanation: Explanation, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(explanation.as_dict(), indent=2) + "\n"
    return render_table(explanation)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return indent + "   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(headers), *(line(row) for row in rows)]


def _group_line(group: GroupMembers) -> str:
    if not group.exists:
        return (
            f"{group.ref.dialect.value} PodGroup {group.ref.key}: NOT FOUND "
            f"({group.pending} pending pod(s) name it)"
        )
    text = (
        f"{group.ref.key}: {group.present} of minMember {group.min_member} present "
        f"({group.bound} bound, {group.pending} pending"
    )
    if group.gated:
        text += f", {group.gated} gated"
    if group.foreign:
        text += f", {group.foreign} with another schedulerName"
    text += ")"
    if group.missing:
        text += f"; waiting for {group.missing} more"
    return text


def _victim_rows(victims: list[Victim]) -> list[list[str]]:
    return [[v.pod, v.node or "<none>", str(v.priority), v.group or "<none>"] for v in victims]


def _preemption_lines(view: PreemptionView) -> list[str]:
    title = "Preemption"
    if view.strategy:
        title += f" ({view.strategy})"
    if not view.enabled:
        return [f"{title}: {view.message}"]
    if not view.attempted:
        return [f"{title}: {view.message}"]
    if view.waiting_for_capacity_until is not None:
        out = [f"{title}: would help, after a wait for new capacity -- {view.message}"]
        return out + _table(["VICTIM", "NODE", "PRIORITY", "GROUP"], _victim_rows(view.victims))
    if view.would_help and view.victims:
        out = [f"{title}: would help -- {view.message}"]
        out += _table(["VICTIM", "NODE", "PRIORITY", "GROUP"], _victim_rows(view.victims))
        if view.nominations:
            out.append("  Nominations:")
            out += [f"    {pod} -> {node}" for pod, node in sorted(view.nominations.items())]
        return out
    if view.would_help:
        return [f"{title}: already under way -- {view.message}"]
    return [f"{title}: cannot help -- {view.message.removeprefix('preemption cannot help: ')}"]


def _topology_lines(report: TopologyReport, limit: int = 20) -> list[str]:
    chosen = f"; chosen {report.key}={report.value}" if report.key is not None else ""
    lines = [f"Topology ({report.request}{chosen}): {report.generated} candidate domain(s)"]
    rows = [
        [
            t.domain,
            t.outcome,
            "" if t.score is None else f"{t.score:.1f}",
            "" if t.score is None else str(t.placed),
            _one_line(t.reason, 100),
        ]
        for t in report.trials[:limit]
    ]
    lines += _table(["DOMAIN", "OUTCOME", "SCORE", "PLACED", "WHY"], rows)
    if len(report.trials) > limit:
        lines.append(f"  ... and {len(report.trials) - limit} more")
    return lines


def render_table(e: Explanation) -> str:
    out: list[str] = []
    source = "live cluster" if e.source == "cluster" else "manifests"
    out.append(f"{e.kind} {e.target} (from the {source}; dry run, nothing is changed)")
    if e.gang.dialect.value != "pod" or len(e.groups) > 1:
        for group in e.groups:
            extra = []
            if group.priority is not None:
                klass = f" ({group.priority_class_name})" if group.priority_class_name else ""
                extra.append(f"priority {group.priority}{klass}")
            if group.schedule_timeout_seconds is not None:
                extra.append(f"scheduleTimeoutSeconds {group.schedule_timeout_seconds}")
            suffix = f" [{', '.join(extra)}]" if extra else ""
            out.append(f"  {group.ref.dialect.value} {_group_line(group)}{suffix}")
    for note in e.notes:
        out.append(f"  note: {note}")
    if e.tree:
        out.append("")
        out.append("Tree (every level placed in one cycle, or nothing):")
        for level in e.tree:
            indent = "  " * (level.depth + 1)
            verdict = f": {level.result}" if level.result else ""
            out.append(f"{indent}{level.kind} {level.name} [{level.policy}]{verdict}")
            if level.message and level.result not in ("scheduled", ""):
                out.append(f"{indent}  {_one_line(level.message)}")

    if e.members:
        out.append("")
        out.append("Members:")
        rows = [
            [
                m.pod,
                f"{m.state} ({', '.join(m.gates)})" if m.gates else m.state,
                m.node or "<none>",
                m.nominated_node or "<none>",
                str(m.priority),
            ]
            for m in e.members
        ]
        out += _table(["POD", "STATE", "NODE", "NOMINATED NODE", "PRIORITY"], rows)

    out.append("")
    verdict = _VERDICTS.get(e.result, e.result)
    if e.result == "waiting_on_preemption":
        verdict = (
            "unschedulable now; preemption would make room (victims below)"
            if e.preemption is not None and e.preemption.victims
            else "waiting for the victims of an earlier preemption to terminate"
        )
    out.append(f"Verdict: {verdict}")
    if e.message:
        out.append(f"  {e.message}")
    if e.placements:
        out.append("  Would bind:")
        out += [f"    {pod} -> {node}" for pod, node in sorted(e.placements.items())]

    if e.topology is not None:
        out.append("")
        out += _topology_lines(e.topology)

    unplaced = e.unplaced
    if unplaced:
        out.append("")
        out.append(
            "Why members do not fit (scheduling order; members before each one assumed placed):"
        )
        for fit in unplaced:
            out.append(f"  {fit.pod}: {fit.message}")
            for reason, count in fit.reasons.items():
                out.append(f"    {count:>6}  {reason}")
            if fit.reasons and fit.unresolvable_nodes:
                out.append(
                    f"    ({fit.unresolvable_nodes} of {fit.nodes} node(s) cannot be fixed "
                    "by preemption)"
                )

    if e.preemption is not None:
        out.append("")
        out += _preemption_lines(e.preemption)
    if e.terminating_victims:
        out.append("")
        out.append("Victims of an earlier preemption still terminating on nominated nodes:")
        out += _table(["VICTIM", "NODE", "PRIORITY", "GROUP"], _victim_rows(e.terminating_victims))

    if e.status is not None:
        out.append("")
        out += _status_lines(e.status)
    if e.source == "cluster":
        out.append("")
        if e.events:
            out.append("Recent events (oldest first):")
            rows = [
                [
                    str(ev.get("age", "")),
                    str(ev.get("type", "")),
                    str(ev.get("reason", "")),
                    str(ev.get("object", "")),
                    _one_line(str(ev.get("note", ""))),
                ]
                for ev in e.events
            ]
            out += _table(["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"], rows)
        else:
            out.append("Recent events: none")
    return "\n".join(out) + "\n"


def _one_line(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _status_lines(status: dict[str, object]) -> list[str]:
    out = ["Status (as the API server holds it):"]
    fields = [
        f"{key} {status[key]}"
        for key in ("phase", "scheduled", "running", "succeeded", "failed", "nominatedNodeName")
        if status.get(key) not in (None, "")
    ]
    if status.get("scheduleStartTime"):
        fields.append(f"scheduleStartTime {status['scheduleStartTime']}")
    out.append("  " + (", ".join(fields) if fields else "(empty)"))
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        for cond in conditions:
            if isinstance(cond, dict):
                reason = f" ({cond.get('reason')})" if cond.get("reason") else ""
                message = f": {_one_line(str(cond.get('message')))}" if cond.get("message") else ""
                out.append(f"  {cond.get('type')}={cond.get('status')}{reason}{message}")
    return out
