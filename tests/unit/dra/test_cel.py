"""CEL selectors with the Kubernetes DRA environment (quantity, semver, cel.bind, ...)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gangsched.core.dra.cel import DeviceView, SelectorCache
from gangsched.core.dra.semver import parse_semver

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
    return SelectorCache().matches(expression, 0, GPU)


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


class Counting:
    """Stands in for a compiled program and counts evaluations."""

    def __init__(self, program: Any) -> None:
        self.program = program
        self.calls = 0

    def eval(self, **kwargs: Any) -> Any:
        self.calls += 1
        return self.program.eval(**kwargs)


def counted(cache: SelectorCache, expression: str) -> Counting:
    selector = cache.compile(expression)
    counter = Counting(selector.program)
    selector.program = counter
    return counter


def other_gpu(**attributes: Any) -> DeviceView:
    return DeviceView(GPU.driver, {**GPU.attributes, **attributes}, GPU.capacity)


def test_compiled_once_and_evaluated_once_per_device_kind() -> None:
    cache = SelectorCache()
    expression = 'device.attributes["gpu.example.com"].model == "A100"'
    assert cache.compile(expression) is cache.compile(expression)
    counter = counted(cache, expression)
    for _ in range(3):
        assert cache.matches(expression, 7, GPU) is True
    assert counter.calls == 1


def test_devices_differing_only_in_what_a_selector_cannot_see_share_its_result() -> None:
    cache = SelectorCache()
    expression = 'device.attributes["gpu.example.com"].model == "A100"'
    counter = counted(cache, expression)
    for kind in range(5):  # other index: invisible to this expression
        assert cache.matches(expression, kind, other_gpu(**{"gpu.example.com/index": kind}))
    assert counter.calls == 1
    assert cache.matches(expression, 9, other_gpu(**{"gpu.example.com/model": "T4"})) is False
    assert counter.calls == 2


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.example.com"].exists(k, k == "index")',
        'size(device.attributes["gpu.example.com"]) > 2',
        'device.attributes["gpu.example.com"]["ind" + "ex"] >= 0',
    ],
)
def test_expressions_that_reach_unnamed_attributes_see_every_attribute(expression: str) -> None:
    cache = SelectorCache()
    counter = counted(cache, expression)
    cache.matches(expression, 1, other_gpu(**{"gpu.example.com/index": 1}))
    cache.matches(expression, 2, other_gpu(**{"gpu.example.com/index": 2}))
    assert counter.calls == 2
