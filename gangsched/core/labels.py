"""Label and node selectors, with the operators Kubernetes defines for each."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: Operators of label selectors (pods) and node selector requirements (nodes).
LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
NODE_OPERATORS = LABEL_OPERATORS | {"Gt", "Lt"}

_INTEGER = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64). Python's int() is laxer ("1_0", " 7", non-ASCII
    digits, no range), which would let Gt/Lt match labels Kubernetes does not."""
    if not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values
        if op == "NotIn":
            return labels.get(self.key) not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if value is None or len(self.values) != 1:
            return False
        have, want = _parse_int64(value), _parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: matchLabels AND matchExpressions. The empty selector matches all."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Terms are ORed by the caller; the requirements inside one term are ANDed."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches no objects (API semantics)
        if not all(req.matches(labels) for req in self.match_expressions):
            return False
        fields = {"metadata.name": node_name}
        return all(req.matches(fields) for req in self.match_fields)


def any_term_matches(
    terms: tuple[NodeSelectorTerm, ...], node_name: str, labels: Mapping[str, str]
) -> bool:
    return any(term.matches(node_name, labels) for term in terms)
