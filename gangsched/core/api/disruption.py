"""The PodGroup annotations that tune gang protection and stale-gang release
(docs/concepts/gang-protection.md), read the same way for every dialect.

Annotations rather than spec fields because four of the five dialects' schemas are not ours:
an annotation can be put on a scheduler-plugins, upstream or Volcano PodGroup as it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child
from gangsched.core.model import PodGroup

#: "false" leaves a running gang without gangsched's PodDisruptionBudget; "true" protects it
#: even where the configuration's default is off.
PROTECTION_ANNOTATION = "gangsched.io/disruption-protection"
#: Seconds a running gang may stay below minMember before it is released whole, or "never".
GRACE_ANNOTATION = "gangsched.io/stale-gang-grace-seconds"
NEVER = "never"
#: The label on every PodDisruptionBudget gangsched owns (value "true"): preemption leaves
#: these out of its budget accounting (they guard gangs against others' evictions, not against
#: gangsched's own choice of victims), and the edge finds its own budgets by it.
BUDGET_LABEL = "gangsched.io/gang-protection"
_BOOLEANS = {"true": True, "false": False}


def is_gang_budget(raw: Mapping[str, Any]) -> bool:
    """Whether a raw PodDisruptionBudget is one of gangsched's own gang budgets."""
    metadata = raw.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return isinstance(labels, Mapping) and labels.get(BUDGET_LABEL) == "true"


def read_disruption_annotations(r: Reader, group: PodGroup) -> None:
    """Fill `group`'s protection and grace from its annotations; a bad value is a problem
    naming the annotation (the PodGroup is then reported, not scheduled with a guess)."""
    annotations = r.string_map(r.metadata.get("annotations"), "metadata.annotations")
    group.disruption_protection = _protection(r, annotations)
    group.stale_grace_seconds = _grace(r, annotations)


def _protection(r: Reader, annotations: Mapping[str, str]) -> bool | None:
    raw = annotations.get(PROTECTION_ANNOTATION)
    if raw is None:
        return None
    value = _BOOLEANS.get(raw.strip().lower())
    if value is None:
        field = child("metadata.annotations", PROTECTION_ANNOTATION)
        r.add(field, f'must be "true" or "false", got {show(raw)}')
    return value


def _grace(r: Reader, annotations: Mapping[str, str]) -> float | None:
    raw = annotations.get(GRACE_ANNOTATION)
    if raw is None:
        return None
    text = raw.strip()
    if text.lower() == NEVER:
        return math.inf
    if text.isdigit() and int(text) <= 10**9:
        return float(int(text))
    field = child("metadata.annotations", GRACE_ANNOTATION)
    r.add(field, f'must be a whole number of seconds (0 to 1000000000) or "never", got {show(raw)}')
    return None
