"""Defensive reading of raw JSON: every accessor records a Problem instead of raising.

Raw objects come from hand-written YAML as often as from the API server, so any field may have
the wrong type. Reading through a `Reader` keeps the converters linear while still collecting
every problem of the object for one `InvalidObject`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

from gangsched.core.api.errors import InvalidObject, Problem, show
from gangsched.core.quantity import MAX_VALUE, QuantityError, parse_quantity
from gangsched.core.resources import CPU, ResourceList

QUANTITY_HINT = "is not a valid quantity (e.g. 500m, 2, 1.5Gi, 1e3)"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@lru_cache(maxsize=16384)
def child(path: str, key: str) -> str:
    """`spec.requests.cpu`, but `requests[nvidia.com/gpu]` for keys a dot would split.

    Cached: converters name every field they read before knowing whether it has a problem,
    and the same few hundred paths recur in every pod (a third of a pod's conversion before).
    """
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def item(path: str, index: int) -> str:
    return f"{path}[{index}]"


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


@lru_cache(maxsize=8192)
def _convert_quantity(value: str | int | float, milli: bool) -> int | str:
    """The integer amount, or why the value is refused.

    Cached: clusters repeat a handful of quantity strings across thousands of pods, and exact
    Fraction parsing is most of the cost of converting a pod.
    """
    try:
        exact = parse_quantity(value)
    except QuantityError:
        return QUANTITY_HINT
    if exact < 0:
        return "must not be negative"
    amount = math.ceil(exact * 1000) if milli else math.ceil(exact)
    if amount > MAX_VALUE:
        return f"is too large (at most {MAX_VALUE} units or millicores)"
    return amount


@lru_cache(maxsize=4096)
def _parse_time(text: str) -> float | None:
    """RFC 3339 text as epoch seconds (UTC when it names no zone); None when it is not one.

    Cached: pods created together carry the same creationTimestamp, to the second.
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


class Reader:
    """Collects the problems of one object while its fields are read."""

    def __init__(self, kind: str, *, namespace: str = "", name: str = "") -> None:
        self.problems: list[Problem] = []
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.raw: Mapping[str, Any] = {}
        self.metadata: Mapping[str, Any] = {}

    @classmethod
    def for_object(cls, kind: str, raw: Any, *, namespaced: bool) -> Reader:
        """Start reading an object: its metadata names every later problem."""
        reader = cls(kind)
        if not isinstance(raw, Mapping):
            reader.add("", f"must be a mapping (a Kubernetes object), got {type_name(raw)}")
            return reader
        reader.raw = raw
        reader.metadata = reader.mapping(raw.get("metadata"), "metadata")
        name = reader.string(reader.metadata.get("name"), "metadata.name")
        if namespaced:
            namespace = reader.string(reader.metadata.get("namespace"), "metadata.namespace")
            reader.namespace = namespace or "default"
        reader.name = name
        if not name:
            reader.add("metadata.name", "is required")
        return reader

    # -- bookkeeping --------------------------------------------------------------------
    def add(self, field: str, message: str) -> None:
        self.problems.append(Problem(self.kind, self.namespace, self.name, field, message))

    def done(self) -> None:
        """Raise everything collected; converters call this before building the model."""
        if self.problems:
            raise InvalidObject(self.problems)

    def absorb(self, error: InvalidObject) -> None:
        """Re-home problems found by a nested converter onto this object."""
        for problem in error.problems:
            self.add(problem.field, problem.message)

    # -- typed accessors ----------------------------------------------------------------
    # The accessors test for the exact JSON types first: a pod reads ~50 fields, and the
    # abstract-class checks behind isinstance(value, Mapping) cost more than the reading.
    def mapping(self, value: Any, field: str) -> Mapping[str, Any]:
        if type(value) is dict:
            return value
        if value is None:
            return {}
        if isinstance(value, Mapping):
            return value
        self.add(field, f"must be a mapping, got {type_name(value)}")
        return {}

    def items(self, value: Any, field: str) -> list[Any]:
        """The entries of a list field (the list itself: callers only read it)."""
        if type(value) is list:
            return value
        if value is None:
            return []
        if isinstance(value, list | tuple):
            return list(value)
        self.add(field, f"must be a list, got {type_name(value)}")
        return []

    def string(self, value: Any, field: str, default: str = "") -> str:
        if type(value) is str:
            return value
        if value is None:
            return default
        if isinstance(value, str):
            return value
        self.add(field, f"must be a string, got {type_name(value)} {show(value)}")
        return default

    def strings(self, value: Any, field: str) -> tuple[str, ...]:
        out = []
        for index, entry in enumerate(self.items(value, field)):
            text = self.string(entry, item(field, index))
            if isinstance(entry, str):
                out.append(text)
        return tuple(out)

    def string_map(self, value: Any, field: str) -> dict[str, str]:
        """Labels, annotations, nodeSelector: string keys to string values, as the API demands."""
        if value is None:
            return {}
        if type(value) is dict and all(
            type(key) is str and type(entry) is str for key, entry in value.items()
        ):
            return dict(value)  # what the API server sends; the loop below says what is wrong
        out: dict[str, str] = {}
        for key, entry in self.mapping(value, field).items():
            if not isinstance(key, str):
                self.add(field, f"keys must be strings, got {type_name(key)} {show(key)}")
                continue
            if entry is None:
                out[key] = ""
            elif isinstance(entry, str):
                out[key] = entry
            else:
                self.add(
                    child(field, key),
                    f"must be a string, got {type_name(entry)} {show(entry)} (quote it in YAML)",
                )
        return out

    def integer(
        self, value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        """An integer field; None when absent or invalid (the problem is recorded)."""
        if value is None:
            return None
        if type(value) is int:
            number = value
        elif isinstance(value, bool) or not isinstance(value, int | float):
            self.add(field, f"must be an integer, got {type_name(value)} {show(value)}")
            return None
        elif isinstance(value, float) and not value.is_integer():
            self.add(field, f"must be an integer, got {show(value)}")
            return None
        else:
            number = int(value)
        if minimum is not None and number < minimum:
            what = "must not be negative" if minimum == 0 else f"must be at least {minimum}"
            self.add(field, f"{what}, got {number}")
            return None
        if maximum is not None and number > maximum:
            self.add(field, f"must be at most {maximum}, got {number}")
            return None
        return number

    def boolean(self, value: Any, field: str) -> bool:
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        self.add(field, f"must be true or false, got {type_name(value)} {show(value)}")
        return False

    def choice(self, value: Any, field: str, allowed: tuple[str, ...], default: str) -> str:
        text = self.string(value, field)
        if not text:
            return default
        if text not in allowed:
            self.add(field, f"unknown value {show(text)}; must be one of {', '.join(allowed)}")
            return default
        return text

    def quantity(self, value: Any, field: str, *, resource: str) -> int | None:
        """A resource quantity in the scheduler's integer units; negative amounts are refused."""
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.add(field, f"must be a quantity (string or number), got {type_name(value)}")
            return None
        converted = _convert_quantity(value, resource == CPU)
        if isinstance(converted, str):
            self.add(field, f"{show(value)} {converted}")
            return None
        return converted

    def resources(self, value: Any, field: str) -> ResourceList:
        out: ResourceList = {}
        if value is None:
            return out
        for name, amount in self.mapping(value, field).items():
            if not isinstance(name, str) or not name:
                self.add(field, f"resource names must be non-empty strings, got {show(name)}")
                continue
            parsed = self.quantity(amount, child(field, name), resource=name)
            if parsed is not None:
                out[name] = parsed
        return out

    def timestamp(self, value: Any, field: str) -> float | None:
        """RFC 3339 time as epoch seconds. YAML turns unquoted timestamps into datetimes."""
        if value is None:
            return None
        moment: datetime
        if isinstance(value, str):
            seconds = _parse_time(value)
            if seconds is None:
                self.add(
                    field, f"{show(value)} is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z)"
                )
            return seconds
        if isinstance(value, datetime):
            moment = value
        elif isinstance(value, date):
            moment = datetime(value.year, value.month, value.day)
        else:
            self.add(field, f"must be an RFC 3339 time string, got {type_name(value)}")
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
