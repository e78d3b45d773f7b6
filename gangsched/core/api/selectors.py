"""Label and node selectors from raw JSON, with the API server's validation rules.

An operator typo ("in" for "In") would otherwise make a selector silently match nothing, the
most confusing way a pod can stay pending; so unknown operators and value counts that do not
fit the operator are problems, not defaults.
"""

from __future__ import annotations

from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.api.types import RawLabelSelector, RawNodeSelectorTerm
from gangsched.core.labels import (
    LABEL_OPERATORS,
    NODE_OPERATORS,
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
)

#: Node selector matchFields may only name the node (API validation).
_FIELD_KEYS = ("metadata.name",)
_FIELD_OPERATORS = frozenset({"In", "NotIn"})


def read_requirement(
    reader: Reader, raw: Any, field: str, *, operators: frozenset[str]
) -> Requirement | None:
    body = reader.mapping(raw, field)
    if not body:
        if isinstance(raw, dict):
            reader.add(field, "empty requirement; key and operator are required")
        return None
    key = reader.string(body.get("key"), child(field, "key"))
    operator = reader.string(body.get("operator"), child(field, "operator"))
    values = reader.strings(body.get("values"), child(field, "values"))
    ok = True
    if not key:
        reader.add(child(field, "key"), "is required")
        ok = False
    if not operator:
        reader.add(child(field, "operator"), "is required")
        return None
    if operator not in operators:
        allowed = ", ".join(sorted(operators))
        reader.add(child(field, "operator"), f"unknown operator {show(operator)}; use {allowed}")
        return None
    values_field = child(field, "values")
    if operator in ("In", "NotIn") and not values:
        reader.add(values_field, f"must be non-empty for operator {operator}")
        ok = False
    elif operator in ("Exists", "DoesNotExist") and values:
        reader.add(values_field, f"must be empty for operator {operator}")
        ok = False
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            reader.add(values_field, f"must have exactly one value for operator {operator}")
            ok = False
        else:
            try:
                int(values[0])
            except ValueError:
                reader.add(item(values_field, 0), f"{show(values[0])} must be an integer")
                ok = False
    if not ok:
        return None
    return Requirement(key=key, operator=operator, values=values)


def read_label_selector(reader: Reader, raw: Any, field: str) -> LabelSelector | None:
    """metav1.LabelSelector; None for a null selector (which selects nothing where it matters)."""
    if raw is None:
        return None
    body = reader.mapping(raw, field)
    labels = reader.string_map(body.get("matchLabels"), child(field, "matchLabels"))
    expressions = []
    expr_field = child(field, "matchExpressions")
    for index, entry in enumerate(reader.items(body.get("matchExpressions"), expr_field)):
        requirement = read_requirement(
            reader, entry, item(expr_field, index), operators=LABEL_OPERATORS
        )
        if requirement is not None:
            expressions.append(requirement)
    return LabelSelector(
        match_labels=tuple(sorted(labels.items())), match_expressions=tuple(expressions)
    )


def read_node_selector_term(reader: Reader, raw: Any, field: str) -> NodeSelectorTerm:
    body = reader.mapping(raw, field)
    expressions = []
    expr_field = child(field, "matchExpressions")
    for index, entry in enumerate(reader.items(body.get("matchExpressions"), expr_field)):
        requirement = read_requirement(
            reader, entry, item(expr_field, index), operators=NODE_OPERATORS
        )
        if requirement is not None:
            expressions.append(requirement)
    fields = []
    fields_field = child(field, "matchFields")
    for index, entry in enumerate(reader.items(body.get("matchFields"), fields_field)):
        entry_field = item(fields_field, index)
        requirement = read_requirement(reader, entry, entry_field, operators=_FIELD_OPERATORS)
        if requirement is None:
            continue
        if requirement.key not in _FIELD_KEYS:
            reader.add(
                child(entry_field, "key"),
                f"unsupported field {show(requirement.key)}; only metadata.name is supported",
            )
            continue
        if len(requirement.values) != 1:
            reader.add(child(entry_field, "values"), "must have exactly one node name")
            continue
        fields.append(requirement)
    return NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields))


def label_selector_from_raw(
    raw: RawLabelSelector | dict[str, Any] | None,
) -> LabelSelector | None:
    """Parse a label selector on its own (outside an object), raising InvalidObject."""
    reader = Reader("")
    selector = read_label_selector(reader, raw, "selector")
    reader.done()
    return selector


def node_selector_term_from_raw(raw: RawNodeSelectorTerm | dict[str, Any]) -> NodeSelectorTerm:
    """Parse one node selector term on its own, raising InvalidObject."""
    reader = Reader("")
    term = read_node_selector_term(reader, raw, "term")
    reader.done()
    return term
