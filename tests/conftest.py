"""Hypothesis profiles for every property test (issue 29).

- ``ci``, the default: derandomized (each test draws its examples from a seed fixed by the
  test itself), no example database, no deadline and no too-slow health check (both depend
  on the machine's load): ``make test`` runs the same examples every time and never fails by
  chance.
- ``fuzz`` (``make fuzz``; or ``HYPOTHESIS_PROFILE=fuzz`` or ``--hypothesis-profile=fuzz``):
  random seeds, every test's ``max_examples`` (its own, or hypothesis' 100) multiplied by
  ``GANGSCHED_FUZZ_SCALE`` (default 5), the rest as ``ci``. A failure prints its example and
  the ``@reproduce_failure`` blob; ``make fuzz`` also prints the run's seed.

``--hypothesis-seed=N`` replays a seed under either profile (a derandomized run would ignore
it): ``make fuzz FUZZ_SEED=N`` is the whole run again, one test with the same scale is
``pytest --hypothesis-profile=fuzz --hypothesis-seed=N PATH::TEST``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, is_hypothesis_test, settings

#: How many times its own max_examples each property runs under the fuzz profile.
FUZZ_SCALE = int(os.environ.get("GANGSCHED_FUZZ_SCALE", "5"))

_COMMON = settings(
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci", _COMMON, derandomize=True)
settings.register_profile("fuzz", _COMMON, derandomize=False)
# Test modules build their settings objects when imported, from the profile loaded then:
# this one, or the one --hypothesis-profile names (loaded before collection).
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """After hypothesis' own: a seed given on the command line is replayed, not ignored."""
    current = settings()  # the loaded profile's values
    if config.getoption("--hypothesis-seed") is not None and current.derandomize:
        name = f"{settings.get_current_profile_name()}-seeded"
        settings.register_profile(name, current, derandomize=False)
        settings.load_profile(name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under the fuzz profile, every property's max_examples (its own, or the profile's 100)
    times FUZZ_SCALE: a test's explicit ``settings(max_examples=...)`` would otherwise win
    over anything a profile says."""
    if settings.get_current_profile_name() != "fuzz":
        return
    scaled: set[int] = set()
    for item in items:
        obj = getattr(item, "obj", None)
        test: Any = getattr(obj, "__func__", obj)
        if not is_hypothesis_test(test) or id(test) in scaled:
            continue  # not a property, or one already scaled (parametrized: one per case)
        scaled.add(id(test))
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if not isinstance(own, settings):
            raise pytest.UsageError(
                f"{item.nodeid}: hypothesis keeps a test's settings elsewhere now; "
                "tests/conftest.py cannot scale max_examples for the fuzz profile"
            )
        test._hypothesis_internal_use_settings = settings(
            own, max_examples=own.max_examples * FUZZ_SCALE
        )
