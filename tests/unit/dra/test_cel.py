"""CEL selectors with the Kubernetes DRA environment (quantity, semver, cel.bind, ...)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gangsched.core.dra.cel import DeviceView, SelectorCache
from gangsched.core.dra.parse import parse_semver

GPU = DeviceView(
    driver="gpu.example.com",
    attributes={
        "gpu.example.com/model": "A100",
        "gpu.example.com/index": 3,
        "gpu.example.com/healthy": True,
        "gpu.example.com/driverVersion": parse_semver("535.104.5") or "",
        "pci.example.com/root": "pci-0",
    },
    capacity={"gpu.example.com/memory": Fraction(40 * 2**30)},
)


def run(expression: str) -> bool | str:
    return SelectorCache().matches(expression, 0, GPU.to_cel)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "A100"', True),
        ('device.attributes["gpu.example.com"].index >= 4', False),
        ('device.attributes["gpu.example.com"].healthy', True),
        ('device.attributes["pci.example.com"].root.startsWith("pci-")', True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) == 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("32Gi"))', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("32Gi"))', False),
        ('device.capacity["gpu.example.com"].memory == quantity("40960Mi")', True),
        ('quantity("1") == quantity("1000m")', True),
        ('quantity("1.5").isInteger() || quantity("2k").asInteger() == 2000', True),
        ('quantity("1Ki").add(quantity("1")).compareTo(quantity("1025")) == 0', True),
        ('quantity("1").sub(2).sign() == -1', True),
        ('isQuantity("1Gi") && !isQuantity("one")', True),
        (
            'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("535.0.0"))',
            True,
        ),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 535', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ('semver("v1.2", true).compareTo(semver("1.2.0")) == 0', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        (
            'cel.bind(g, device.attributes["gpu.example.com"], g.model == "A100" && g.index == 3)',
            True,
        ),
        ('device.attributes["gpu.example.com"].?nope.orValue("x") == "x"', True),
        ('has(device.attributes["gpu.example.com"].model)', True),
        # An attribute domain the device lacks is an empty map, as upstream.
        ('"model" in device.attributes["other.example.com"]', False),
        ('has(device.capacity["other.example.com"].memory)', False),
    ],
)
def test_expressions(expression: str, expected: bool) -> None:
    assert run(expression) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            'device.attributes["gpu.example.com"].nope == "x"',
            'CEL runtime error: no such key: "nope"',
        ),
        ("device.driver", "CEL runtime error: CEL result of type string could not be converted"),
        ('quantity("lots").sign() == 1', "CEL runtime error: quantities must match the regular"),
        ('quantity("1").isGreaterThan(semver("1.0.0"))', "CEL runtime error: no such overload"),
        (
            '1 + "a" == 2',
            "CEL compile error: compilation failed: ERROR: <input>:1:3: found no "
            "matching overload for '_+_'",
        ),
        (
            "nosuch(device)",
            "CEL compile error: compilation failed: ERROR: <input>:1:7: undeclared "
            "reference to 'nosuch'",
        ),
        ("device.driver ==", "CEL compile error: compilation failed: ERROR: <input>:1:"),
        ('"x"', "CEL compile error: must evaluate to bool or the unknown type, not string"),
    ],
)
def test_errors_are_values_with_a_message(expression: str, message: str) -> None:
    result = run(expression)
    assert isinstance(result, str)
    assert result.startswith(message), result


def test_compiled_once_and_evaluated_once_per_device_kind() -> None:
    cache = SelectorCache()
    calls: list[int] = []

    def view() -> dict[str, object]:
        calls.append(1)
        return GPU.to_cel()

    expression = 'device.attributes["gpu.example.com"].model == "A100"'
    assert cache.compile(expression) is cache.compile(expression)
    for _ in range(3):
        assert cache.matches(expression, 7, view) is True
    assert len(calls) == 1
    assert cache.matches(expression, 8, view) is True
    assert len(calls) == 2
