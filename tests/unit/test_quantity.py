"""Exact quantity parsing and the API server's rounding (MilliValue / Value round up)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.quantity import (
    MAX_VALUE,
    QuantityError,
    format_bytes,
    format_milli,
    parse_quantity,
    to_milli,
    to_units,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("0.1", Fraction(1, 10)),
        ("1", Fraction(1)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(2**20)),
        ("2Ti", Fraction(2 * 2**40)),
        ("1Ei", Fraction(2**60)),
        ("5k", Fraction(5000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1E", Fraction(10**18)),  # the exa suffix, not an exponent
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("129e6", Fraction(129 * 10**6)),
        ("1e-3", Fraction(1, 1000)),
        ("5n", Fraction(5, 10**9)),
        ("250u", Fraction(1, 4000)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("+1", Fraction(1)),
        ("-1", Fraction(-1)),
        ("0", Fraction(0)),
        ("1.0001m", Fraction(10001, 10**7)),
    ],
)
def test_parse_exact(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["1.5.5", "abc", "1ki", "", "1e", "Mi", "1 Gi", "1.5e3Mi", "--1", "1Kii", "e3", "."],
)
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, None, [1], float("inf"), float("nan")])
def test_invalid_types(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


def test_numbers() -> None:
    assert parse_quantity(4) == 4
    assert parse_quantity(0.1) == Fraction(1, 10)  # via its repr, not the binary float
    assert parse_quantity(2.5) == Fraction(5, 2)


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("100m", 100),
        ("0.1", 100),
        ("1", 1000),
        ("1.5", 1500),
        ("1.0001m", 2),  # rounds up, like MilliValue()
        ("0.0001", 1),
        ("1n", 1),
        ("250u", 1),
        ("0", 0),
        ("2e-3", 2),
    ],
)
def test_to_milli_rounds_up(text: str, milli: int) -> None:
    assert to_milli(text) == milli


def test_to_milli_of_numbers() -> None:
    assert to_milli(0.0001) == 1
    assert to_milli(2) == 2000


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("1Gi", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("100m", 1),  # rounds up, like Value()
        ("0.5", 1),
        ("1.5", 2),
        ("2", 2),
        ("129e6", 129_000_000),
        ("0", 0),
    ],
)
def test_to_units_rounds_up(text: str, units: int) -> None:
    assert to_units(text) == units


@pytest.mark.parametrize(
    ("milli", "text"), [(0, "0"), (1000, "1"), (2500, "2500m"), (100, "100m"), (4000, "4")]
)
def test_format_milli(milli: int, text: str) -> None:
    assert format_milli(milli) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (1024, "1Ki"), (2**30, "1Gi"), (1536 * 2**20, "1536Mi"), (1000, "1000")],
)
def test_format_bytes(value: int, text: str) -> None:
    assert format_bytes(value) == text


@given(st.integers(min_value=0, max_value=10**15))
def test_milli_round_trip(milli: int) -> None:
    assert to_milli(format_milli(milli)) == milli
    assert to_milli(f"{milli}m") == milli


@given(st.integers(min_value=0, max_value=MAX_VALUE))
def test_bytes_round_trip(value: int) -> None:
    assert to_units(format_bytes(value)) == value


@pytest.mark.parametrize("text", ["9e15", "65Pi", "1E", str(2**57)])
def test_values_that_could_overflow_a_node_sum_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError, match="too large"):
        to_milli(text) if text == "9e15" else to_units(text)


@given(
    st.integers(min_value=0, max_value=10**9),
    st.integers(min_value=0, max_value=9),
    st.sampled_from(["", "k", "M", "G", "m", "Ki", "Mi", "Gi"]),
)
def test_decimal_notation_is_exact(whole: int, tenths: int, suffix: str) -> None:
    """ "N.d<suffix>" equals (10N + d) / 10 of the suffix, with no float error."""
    factor = {
        "": Fraction(1),
        "k": Fraction(10**3),
        "M": Fraction(10**6),
        "G": Fraction(10**9),
        "m": Fraction(1, 1000),
        "Ki": Fraction(2**10),
        "Mi": Fraction(2**20),
        "Gi": Fraction(2**30),
    }[suffix]
    assert parse_quantity(f"{whole}.{tenths}{suffix}") == Fraction(10 * whole + tenths, 10) * factor


@given(st.fractions(min_value=0, max_value=10**6, max_denominator=10**6))
def test_rounding_is_the_ceiling(value: Fraction) -> None:
    text = f"{value.numerator}e0" if value.denominator == 1 else None
    if text is None:
        # Decimal text of the exact value, when it has one of at most 9 fractional digits.
        scaled = value * 10**9
        if scaled.denominator != 1:
            return
        text = f"{int(scaled)}n"
    milli = to_milli(text)
    assert milli - 1 < value * 1000 <= milli
    units = to_units(text)
    assert units - 1 < value <= units
