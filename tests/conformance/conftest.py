"""Fixtures of the conformance suite."""

from __future__ import annotations

import pytest

from tests.conformance.harness import STRATEGIES


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> list[str]:
    """`gangsched simulate` arguments choosing each preemption strategy in turn: `kep` is
    upstream's algorithm, `mincost` the default; both must reach upstream's outcome."""
    name = str(request.param)
    reason = getattr(request.function, "xfail_strategies", {}).get(name)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{reason} [{name}]"))
    return ["--preemption", name]
