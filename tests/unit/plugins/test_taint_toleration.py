"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score."""

from __future__ import annotations

import pytest

from gangsched.core.model import Taint, Toleration
from gangsched.core.plugins.taint_toleration import PreferNoScheduleTaints, TaintToleration
from gangsched.core.status import Code
from tests.builders import node as make_node
from tests.builders import pod as make_pod
from tests.builders import snapshot

from .probe import passing, rejections, scores

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
EVICT = Taint("maintenance", "true", "NoExecute")
SOFT = Taint("spot", "true", "PreferNoSchedule")


def untolerated(taint: Taint) -> tuple[str, Code]:
    return (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}", Code.UNRESOLVABLE)


@pytest.mark.parametrize(
    ("taint", "tolerations", "tolerated"),
    [
        pytest.param(GPU_TAINT, (), False, id="NoSchedule untolerated"),
        pytest.param(EVICT, (), False, id="NoExecute untolerated"),
        pytest.param(SOFT, (), True, id="PreferNoSchedule never filters"),
        pytest.param(
            GPU_TAINT,
            (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),),
            True,
            id="Equal with value and effect",
        ),
        pytest.param(
            GPU_TAINT,
            (Toleration("nvidia.com/gpu", "Equal", "absent", "NoSchedule"),),
            False,
            id="Equal with another value",
        ),
        pytest.param(
            GPU_TAINT, (Toleration("nvidia.com/gpu", "Exists"),), True, id="Exists on the key"
        ),
        pytest.param(GPU_TAINT, (Toleration(operator="Exists"),), True, id="Exists, empty key"),
        pytest.param(
            EVICT,
            (Toleration(operator="Exists", effect="NoSchedule"),),
            False,
            id="Exists, empty key, other effect",
        ),
        pytest.param(
            EVICT, (Toleration("maintenance", "Equal", "true"),), True, id="effect-less toleration"
        ),
        pytest.param(
            EVICT,
            (Toleration("maintenance", "Equal", "true", "NoSchedule"),),
            False,
            id="effect must match when given",
        ),
        pytest.param(
            GPU_TAINT, (Toleration("other", "Exists"),), False, id="toleration for another key"
        ),
        pytest.param(
            GPU_TAINT,
            (Toleration("other", "Exists"), Toleration("nvidia.com/gpu", "Exists")),
            True,
            id="any toleration suffices",
        ),
    ],
)
def test_single_taint(taint: Taint, tolerations: tuple[Toleration, ...], tolerated: bool) -> None:
    snap = snapshot([make_node("tainted", taints=[taint]), make_node("clean")])
    pod = make_pod(tolerations=tolerations)
    assert passing(TaintToleration(), pod, snap) == (
        ["clean", "tainted"] if tolerated else ["clean"]
    )
    assert rejections(TaintToleration(), pod, snap) == (
        {} if tolerated else {"tainted": [untolerated(taint)]}
    )


def test_every_hard_taint_must_be_tolerated_and_the_first_is_reported() -> None:
    snap = snapshot([make_node("n", taints=[SOFT, GPU_TAINT, EVICT])])
    tolerate_gpu = Toleration("nvidia.com/gpu", "Exists")
    assert rejections(TaintToleration(), make_pod(), snap) == {"n": [untolerated(GPU_TAINT)]}
    assert rejections(TaintToleration(), make_pod(tolerations=[tolerate_gpu]), snap) == {
        "n": [untolerated(EVICT)]
    }
    everything = [tolerate_gpu, Toleration("maintenance", "Exists")]
    assert passing(TaintToleration(), make_pod(tolerations=everything), snap) == ["n"]


def test_reason_wording() -> None:
    assert untolerated(Taint("k", "v", "NoSchedule"))[0] == "node(s) had untolerated taint {k: v}"


def test_prefer_no_schedule_scoring() -> None:
    other_soft = Taint("old-kernel", "", "PreferNoSchedule")
    snap = snapshot(
        [
            make_node("clean"),
            make_node("one", taints=[SOFT]),
            make_node("two", taints=[SOFT, other_soft]),
            make_node("hard", taints=[GPU_TAINT]),  # hard taints do not lower the score
        ]
    )
    assert scores(PreferNoScheduleTaints(), make_pod(), snap) == {
        "clean": 100.0,
        "one": 50.0,
        "two": 0.0,
        "hard": 100.0,
    }
    tolerant = make_pod(tolerations=[Toleration("spot", "Exists", effect="PreferNoSchedule")])
    assert scores(PreferNoScheduleTaints(), tolerant, snap) == {
        "clean": 100.0,
        "one": 100.0,
        "two": 0.0,
        "hard": 100.0,
    }


def test_no_soft_taints_everyone_scores_full() -> None:
    snap = snapshot([make_node("a"), make_node("b", taints=[GPU_TAINT])])
    assert scores(PreferNoScheduleTaints(), make_pod(), snap) == {"a": 100.0, "b": 100.0}


def test_taint_changes_invalidate_the_cached_mask() -> None:
    snap = snapshot([make_node("n")])
    assert passing(TaintToleration(), make_pod(), snap) == ["n"]
    snap.update_node(make_node("n", taints=[GPU_TAINT]))
    assert passing(TaintToleration(), make_pod(), snap) == []
