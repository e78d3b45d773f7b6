"""The unschedulable message of a constrained gang: one line per class of failing domain.

A user who asked for one rack and got nothing wants to know what kind of rack is missing,
not a list of forty: "3 racks too small (at most 6 of the 8 pods needed fit: r1, r2, r3);
2 racks lack nvidia.com/gpu (r4, r5)". Domains are grouped by the cause of their failure
without their own figures, and named with the label's last word ("rack" for
example.com/rack), as a person would count them.
"""

from __future__ import annotations

from collections.abc import Sequence

from gangsched.core.cycle import CycleResult
from gangsched.core.status import Code
from gangsched.core.topology.domain_filter import is_domain_reason
from gangsched.core.topology.domains import Domain
from gangsched.core.topology.report import (
    FEASIBLE,
    FILTERED,
    INFEASIBLE,
    LACKS,
    NOT_EVALUATED,
    TOO_SMALL,
    DomainTrial,
    TopologyReport,
)

#: Domain names shown per line of the message at most.
SHOWN = 3


def skip(report: TopologyReport, names: Sequence[str], why: str) -> None:
    """Record the domains the search ended before (not evaluated, and why)."""
    for name in names:
        report.trials.append(DomainTrial(name, NOT_EVALUATED, why, cause=why))


def failure_reason(result: CycleResult) -> str:
    """The most common reason the failing member fit nowhere in the domain."""
    if result.diagnosis is not None:
        fit = result.diagnosis.fit
        if fit.pre_filter:
            return fit.pre_filter
        reasons = [(n, r) for r, n in fit.reasons.items() if not is_domain_reason(r)]
        if reasons:
            return max(reasons, key=lambda item: (item[0], item[1]))[1]
    return "the members do not fit together"


def noun(key: str) -> str:
    """What one domain of `key` is called: the label's last word (rack, zone, block)."""
    word = key.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    return word or "domain"


def _count(number: int, word: str) -> str:
    return f"{number} {word}" if number == 1 else f"{number} {word}s"


def _line(
    outcome: str, cause: str, trials: Sequence[DomainTrial], word: str, need: int | None
) -> str:
    names = [t.domain for t in trials]
    shown = ", ".join(names[:SHOWN]) + (
        f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    )
    many = len(trials) != 1
    counted = _count(len(trials), word)
    if outcome == TOO_SMALL:
        most = max(t.placed for t in trials)
        of = f" of the {need} pod(s) needed" if need is not None else ""
        return f"{counted} too small (at most {most}{of} fit by free capacity: {shown})"
    if outcome == LACKS:
        return f"{counted} {'lack' if many else 'lacks'} {cause} ({shown})"
    if outcome == FILTERED:
        verb = "have" if many else "has"
        return f"{counted} {verb} no node the members may use: {cause} ({shown})"
    if outcome == INFEASIBLE:
        verb = "do" if many else "does"
        return f"{counted} {verb} not hold the members together: {cause} ({shown})"
    return f"{counted} not evaluated, {cause} ({shown})"


def level_message(
    *,
    keys: Sequence[str],
    options: Sequence[Sequence[Domain | None]],
    report: TopologyReport,
    pending: int,
    need: int | None,
) -> str:
    """The failure of one level: a line per (outcome, cause), the commonest first. `need`:
    the members that must fit in one domain (None when several classes of a GangGroup each
    need their own, and a figure per domain combination would mislead)."""
    names = {d.name for domains in options for d in domains if d is not None}
    word = noun(keys[0]) if len(keys) == 1 else "domain"
    classes: dict[tuple[str, str], list[DomainTrial]] = {}
    for trial in report.trials:
        if trial.outcome == FEASIBLE or not (set(trial.domain.split(" + ")) & names):
            continue
        classes.setdefault((trial.outcome, trial.cause), []).append(trial)
    order = (TOO_SMALL, LACKS, FILTERED, INFEASIBLE, NOT_EVALUATED)
    lines = [
        _line(outcome, cause, trials, word, need)
        for (outcome, cause), trials in sorted(
            classes.items(),
            key=lambda item: (-len(item[1]), order.index(item[0][0]), item[0][1]),
        )
    ]
    return (
        f"topology: no domain of {', '.join(keys)} fits the group "
        f"({_count(len(names), 'candidate')}, {pending} pending pod(s)): " + "; ".join(lines)
    )


def no_domain_message(missing: Sequence[str | None]) -> str:
    return f"topology: no node has the label {', '.join(str(k) for k in missing)}"


def unschedulable(summaries: Sequence[str], failure: CycleResult | None) -> CycleResult:
    """The gang's result once every level failed: each level's message, in the order tried."""
    result = failure or CycleResult(Code.UNSCHEDULABLE)
    result.code = Code.UNSCHEDULABLE
    result.message = "; then ".join(summaries) if summaries else "topology: no candidate domain"
    return result
