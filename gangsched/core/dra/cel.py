"""CEL device selectors, with the Kubernetes extensions DRA uses (`quantity`, `semver`).

The engine is cel-expr-python, the Python wrapper of the CEL C++ implementation: it type-checks
at compile time (an undeclared function or `1 + "a"` is a compile error, as in cel-go), has
the `cel.bind`, optional (`.?x.orValue()`) and strings extensions upstream's DRA environment
enables, and returns evaluation errors as values, so a broken selector never raises in the
middle of a cycle. The Kubernetes functions (`quantity`, `semver` and their methods) are
declared in cel_library.py; this module compiles, evaluates and caches.

Upstream looks up an unknown attribute domain as an empty map (so `"x" in
device.attributes["other.com"]` is false, not an error); the domains an expression names as
string literals are padded with empty maps before evaluation to give the same answers.

Each expression is compiled once; results are cached per (expression, device fingerprint), so
identical devices across all nodes cost one evaluation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

from gangsched.core.dra.cel_library import CelMap, functions, quantity_value, semver_value
from gangsched.core.dra.model import AttributeValue, Semver

_STRING_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")

#: A device class's selector expressions and a request's.
Selectors = tuple[tuple[str, ...], tuple[str, ...]]


# -- the device variable --------------------------------------------------------------------------
class DeviceView(NamedTuple):
    """What a selector sees of a device: `device.driver`, `.attributes`, `.capacity`. A named
    tuple rather than a frozen dataclass: the inventory makes one per kind of device, which
    on a fleet whose GPUs each carry their own NVLink domain is one per device, and a frozen
    dataclass costs several times as much to create."""

    driver: str
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Fraction]

    def to_cel(self) -> CelMap:
        attributes: dict[str, dict[str, Any]] = {}
        for name, value in self.attributes.items():
            domain, _, ident = name.rpartition("/")
            attributes.setdefault(domain, {})[ident] = (
                semver_value(value) if isinstance(value, Semver) else value
            )
        capacity: dict[str, dict[str, Any]] = {}
        for name, amount in self.capacity.items():
            domain, _, ident = name.rpartition("/")
            capacity.setdefault(domain, {})[ident] = quantity_value(amount)
        return {"driver": self.driver, "attributes": attributes, "capacity": capacity}


# -- compiling and evaluating ---------------------------------------------------------------------
@dataclass(slots=True)
class Selector:
    """One compiled expression, or why it did not compile."""

    expression: str
    program: Any = None
    error: str = ""
    #: String literals of the expression: attribute domains it may look up.
    literals: frozenset[str] = frozenset()
    #: The names (identifiers and literals) the expression can look attributes up by, or
    #: None when it may reach others (iteration, size, computed keys): see `projection`.
    names: frozenset[str] | None = None
    #: The qualified attribute and capacity names the expression can observe (None: all).
    visible: tuple[str, ...] | None = None
    seen: frozenset[str] = frozenset()

    def projection(self, view: DeviceView) -> object:
        """What of the device this expression can observe: devices with equal projections
        get equal results. Only attributes and capacities whose domain is a literal of the
        expression and whose name is one of its identifiers or literals are kept, unless the
        expression iterates maps, asks their size or indexes them with a computed key."""
        if self.visible is None:
            return (view.driver, _items(view.attributes), _items(view.capacity))
        # A device has a few attributes, an expression many visible names: walk the device.
        return (
            view.driver,
            tuple((k, type(v).__name__, v) for k, v in _visible(view.attributes, self.seen)),
            tuple((k, v.numerator, v.denominator) for k, v in _visible(view.capacity, self.seen)),
        )

    def evaluate(self, device: CelMap) -> bool | str:
        """True/False, or the runtime error's message."""
        data = device
        missing = [
            name
            for name in self.literals
            if name not in device["attributes"] or name not in device["capacity"]
        ]
        if missing:
            data = {
                "driver": device["driver"],
                "attributes": {**{key: {} for key in missing}, **device["attributes"]},
                "capacity": {**{key: {} for key in missing}, **device["capacity"]},
            }
        from cel_expr_python import cel  # loaded by then: only compiled selectors evaluate

        try:
            result = self.program.eval(data={"device": data})
            value = result.value()
        except Exception as error:  # the C++ runtime raises only for internal failures
            return _clean(str(error))
        if result.type() == cel.Type.ERROR:
            return _clean(str(value))
        if not isinstance(value, bool):
            kind = result.type().name().lower()
            return f"CEL result of type {kind} could not be converted to bool"
        return value


def _clean(message: str) -> str:
    """cel-cpp's status text in cel-go's words where they differ."""
    message = _STATUS_PREFIX.sub("", message.strip())
    message = message.replace("Key not found in map : ", "no such key: ")
    return message.split(" [", 1)[0] if message.endswith("]") else message


def _items(values: Mapping[str, Any]) -> tuple[tuple[str, str, Any], ...]:
    return tuple(sorted((k, type(v).__name__, v) for k, v in values.items()))


def _visible(values: Mapping[str, Any], seen: frozenset[str]) -> list[tuple[str, Any]]:
    """The items of `values` whose names are in `seen`, sorted (mostly none or one)."""
    keys = seen.intersection(values)
    if len(keys) < 2:
        return [(key, values[key]) for key in keys]
    return [(key, values[key]) for key in sorted(keys)]


#: Functions and macros that reach map entries without naming them.
_OPAQUE_CALLS = frozenset(
    {
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
        "size",
        "transformList",
        "transformMap",
        "optMap",
        "optFlatMap",
        "sortBy",
        "dyn",
        "string",
    }
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INDEX = re.compile(r"[A-Za-z0-9_\])]\s*\[")
_LITERAL_INDEX = re.compile(
    r"[A-Za-z0-9_\])]\s*\[\s*(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')\s*\]"
)


def _names(expression: str, literals: frozenset[str]) -> frozenset[str] | None:
    """The identifiers and literals of `expression`, or None when it can look attributes up
    by names it does not spell out (see `Selector.projection`)."""
    code = _STRING_LITERAL.sub('""', expression)
    identifiers = set(_IDENTIFIER.findall(code))
    if identifiers & _OPAQUE_CALLS:
        return None
    if len(_INDEX.findall(expression)) != len(_LITERAL_INDEX.findall(expression)):
        return None  # some map is indexed with a computed key
    return frozenset(identifiers | literals)


@dataclass(slots=True)
class SelectorCache:
    """Compiles each expression once and remembers results per (expression, device kind) and
    per (expression, what of the device the expression can observe): GPUs that differ only
    in a UUID or an NVLink domain share one evaluation of a selector on their memory."""

    _env: Any = None
    _compiled: dict[str, Selector] = field(default_factory=dict)
    _results: dict[tuple[str, int], bool | str] = field(default_factory=dict)
    _projected: dict[tuple[str, object], bool | str] = field(default_factory=dict)
    #: Whether a device kind passes a class's and a request's selectors together (the
    #: allocator's per-device question): by kind, and by what the expressions can observe.
    _verdicts: dict[tuple[Selectors, int], bool] = field(default_factory=dict)
    _groups: dict[Selectors, tuple[frozenset[str] | None, dict[object, bool]]] = field(
        default_factory=dict
    )

    def compile(self, expression: str) -> Selector:
        selector = self._compiled.get(expression)
        if selector is not None:
            return selector
        # The engine and its extensions load here, with the first selector: 0.1 s of every
        # start (a tenth of its imports) that a cluster without DRA claims never needs.
        from cel_expr_python import cel

        if self._env is None:
            from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

            self._env = cel.NewEnv(
                variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
                extensions=[
                    ext_bindings.ExtBindings(),
                    ext_strings.ExtStrings(),
                    ext_optional.ExtOptional(),
                ],
                functions=functions(),
            )
        literals = frozenset(a or b for a, b in _STRING_LITERAL.findall(expression))
        names = _names(expression, literals)
        selector = Selector(
            expression=expression,
            literals=literals,
            names=names,
            visible=None
            if names is None
            else tuple(sorted(f"{domain}/{name}" for domain in literals for name in names)),
        )
        selector.seen = frozenset(selector.visible or ())
        try:
            program = self._env.compile(expression)
            returns = program.return_type()
            if returns not in (cel.Type.BOOL, cel.Type.DYN):
                selector.error = (
                    f"must evaluate to bool or the unknown type, not {returns.name().lower()}"
                )
            else:
                selector.program = program
        except Exception as error:  # compile errors come as RuntimeError(INVALID_ARGUMENT)
            selector.error = "compilation failed: " + _clean(str(error)).split("\n ", 1)[0]
        self._compiled[expression] = selector
        return selector

    def matches(self, expression: str, fingerprint: int, view: DeviceView) -> bool | str:
        """Whether the device (of kind `fingerprint`) satisfies `expression`; a message on
        error."""
        key = (expression, fingerprint)
        cached = self._results.get(key)
        if cached is not None:
            return cached
        selector = self.compile(expression)
        if selector.error:
            result: bool | str = f"CEL compile error: {selector.error}"
        else:
            projected = (expression, selector.projection(view))
            found = self._projected.get(projected)
            if found is None:
                found = _runtime(selector.evaluate(view.to_cel()))
                self._projected[projected] = found
            result = found
        self._results[key] = result
        return result

    def passes(self, selectors: Selectors, fingerprint: int, view: DeviceView) -> bool | None:
        """Whether the device passes every expression of `selectors` (a class's, then a
        request's; evaluated in order, the first false one decides), or None when one
        fails to compile or evaluate (`matches` then says why, per expression).

        One projection per device for all the expressions together: on a fleet whose GPUs
        differ only in names and NVLink domains, the first device of each model evaluates
        the expressions and every other one costs a projection and a dictionary lookup."""
        key = (selectors, fingerprint)
        found = self._verdicts.get(key)
        if found is not None:
            return found
        group = self._groups.get(selectors)
        if group is None:
            compiled = [self.compile(e) for part in selectors for e in part]
            seen: frozenset[str] | None = frozenset()
            for selector in compiled:
                if selector.visible is None or seen is None:
                    seen = None
                else:
                    seen |= selector.seen
            group = self._groups[selectors] = (seen, {})
        seen, results = group
        if seen is None:
            projected: object = (view.driver, _items(view.attributes), _items(view.capacity))
        else:
            projected = (
                view.driver,
                tuple((k, type(v).__name__, v) for k, v in _visible(view.attributes, seen)),
                tuple((k, v.numerator, v.denominator) for k, v in _visible(view.capacity, seen)),
            )
        found = results.get(projected)
        if found is None:
            found = True
            for part in selectors:
                for expression in part:
                    verdict = self.matches(expression, fingerprint, view)
                    if isinstance(verdict, str):
                        return None
                    if not verdict:
                        found = False
                        break
                if not found:
                    break
            results[projected] = found
        self._verdicts[key] = found
        return found


def _runtime(result: bool | str) -> bool | str:
    return result if isinstance(result, bool) else f"CEL runtime error: {result}"
