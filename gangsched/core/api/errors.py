"""Problems found in raw Kubernetes objects, reported the way a user can act on them.

Converters collect every problem of an object before failing, so one run of `gangsched
simulate` (or one log line of the informer) shows everything wrong with a manifest instead of
making the user fix it one field at a time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with one object, rendered as a single line."""

    kind: str
    namespace: str
    name: str
    field: str
    message: str
    #: Where the object came from (e.g. "cluster.yaml:12"); set by the manifest loader.
    source: str = ""

    @property
    def object_ref(self) -> str:
        name = self.name or "<unnamed>"
        ref = f"{self.namespace}/{name}" if self.namespace else name
        return f"{self.kind} {ref}" if self.kind else ref

    def __str__(self) -> str:
        parts = [self.source] if self.source else []
        if self.kind or self.name:
            parts.append(self.object_ref)
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)


class InvalidObject(ValueError):
    """A raw object the scheduler cannot use; `problems` lists everything found wrong with it."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


def show(value: Any) -> str:
    """Quote a user's value in messages as JSON would, so strings and numbers stay distinct."""
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):  # pragma: no cover - default=str renders everything
        return repr(value)
