"""PodDisruptionBudgets: which pods they protect and how many may still be disrupted.

Preemption prefers victims whose eviction violates no budget. The API server's disruption
controller publishes `status.disruptionsAllowed`; manifests given to `gangsched simulate`
usually lack a status, so `compute_disruptions_allowed` recomputes it the controller's way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader
from gangsched.core.api.selectors import read_label_selector
from gangsched.core.api.types import RawPDB
from gangsched.core.labels import LabelSelector, Requirement
from gangsched.core.model import DisruptionBudget, Pod

_PERCENT = re.compile(r"^(\d+)%$")
#: policy/v1: a null selector selects no pods (an empty one selects all). `In` with no
#: values can never match, which keeps the model's selector non-optional.
SELECTS_NOTHING = LabelSelector(match_expressions=(Requirement("", "In", ()),))


def _read_int_or_percent(r: Reader, raw: Any, field: str) -> int | str | None:
    """An int, or a percentage kept as its "N%" string; None when absent or invalid."""
    if raw is None:
        return None
    if isinstance(raw, str):
        match = _PERCENT.match(raw.strip())
        if match is None:
            r.add(field, f'{show(raw)} must be an integer or a percentage such as "50%"')
            return None
        if int(match[1]) > 100:
            r.add(field, f"{show(raw)} must not exceed 100%")
            return None
        return raw.strip()
    return r.integer(raw, field, minimum=0)


def _read_budget_spec(r: Reader) -> tuple[int | str | None, int | str | None]:
    spec = r.mapping(r.raw.get("spec"), "spec")
    min_available = _read_int_or_percent(r, spec.get("minAvailable"), "spec.minAvailable")
    max_unavailable = _read_int_or_percent(r, spec.get("maxUnavailable"), "spec.maxUnavailable")
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        r.add("spec", "minAvailable and maxUnavailable cannot be both set")
    return min_available, max_unavailable


def _scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with roundUp, as the disruption controller uses."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * total / 100)


def pdb_from_raw(raw: RawPDB | dict[str, Any]) -> DisruptionBudget:
    """The budget with the controller's `status.disruptionsAllowed`, or 0 when not reported.

    Callers holding the pods should use `compute_disruptions_allowed` when the raw object has
    no status (see `has_reported_disruptions`).
    """
    r = Reader.for_object("PodDisruptionBudget", raw, namespaced=True)
    spec = r.mapping(r.raw.get("spec"), "spec")
    selector = read_label_selector(r, spec.get("selector"), "spec.selector")
    _read_budget_spec(r)
    status = r.mapping(r.raw.get("status"), "status")
    allowed = r.integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed", minimum=0)
    r.done()
    return DisruptionBudget(
        namespace=r.namespace,
        name=r.name,
        selector=selector if selector is not None else SELECTS_NOTHING,
        disruptions_allowed=allowed or 0,
    )


def has_reported_disruptions(raw: RawPDB | Mapping[str, Any]) -> bool:
    status = raw.get("status")
    return isinstance(status, Mapping) and status.get("disruptionsAllowed") is not None


def compute_disruptions_allowed(
    pdb_raw: RawPDB | dict[str, Any], *, matching_pods: Sequence[Pod]
) -> int:
    """How many of `matching_pods` may be disrupted now, as the disruption controller computes.

    `matching_pods` are the healthy pods the budget selects (the caller picks them: same
    namespace, selected, bound, not terminating). Their count stands in for the owning
    controllers' scale, which a manifest does not carry.
    """
    r = Reader.for_object("PodDisruptionBudget", pdb_raw, namespaced=True)
    min_available, max_unavailable = _read_budget_spec(r)
    r.done()
    healthy = expected = len(matching_pods)
    if max_unavailable is not None:
        desired = max(0, expected - _scaled(max_unavailable, expected))
    elif min_available is not None:
        desired = _scaled(min_available, expected)
    else:
        return 0  # the controller's expectedCount is 0 without either field
    if expected <= 0:
        return 0
    return max(0, healthy - desired)
