"""One way of placing a tree, as the cycle and its searches build it up."""

from __future__ import annotations

from dataclasses import dataclass, field

from gangsched.core.framework import Diagnosis
from gangsched.core.model import GroupRef, Pod


@dataclass(slots=True)
class Attempt:
    """The state of one way of placing the tree: what is placed, what is satisfied, why not."""

    placements: list[tuple[Pod, int]] = field(default_factory=list)
    satisfied: dict[GroupRef, bool] = field(default_factory=dict)
    messages: dict[GroupRef, str] = field(default_factory=dict)
    pod_messages: dict[str, str] = field(default_factory=dict)
    failed_pod: Pod | None = None
    diagnosis: Diagnosis | None = None
