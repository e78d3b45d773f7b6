"""Outcomes as values, after kube-scheduler's framework.Status: codes rather than exceptions."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum


class Code(StrEnum):
    SUCCESS = "Success"
    #: Could fit if something changed on the node (e.g. victims removed): preemption may help.
    UNSCHEDULABLE = "Unschedulable"
    #: No change on the node can help (selector, taint, node name): preemption skips the node.
    UNRESOLVABLE = "UnschedulableAndUnresolvable"
    #: The group waits: fewer members exist than minMember.
    WAIT = "Wait"
    #: The group is inconsistent (mixed schedulerName/priority/preemptionPolicy).
    ERROR = "SchedulerError"


@dataclass(slots=True)
class FitDiagnosis:
    """Why one pod fits on no node: reason histogram over the nodes it was checked against."""

    num_nodes: int
    reasons: Counter[str] = field(default_factory=Counter)
    #: Nodes rejected for reasons that removing pods cannot fix.
    unresolvable_nodes: int = 0
    #: A PreFilter rejection (e.g. a missing PVC): the pod fits nowhere, no node checked.
    pre_filter: str = ""

    def message(self) -> str:
        """kube-scheduler's FitError wording; reasons by count, most common first."""
        text = f"0/{self.num_nodes} nodes are available"
        if self.pre_filter:
            return f"{text}: {self.pre_filter}."
        if self.reasons:
            ranked = sorted(self.reasons.items(), key=lambda item: (-item[1], item[0]))
            text += ": " + ", ".join(f"{count} {reason}" for reason, count in ranked)
        return text + "."


@dataclass(slots=True)
class Status:
    code: Code
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @classmethod
    def success(cls) -> Status:
        return cls(Code.SUCCESS)
