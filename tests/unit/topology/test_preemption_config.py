"""The configured topology settings reach preemption: its dry runs, its upstream choice and
the placement score that breaks ties between domains are the live cycle's, so a cycle and a
preemption never disagree about which domain a gang belongs in."""

from __future__ import annotations

import pytest

from gangsched.config import Config
from gangsched.core.cluster import ClusterState
from gangsched.core.model import Pod
from gangsched.core.scheduler import Scheduler
from gangsched.core.status import Code
from gangsched.core.topology.request import TopologyRequest
from tests.builders import cluster, group, node, pod
from tests.unit.preemption.drive import BOTH, HIGH, LOW, preemptor_gang

RACK = "example.com/rack"

#: Only CPU in the domain score (the members request no memory, so none is added).
CPU_ONLY = Config.model_validate({"scoring": {"resources": {"cpu": 1.0}}})


def state() -> ClusterState:
    """Racks a and b, two nodes of 4 CPUs and 16Gi each, each rack freed for the gang (two
    members of 2 CPUs) by one priority-10 pod of 4 CPUs: a tie by every count of the cost.
    With the victims gone and the gang placed, a is the fuller by CPU (7 of 8 against 6 of 8)
    and b by CPU and memory together ((6/8 + 12/32) / 2 against (7/8 + 1/32) / 2)."""
    nodes = [node(f"{r}-{i}", 4, memory="16Gi", labels={RACK: r}) for r in "ab" for i in range(2)]
    running = [
        pod("va", 4, memory=None, node_name="a-0", priority=LOW, created=1.0),
        pod("ha", 3, memory="1Gi", node_name="a-1", priority=HIGH, created=2.0),
        pod("vb", 4, memory=None, node_name="b-0", priority=LOW, created=3.0),
        pod("hb", 2, memory="12Gi", node_name="b-1", priority=HIGH, created=4.0),
    ]
    members = [
        pod(m.name, 2, memory=None, priority=HIGH, group="g", created=m.created)
        for m in preemptor_gang("g", 2, 2)
    ]
    g = group("g", 2, priority=HIGH)
    g.topology = TopologyRequest(required=RACK)
    return cluster(nodes, [*running, *members], [g])


def preempted(config: Config, strategy: str) -> list[str]:
    """The victims of the gang's first attempt, the scheduler and its preemptor built from
    `config` as `gangsched run` and `gangsched simulate` build them."""
    sched = Scheduler(
        state(), config.scheduler_config(), preemptor=config.preemptor(strategy=strategy)
    )
    sched.enqueue_pending(0.0)
    report = sched.step(0.0)
    assert report is not None and report.preemption is not None
    assert report.preemption.started, report.preemption.message
    return sorted(p.name for p in report.preemption.victims)


def rack_of_live_cycle(config: Config, without: list[Pod]) -> set[str]:
    """Where the configured live cycle puts the gang once `without` are gone."""
    current = state()
    for victim in without:
        current.delete_pod(victim.key)
    sched = Scheduler(current, config.scheduler_config())
    ref = next(p.group for p in current.pods.values() if p.group is not None)
    gang = sched.gang(current.unit_of(ref)[0])
    result = sched.placer.place(gang, current.snapshot)
    assert result.code is Code.SUCCESS
    return {current.snapshot.nodes[n].name[0] for _, n in result.placements}


@BOTH
def test_the_default_score_breaks_the_tie_for_the_fuller_rack_by_cpu_and_memory(
    strategy: str,
) -> None:
    assert preempted(Config(), strategy) == ["vb"]


@BOTH
def test_the_configured_score_breaks_the_tie_between_domains(strategy: str) -> None:
    """Counting CPU only, rack a is the fuller once the victims are gone: the live cycle puts
    the gang there, and so must preemption (with the default score it chose b)."""
    assert preempted(CPU_ONLY, strategy) == ["va"]


def test_the_preemptor_places_with_the_schedulers_topology_settings() -> None:
    config = Config.model_validate(
        {
            "scoring": {"resources": {"cpu": 1.0, "nvidia.com/gpu": 4.0}},
            "topology": {"maxEvaluations": 3, "percentageOfDomains": 40},
        }
    )
    preemptor = config.preemptor()
    assert preemptor is not None
    assert getattr(preemptor, "placement", None) == config.scheduler_config().topology


@pytest.mark.parametrize("config", [Config(), CPU_ONLY], ids=["default", "cpu-only"])
def test_preemption_and_the_live_cycle_agree_on_the_rack(config: Config) -> None:
    victims = preempted(config, "mincost")
    rack = {"va": "a", "vb": "b"}[victims[0]]
    everyone = {p.name: p for p in state().pods.values()}
    assert rack_of_live_cycle(config, [everyone["va"], everyone["vb"]]) == {rack}
