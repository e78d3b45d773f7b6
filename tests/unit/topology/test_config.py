"""The `topology` settings of the configuration file reach the placer and the preemptor."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangsched.config import ConfigError, load_config
from gangsched.core.preemption.preemptor import WorkloadPreemptor

SETTINGS = """\
topology:
  maxEvaluations: 5
  percentageOfDomains: 20
  preemptionDomains: 3
  exactVictimUnits: 8
  exactExpansions: 300
  exactVerifications: 9
"""


def test_every_topology_setting_is_carried_into_the_core(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(SETTINGS)
    config = load_config(path)
    placement = config.scheduler_config().topology
    assert (placement.max_evaluations, placement.percentage_of_domains) == (5, 20)
    preemptor = config.preemptor()
    assert isinstance(preemptor, WorkloadPreemptor)
    search = preemptor.topology
    assert (
        search.max_domains,
        search.exact_units,
        search.exact_expansions,
        search.exact_verifications,
    ) == (3, 8, 300, 9)


def test_a_budget_of_zero_checks_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("topology: {exactVerifications: 0}\n")
    with pytest.raises(ConfigError, match=r"topology\.exactVerifications"):
        load_config(path)
