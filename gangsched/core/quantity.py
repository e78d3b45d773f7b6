"""Exact parsing of Kubernetes resource quantities.

Scheduling decisions compare sums of requests against allocatable capacity, so rounding must
match the API server: CPU is counted in millicores rounded up (as `MilliValue()`), everything
else in whole units rounded up (as `Value()`). Fractions keep "0.1" and "100m" identical;
floats would not. kubernetes-asyncio ships no quantity parser, so this is our own.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>\d+\.?\d*|\.\d+)"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Return the exact value of a quantity such as "100m", "1.5Gi", "129e6" or 4."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a finite quantity")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, not {type(value).__name__}")
    match = _QUANTITY.match(value.strip())
    if match is None or not value.strip():
        raise QuantityError(f"{value!r} is not a valid quantity (e.g. 500m, 2, 1.5Gi, 1e3)")
    number = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 64:
            raise QuantityError(f"{value!r}: exponent out of range")
        number *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"] or ""
        number *= _BINARY.get(suffix) or _DECIMAL[suffix]
    return -number if match["sign"] == "-" else number


#: Larger values could overflow int64 (the snapshot's type) once summed over a node's pods:
#: 2**56 is 64 PiB of memory or 72 billion cores, far beyond any real node.
MAX_VALUE = 2**56


def to_milli(value: str | int | float) -> int:
    """Millicores (or milli-units), rounded up as the API server's MilliValue does."""
    return _bounded(math.ceil(parse_quantity(value) * 1000), value)


def to_units(value: str | int | float) -> int:
    """Whole units (bytes, pods, devices), rounded up as the API server's Value does."""
    return _bounded(math.ceil(parse_quantity(value)), value)


def _bounded(result: int, value: str | int | float) -> int:
    if abs(result) > MAX_VALUE:
        raise QuantityError(f"{value!r} is too large (at most {MAX_VALUE} units or millicores)")
    return result


def format_milli(milli: int) -> str:
    """Render millicores the way kubectl does: whole cores when exact, else "NNNm"."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(value: int) -> str:
    """Render a byte count with the largest exact binary suffix."""
    for suffix, factor in reversed(_BINARY.items()):
        if value and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)
