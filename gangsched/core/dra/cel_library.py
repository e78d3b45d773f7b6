"""The Kubernetes CEL library DRA selectors may call: `quantity`, `isQuantity`, `semver`,
`isSemver` and the member functions on their values (`compareTo`, `isGreaterThan`,
`isLessThan`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`, `add`, `sub`, `major`,
`minor`, `patch`), as k8s.io/apiserver/pkg/cel/library declares them.

cel-expr-python has no opaque custom types, so quantities and semantic versions travel through
CEL as one-key maps holding a canonical text (`{"@quantity": "1/2"}`, `{"@semver": "1.2.3"}`):
map equality is then exactly the semantic equality of `apiservercel.Quantity` and `Semver`
(`quantity("1") == quantity("1000m")`). Kept apart from the selector compiler and its caches
(cel.py), which only registers these functions and builds device values with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from gangsched.core.dra.model import Semver
from gangsched.core.dra.semver import normalize_semver, parse_semver
from gangsched.core.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from cel_expr_python import cel

_QUANTITY_KEY = "@quantity"
_SEMVER_KEY = "@semver"
_INT64 = (-(2**63), 2**63 - 1)

CelMap = dict[str, Any]


def quantity_value(amount: Fraction) -> CelMap:
    return {_QUANTITY_KEY: str(amount)}


def semver_value(version: Semver) -> CelMap:
    return {_SEMVER_KEY: str(version)}


def _quantity_of(value: Any) -> Fraction:
    if isinstance(value, Mapping) and _QUANTITY_KEY in value:
        return Fraction(str(value[_QUANTITY_KEY]))
    raise ValueError("no such overload: expected a quantity")


def _semver_of(value: Any) -> tuple[int, int, int, tuple[tuple[int, int | str], ...] | None]:
    if isinstance(value, Mapping) and _SEMVER_KEY in value:
        parsed = parse_semver(str(value[_SEMVER_KEY]))
        if parsed is not None:
            # Precedence (semver 2.0.0 item 11): a release outranks its pre-releases;
            # numeric identifiers sort before alphanumeric ones.
            pre = tuple((0, p) if isinstance(p, int) else (1, p) for p in parsed.prerelease)
            return (parsed.major, parsed.minor, parsed.patch, pre or None)
    raise ValueError("no such overload: expected a semver")


def _semver_key(value: Any) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
    major, minor, patch, pre = _semver_of(value)
    return (major, minor, patch, 0 if pre else 1, pre or ())


def _ordered(left: Any, right: Any) -> tuple[Any, Any]:
    """Both quantities or both semvers, as comparable keys."""
    if isinstance(left, Mapping) and _QUANTITY_KEY in left:
        return _quantity_of(left), _quantity_of(right)
    return _semver_key(left), _semver_key(right)


def _compare(left: Any, right: Any) -> int:
    a, b = _ordered(left, right)
    return int(a > b) - int(a < b)


def _parse_quantity_text(text: str) -> CelMap:
    try:
        return quantity_value(parse_quantity(text))
    except QuantityError:
        raise ValueError(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        ) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _parse_semver_text(text: str, normalize: bool = False) -> CelMap:
    if normalize:
        text = normalize_semver(text)
    parsed = parse_semver(text)
    if parsed is None:
        raise ValueError(f"invalid semver: {text}")
    return semver_value(parsed)


def _as_integer(value: Any) -> int:
    amount = _quantity_of(value)
    if amount.denominator != 1 or not _INT64[0] <= amount.numerator <= _INT64[1]:
        raise ValueError("cannot convert value to integer")
    return amount.numerator


def _sign(value: Any) -> int:
    amount = _quantity_of(value)
    return (amount > 0) - (amount < 0)


def _add(left: Any, right: Any) -> CelMap:
    other = Fraction(right) if isinstance(right, int) else _quantity_of(right)
    return quantity_value(_quantity_of(left) + other)


def _sub(left: Any, right: Any) -> CelMap:
    other = Fraction(right) if isinstance(right, int) else _quantity_of(right)
    return quantity_value(_quantity_of(left) - other)


def _semver_part(index: int) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        major, minor, patch, _ = _semver_of(value)
        return (major, minor, patch)[index]

    return part


def functions() -> list[cel.FunctionDecl]:
    """The declarations (with their Python implementations) the CEL environment is built with."""
    from cel_expr_python import cel  # the engine loads with the first selector (cel.py)

    text, integer, boolean = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL
    mapped = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)

    def decl(name: str, *overloads: tuple[str, Any, list[Any], bool, Any]) -> cel.FunctionDecl:
        return cel.FunctionDecl(
            name,
            [
                cel.Overload(oid, return_type=ret, parameters=params, is_member=member, impl=impl)
                for oid, ret, params, member, impl in overloads
            ],
        )

    return [
        decl("quantity", ("k8s_quantity", mapped, [text], False, _parse_quantity_text)),
        decl("isQuantity", ("k8s_is_quantity", boolean, [text], False, _is_quantity)),
        decl(
            "semver",
            ("k8s_semver", mapped, [text], False, _parse_semver_text),
            ("k8s_semver_normalize", mapped, [text, boolean], False, _parse_semver_text),
        ),
        decl(
            "isSemver",
            ("k8s_is_semver", boolean, [text], False, lambda s: _ok(_parse_semver_text, s)),
            (
                "k8s_is_semver_normalize",
                boolean,
                [text, boolean],
                False,
                lambda s, n: _ok(_parse_semver_text, s, n),
            ),
        ),
        decl("compareTo", ("k8s_compare_to", integer, [mapped, mapped], True, _compare)),
        decl(
            "isGreaterThan",
            ("k8s_greater", boolean, [mapped, mapped], True, lambda a, b: _compare(a, b) > 0),
        ),
        decl(
            "isLessThan",
            ("k8s_less", boolean, [mapped, mapped], True, lambda a, b: _compare(a, b) < 0),
        ),
        decl("sign", ("k8s_sign", integer, [mapped], True, _sign)),
        decl(
            "isInteger",
            ("k8s_is_integer", boolean, [mapped], True, lambda q: _ok(_as_integer, q)),
        ),
        decl("asInteger", ("k8s_as_integer", integer, [mapped], True, _as_integer)),
        decl(
            "asApproximateFloat",
            (
                "k8s_as_float",
                cel.Type.DOUBLE,
                [mapped],
                True,
                lambda q: float(_quantity_of(q)),
            ),
        ),
        decl(
            "add",
            ("k8s_add_quantity", mapped, [mapped, mapped], True, _add),
            ("k8s_add_int", mapped, [mapped, integer], True, _add),
        ),
        decl(
            "sub",
            ("k8s_sub_quantity", mapped, [mapped, mapped], True, _sub),
            ("k8s_sub_int", mapped, [mapped, integer], True, _sub),
        ),
        decl("major", ("k8s_major", integer, [mapped], True, _semver_part(0))),
        decl("minor", ("k8s_minor", integer, [mapped], True, _semver_part(1))),
        decl("patch", ("k8s_patch", integer, [mapped], True, _semver_part(2))),
    ]


def _ok(function: Callable[..., Any], *args: Any) -> bool:
    try:
        function(*args)
    except ValueError:
        return False
    return True
