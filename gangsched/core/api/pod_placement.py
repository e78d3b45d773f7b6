"""Where a pod may and would like to go: tolerations, node affinity, pod (anti-)affinity and
topology spreading, read from raw JSON with the API server's validation.

Manifests given to simulate never went through the API server, so the defaulting it does at
creation (matchLabelKeys folded into selectors) is done here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.api.nodes import TAINT_EFFECTS
from gangsched.core.api.selectors import read_label_selector, read_node_selector_term
from gangsched.core.labels import LabelSelector, NodeSelectorTerm, Requirement
from gangsched.core.model import (
    PodAffinityTerm,
    PreferredNodeTerm,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_TOLERATION_FIELDS = ("key", "operator", "value", "effect")
#: key, operator, value, effect of each toleration: all that its reading uses.
TolerationsKey = tuple[tuple[str | None, str | None, str | None, str | None], ...]


def read_tolerations(r: Reader, raw: Any) -> tuple[Toleration, ...]:
    """spec.tolerations. The pods of a workload carry the same list (the API server adds the
    same two not-ready/unreachable tolerations to nearly every pod), so a valid list is
    converted once and its models shared: they are frozen. Anything unusual is read in full,
    which records its problems."""
    if raw is None:
        return ()
    key = _tolerations_key(raw)
    known = None if key is None else _valid_tolerations(key)
    return _read_tolerations(r, raw) if known is None else known


def _tolerations_key(raw: Any) -> TolerationsKey | None:
    """Everything the reading of `raw` uses, when each of it has its exact JSON type (so
    equal keys mean equal input: 1, 1.0 and True compare equal but read differently);
    None for anything else."""
    if type(raw) is not list:
        return None
    out = []
    for entry in raw:
        if type(entry) is not dict:
            return None
        fields = (entry.get("key"), entry.get("operator"), entry.get("value"), entry.get("effect"))
        for value in fields:
            if value is not None and type(value) is not str:
                return None
        seconds = entry.get("tolerationSeconds")
        if seconds is not None and type(seconds) is not int:
            return None  # any int is valid and changes nothing in the model
        out.append(fields)
    return tuple(out)


@lru_cache(maxsize=512)
def _valid_tolerations(key: TolerationsKey) -> tuple[Toleration, ...] | None:
    """The tolerations a key stands for, or None when reading them records a problem."""
    scratch = Reader("Pod")
    tolerations = _read_tolerations(
        scratch, [dict(zip(_TOLERATION_FIELDS, fields, strict=True)) for fields in key]
    )
    return None if scratch.problems else tolerations


def _read_tolerations(r: Reader, raw: Any) -> tuple[Toleration, ...]:
    out = []
    for index, entry in enumerate(r.items(raw, "spec.tolerations")):
        field = item("spec.tolerations", index)
        body = r.mapping(entry, field)
        key = r.string(body.get("key"), child(field, "key"))
        operator = r.string(body.get("operator"), child(field, "operator")) or "Equal"
        value = r.string(body.get("value"), child(field, "value"))
        effect = r.string(body.get("effect"), child(field, "effect"))
        r.integer(body.get("tolerationSeconds"), child(field, "tolerationSeconds"))
        ok = True
        if operator in ("Gt", "Lt"):
            r.add(child(field, "operator"), f"operator {operator} is not supported by gangsched")
            ok = False
        elif operator not in ("Equal", "Exists"):
            r.add(
                child(field, "operator"),
                f"unknown operator {show(operator)}; use Equal or Exists",
            )
            ok = False
        elif operator == "Exists" and value:
            r.add(child(field, "value"), "must be empty when operator is Exists")
            ok = False
        elif not key and operator != "Exists":
            r.add(child(field, "operator"), "must be Exists when key is empty")
            ok = False
        if effect and effect not in TAINT_EFFECTS:
            r.add(
                child(field, "effect"),
                f"unknown effect {show(effect)}; must be one of {', '.join(TAINT_EFFECTS)}",
            )
            ok = False
        if ok:
            out.append(Toleration(key=key, operator=operator, value=value, effect=effect))
    return tuple(out)


def read_node_affinity(
    r: Reader, raw: Any
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredNodeTerm, ...]]:
    if raw is None:
        return None, ()
    base = "spec.affinity.nodeAffinity"
    body = r.mapping(raw, base)
    required: tuple[NodeSelectorTerm, ...] | None = None
    if body.get(_REQUIRED) is not None:
        field = child(base, _REQUIRED)
        selector = r.mapping(body.get(_REQUIRED), field)
        terms_field = child(field, "nodeSelectorTerms")
        raw_terms = r.items(selector.get("nodeSelectorTerms"), terms_field)
        if not raw_terms:
            r.add(terms_field, "must have at least one term")
        required = tuple(
            read_node_selector_term(r, term, item(terms_field, index))
            for index, term in enumerate(raw_terms)
        )
    preferred = []
    field = child(base, _PREFERRED)
    for index, entry in enumerate(r.items(body.get(_PREFERRED), field)):
        entry_field = item(field, index)
        weighted = r.mapping(entry, entry_field)
        weight = r.integer(
            weighted.get("weight"), child(entry_field, "weight"), minimum=1, maximum=100
        )
        if weighted.get("weight") is None:
            r.add(child(entry_field, "weight"), "is required (1-100)")
        term = read_node_selector_term(
            r, weighted.get("preference"), child(entry_field, "preference")
        )
        if weight is not None:
            preferred.append(PreferredNodeTerm(weight=weight, term=term))
    return required, tuple(preferred)


# -- pod (anti-)affinity and spreading ----------------------------------------------------------
def _merge_label_keys(
    selector: LabelSelector,
    labels: Mapping[str, str],
    match_keys: tuple[str, ...],
    mismatch_keys: tuple[str, ...] = (),
) -> LabelSelector:
    """Fold matchLabelKeys/mismatchLabelKeys into the selector with the pod's own values.

    The API server does this at pod creation for affinity (and the scheduler for spreading);
    manifests never went through either. Keys the pod lacks are ignored, as upstream does.
    """
    extra = [Requirement(key, "In", (labels[key],)) for key in match_keys if key in labels]
    extra += [Requirement(key, "NotIn", (labels[key],)) for key in mismatch_keys if key in labels]
    new = tuple(req for req in extra if req not in selector.match_expressions)
    if not new:
        return selector
    return LabelSelector(
        match_labels=selector.match_labels,
        match_expressions=selector.match_expressions + new,
    )


def read_pod_affinity(
    r: Reader, raw: Any, base: str, labels: Mapping[str, str]
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    """Required terms (filter) and weighted preferred terms (score) of podAffinity or
    podAntiAffinity."""
    if raw is None:
        return (), ()
    body = r.mapping(raw, base)
    field = child(base, _REQUIRED)
    required = tuple(
        _read_affinity_term(r, entry, item(field, index), labels)
        for index, entry in enumerate(r.items(body.get(_REQUIRED), field))
    )
    field = child(base, _PREFERRED)
    preferred = []
    for index, entry in enumerate(r.items(body.get(_PREFERRED), field)):
        entry_field = item(field, index)
        weighted = r.mapping(entry, entry_field)
        weight = r.integer(
            weighted.get("weight"), child(entry_field, "weight"), minimum=1, maximum=100
        )
        if weighted.get("weight") is None:
            r.add(child(entry_field, "weight"), "is required")
        if weighted.get("podAffinityTerm") is None:
            r.add(child(entry_field, "podAffinityTerm"), "is required")
        term = _read_affinity_term(
            r, weighted.get("podAffinityTerm"), child(entry_field, "podAffinityTerm"), labels
        )
        preferred.append(WeightedPodAffinityTerm(weight=weight or 1, term=term))
    return required, tuple(preferred)


def _read_affinity_term(
    r: Reader, raw: Any, term_field: str, labels: Mapping[str, str]
) -> PodAffinityTerm:
    term = r.mapping(raw, term_field)
    selector = read_label_selector(r, term.get("labelSelector"), child(term_field, "labelSelector"))
    match_keys = r.strings(term.get("matchLabelKeys"), child(term_field, "matchLabelKeys"))
    mismatch_keys = r.strings(term.get("mismatchLabelKeys"), child(term_field, "mismatchLabelKeys"))
    if selector is not None:
        selector = _merge_label_keys(selector, labels, match_keys, mismatch_keys)
    topology_key = r.string(term.get("topologyKey"), child(term_field, "topologyKey"))
    if not topology_key:
        r.add(child(term_field, "topologyKey"), "is required")
    namespaces = r.strings(term.get("namespaces"), child(term_field, "namespaces"))
    namespace_selector = read_label_selector(
        r, term.get("namespaceSelector"), child(term_field, "namespaceSelector")
    )
    return PodAffinityTerm(
        selector=selector,
        topology_key=topology_key,
        namespaces=frozenset(namespaces),
        namespace_selector=namespace_selector,
    )


def read_spread(
    r: Reader, raw: Any, labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    if raw is None:
        return ()
    base = "spec.topologySpreadConstraints"
    out = []
    for index, entry in enumerate(r.items(raw, base)):
        field = item(base, index)
        body = r.mapping(entry, field)
        max_skew = r.integer(body.get("maxSkew"), child(field, "maxSkew"), minimum=1)
        if body.get("maxSkew") is None:
            r.add(child(field, "maxSkew"), "is required")
        topology_key = r.string(body.get("topologyKey"), child(field, "topologyKey"))
        if not topology_key:
            r.add(child(field, "topologyKey"), "is required")
        when_field = child(field, "whenUnsatisfiable")
        when = r.string(body.get("whenUnsatisfiable"), when_field)
        if not when:
            r.add(when_field, "is required (DoNotSchedule or ScheduleAnyway)")
        elif when not in ("DoNotSchedule", "ScheduleAnyway"):
            r.add(when_field, f"unknown value {show(when)}; use DoNotSchedule or ScheduleAnyway")
        selector = read_label_selector(r, body.get("labelSelector"), child(field, "labelSelector"))
        match_keys = r.strings(body.get("matchLabelKeys"), child(field, "matchLabelKeys"))
        if selector is not None:
            selector = _merge_label_keys(selector, labels, match_keys)
        min_domains = r.integer(body.get("minDomains"), child(field, "minDomains"), minimum=1)
        if min_domains is not None and when == "ScheduleAnyway":
            r.add(
                child(field, "minDomains"), "may only be set with whenUnsatisfiable DoNotSchedule"
            )
        affinity_policy = r.choice(
            body.get("nodeAffinityPolicy"),
            child(field, "nodeAffinityPolicy"),
            ("Honor", "Ignore"),
            "Honor",
        )
        taints_policy = r.choice(
            body.get("nodeTaintsPolicy"),
            child(field, "nodeTaintsPolicy"),
            ("Honor", "Ignore"),
            "Ignore",
        )
        if max_skew is None or not topology_key or when not in ("DoNotSchedule", "ScheduleAnyway"):
            continue
        out.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=topology_key,
                when_unsatisfiable=when,
                selector=selector,
                min_domains=min_domains or 1,
                honor_node_affinity=affinity_policy == "Honor",
                honor_node_taints=taints_policy == "Honor",
            )
        )
    return tuple(out)
