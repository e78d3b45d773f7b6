"""Koordinator's gang API: the annotations (and old lightweight labels) that define gangs.

Koordinator (pkg/scheduler/plugins/coscheduling, apis/extension/coscheduling.go) reads the same
keys from a scheduling.sigs.k8s.io PodGroup and from the pods of an annotation-only gang. Where
it meets an illegal value it logs and silently falls back to a default (Strict, the default
match policy, total-number = min-available, a GangGroup of the gang alone); gangsched refuses
the object instead, naming the field, so a typo does not quietly change how a gang is placed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from gangsched.core.api.dialects import (
    KOORDINATOR_GANG_GROUPS,
    KOORDINATOR_GANG_MODE,
    KOORDINATOR_MATCH_POLICY,
    KOORDINATOR_MATCH_POLICY_ALIAS,
    KOORDINATOR_MIN_AVAILABLE,
    KOORDINATOR_TOTAL_NUMBER,
    LIGHTWEIGHT_MIN_AVAILABLE,
)
from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, type_name
from gangsched.core.api.network_topology import read_gather_rules
from gangsched.core.model import GangAnnotations, GangMode, GroupRef, MatchPolicy

ANNOTATIONS = "metadata.annotations"
LABELS = "metadata.labels"
_MATCH_POLICIES = {policy.value: policy for policy in MatchPolicy}
_MODES = {mode.value: mode for mode in GangMode}


def read_annotation_gang(
    r: Reader, labels: Mapping[str, str], annotations: Mapping[str, str], own: GroupRef
) -> GangAnnotations:
    """A member of an annotation gang (named by annotation or lightweight label): its size
    from the lightweight min-available label, else the annotation; the rest from annotations."""
    if labels.get(LIGHTWEIGHT_MIN_AVAILABLE):
        min_available = read_count(
            r, labels[LIGHTWEIGHT_MIN_AVAILABLE], child(LABELS, LIGHTWEIGHT_MIN_AVAILABLE)
        )
    else:
        min_available = read_count(
            r,
            annotations.get(KOORDINATOR_MIN_AVAILABLE),
            child(ANNOTATIONS, KOORDINATOR_MIN_AVAILABLE),
        )
    return GangAnnotations(
        min_available=min_available,
        total_number=read_total_number(
            r, annotations, minimum=min_available, minimum_name="min-available"
        ),
        mode=read_mode(r, annotations),
        match_policy=read_match_policy(r, annotations),
        gang_group=read_gang_group(r, annotations, own),
        gather=read_gather_rules(r, annotations),
    )


def read_count(r: Reader, raw: str | None, field: str) -> int | None:
    """A whole number of pods, at least 1 (Koordinator parses it as a base-10 int32)."""
    if raw is None or raw == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        r.add(field, f"{show(raw)} must be a whole number of pods")
        return None
    if value < 1:
        r.add(field, f"must be at least 1, got {value}")
        return None
    if value > 2**31 - 1:
        r.add(field, f"must be at most {2**31 - 1}, got {value}")
        return None
    return value


def read_total_number(
    r: Reader, annotations: Mapping[str, str], *, minimum: int | None, minimum_name: str
) -> int | None:
    """total-number: how many members the gang expects; "" and "0" mean unset, as there.

    Koordinator replaces a value below the minimum with the minimum; we refuse it."""
    raw = annotations.get(KOORDINATOR_TOTAL_NUMBER)
    if raw is None or raw.strip() in ("", "0"):
        return None
    field = child(ANNOTATIONS, KOORDINATOR_TOTAL_NUMBER)
    total = read_count(r, raw, field)
    if total is not None and minimum is not None and total < minimum:
        r.add(field, f"must be at least {minimum_name} ({minimum}), got {total}")
        return None
    return total


def read_mode(r: Reader, annotations: Mapping[str, str]) -> GangMode:
    raw = annotations.get(KOORDINATOR_GANG_MODE) or ""
    if not raw:
        return GangMode.STRICT
    mode = _MODES.get(raw)
    if mode is None:
        r.add(
            child(ANNOTATIONS, KOORDINATOR_GANG_MODE),
            f"unknown mode {show(raw)}; use Strict or NonStrict",
        )
        return GangMode.STRICT
    return mode


def read_match_policy(r: Reader, annotations: Mapping[str, str]) -> MatchPolicy | None:
    """The match policy, or None when neither key is set. The koordinator.sh key wins over
    the older alias, as Koordinator reads them."""
    key = KOORDINATOR_MATCH_POLICY
    raw = annotations.get(key) or ""
    if not raw:
        key = KOORDINATOR_MATCH_POLICY_ALIAS
        raw = annotations.get(key) or ""
    if not raw:
        return None
    policy = _MATCH_POLICIES.get(raw)
    if policy is None:
        r.add(
            child(ANNOTATIONS, key),
            f"unknown match policy {show(raw)}; use {', '.join(_MATCH_POLICIES)}",
        )
    return policy


def read_gang_group(
    r: Reader, annotations: Mapping[str, str], own: GroupRef
) -> tuple[GroupRef, ...]:
    """Koordinator's GangGroup: the listed gangs (self included) are placed all at once.

    A list naming only the gang itself bundles nothing, so it yields () like no annotation.
    An entry without a namespace means the gang's own namespace.
    """
    raw = annotations.get(KOORDINATOR_GANG_GROUPS)
    if raw is None:
        return ()
    field = child(ANNOTATIONS, KOORDINATOR_GANG_GROUPS)
    hint = 'must be a JSON list of "namespace/name" strings, e.g. ["default/a", "default/b"]'
    try:
        entries = json.loads(raw) if raw.strip() else []
    except ValueError:
        r.add(field, f"{show(raw)} {hint}")
        return ()
    if not isinstance(entries, list):
        r.add(field, f"{hint}; got a JSON {type_name(entries)}")
        return ()
    refs: list[GroupRef] = []
    for entry in entries:
        if not isinstance(entry, str):
            r.add(field, f"{show(entry)}: {hint}")
            continue
        namespace, _, name = entry.rpartition("/")
        if not name or "/" in namespace or (entry.count("/") == 1 and not namespace):
            r.add(field, f'{show(entry)} is not a valid "namespace/name"')
            continue
        ref = GroupRef(dialect=own.dialect, namespace=namespace or own.namespace, name=name)
        if ref not in refs:
            refs.append(ref)
    if own not in refs:
        refs.append(own)
    return tuple(refs) if len(refs) > 1 else ()
