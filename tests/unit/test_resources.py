"""effective_requests: kube-scheduler's pod request from containers, init containers,
sidecars (restartable init containers) and overhead."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.resources import add, effective_requests

R = Mapping[str, int]


@pytest.mark.parametrize(
    ("containers", "init", "overhead", "expected"),
    [
        pytest.param([], [], None, {}, id="nothing requested"),
        pytest.param(
            [{"cpu": 100}, {"cpu": 200, "memory": 64}],
            [],
            None,
            {"cpu": 300, "memory": 64},
            id="containers add up",
        ),
        pytest.param(
            [{"cpu": 300}], [({"cpu": 500}, False)], None, {"cpu": 500}, id="larger init wins"
        ),
        pytest.param(
            [{"cpu": 300}], [({"cpu": 200}, False)], None, {"cpu": 300}, id="smaller init hidden"
        ),
        pytest.param(
            [{"cpu": 300}],
            [({"cpu": 400}, False), ({"cpu": 900}, False), ({"cpu": 100}, False)],
            None,
            {"cpu": 900},
            id="init containers run one at a time: the largest counts",
        ),
        pytest.param(
            [{"cpu": 100, "memory": 1024}],
            [({"cpu": 1000, "memory": 1}, False)],
            None,
            {"cpu": 1000, "memory": 1024},
            id="the maximum is taken per resource",
        ),
        pytest.param(
            [{"cpu": 300}],
            [({"cpu": 500}, False)],
            {"cpu": 250, "memory": 10},
            {"cpu": 750, "memory": 10},
            id="overhead is added after the maximum",
        ),
        pytest.param(
            [{"cpu": 200}], [({"cpu": 100}, True)], None, {"cpu": 300}, id="sidecar adds to steady"
        ),
        pytest.param(
            [{"cpu": 200}],
            [({"cpu": 100}, True), ({"cpu": 500}, False)],
            None,
            {"cpu": 600},
            id="a sidecar runs beside later init containers",
        ),
        pytest.param(
            [{"cpu": 200}],
            [({"cpu": 500}, False), ({"cpu": 100}, True)],
            None,
            {"cpu": 500},
            id="init containers before a sidecar run without it",
        ),
        pytest.param(
            [{"cpu": 100}],
            [({"cpu": 100}, True), ({"cpu": 200}, True), ({"cpu": 250}, False)],
            None,
            {"cpu": 550},
            id="sidecars accumulate",
        ),
        pytest.param(
            [],
            [({"cpu": 100}, True), ({"cpu": 200}, True)],
            None,
            {"cpu": 300},
            id="sidecars only",
        ),
        pytest.param(
            [{"cpu": 0, "memory": 5}], [], None, {"memory": 5}, id="zero entries are dropped"
        ),
        pytest.param(
            [{"nvidia.com/gpu": 1}],
            [({"nvidia.com/gpu": 2}, False)],
            None,
            {"nvidia.com/gpu": 2},
            id="extended resources follow the same rules",
        ),
    ],
)
def test_effective_requests(
    containers: list[R], init: list[tuple[R, bool]], overhead: R | None, expected: R
) -> None:
    assert effective_requests(containers, init, overhead) == expected


def test_inputs_are_not_modified() -> None:
    containers = [{"cpu": 100}]
    init = [({"cpu": 50}, True), ({"cpu": 400}, False)]
    effective_requests(containers, init, {"cpu": 1})
    assert containers == [{"cpu": 100}]
    assert init == [({"cpu": 50}, True), ({"cpu": 400}, False)]


_REQUESTS = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(0, 10_000), max_size=3
)


def _reference(
    containers: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], overhead: R
) -> dict[str, int]:
    """The pod's usage over its life as a timeline of phases; the request is the peak of
    each resource over the phases, plus overhead."""
    names = {n for r in [*containers, *(r for r, _ in init), overhead] for n in r}
    started: list[R] = []  # sidecars started so far, running until the pod ends
    phases: list[list[R]] = []  # what runs at once in each phase
    for requests, is_sidecar in init:
        if is_sidecar:
            started.append(requests)
            phases.append(list(started))
        else:
            phases.append([*started, requests])
    phases.append([*started, *containers])
    result = {}
    for name in names:
        peak = max(sum(r.get(name, 0) for r in phase) for phase in phases)
        result[name] = peak + overhead.get(name, 0)
    return {k: v for k, v in result.items() if v}


@given(
    st.lists(_REQUESTS, max_size=4),
    st.lists(st.tuples(_REQUESTS, st.booleans()), max_size=4),
    _REQUESTS,
)
def test_properties(
    containers: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], overhead: R
) -> None:
    result = effective_requests(containers, init, overhead)
    assert result == _reference(containers, init, overhead)
    # Never less than the steady state or than any single init container, plus overhead.
    for name in ("cpu", "memory", "nvidia.com/gpu"):
        floor = sum(c.get(name, 0) for c in containers) + overhead.get(name, 0)
        assert result.get(name, 0) >= floor
        for requests, _ in init:
            assert result.get(name, 0) >= requests.get(name, 0) + overhead.get(name, 0)
    if not init:
        total: dict[str, int] = {}
        for c in [*containers, overhead]:
            add(total, c)
        assert result == {k: v for k, v in total.items() if v}
