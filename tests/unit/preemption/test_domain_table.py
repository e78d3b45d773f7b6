"""A domain's victim table (core/preemption/domain_table.py) cut out with array lookups is
the one the per-pod definition gives: the units with a pod in the domain (an All-mode group
or a gang whole, its pods elsewhere too), in the table's order, re-indexed from 0, with all
their pods in the table's order. Random racks as in test_domain_bounds.py."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from gangsched.core.preemption.domain_table import DomainTables
from gangsched.core.preemption.victims import VictimTable, collect_victim_table
from gangsched.core.scheduler import Scheduler
from gangsched.core.topology.domains import partition
from tests.unit.preemption.racks import PREEMPTOR, RACK
from tests.unit.preemption.test_domain_bounds import Spec, build, specs


def by_definition(table: VictimTable, mask: list[bool]) -> VictimTable:
    chosen = [u for u in table.units if any(mask[node] for _, node in u.placed)]
    copies = {id(u): replace(u, index=i) for i, u in enumerate(chosen)}
    rows = [
        (copies[id(owner)], node, request)
        for owner, node, request in zip(table.owners, table.nodes, table.requests, strict=True)
        if id(owner) in copies
    ]
    return VictimTable(
        list(copies.values()),
        [owner for owner, _, _ in rows],
        [node for _, node, _ in rows],
        [request for _, _, request in rows],
    )


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs())
def test_a_domain_table_is_the_one_the_definition_gives(spec: Spec) -> None:
    state, gang = build(spec)
    table = collect_victim_table(Scheduler(state).gang(gang.ref), state, PREEMPTOR)
    tables = DomainTables.of(table)
    for domain in partition(state.snapshot, RACK).domains:
        assert dump(tables.of_domain(domain.mask)) == dump(
            by_definition(table, domain.mask.tolist())
        )


def dump(table: VictimTable) -> tuple[object, ...]:
    """Units compare by identity: their fields and positions instead."""
    return (
        [(u.index, u.key, u.placed) for u in table.units],
        [table.units.index(owner) for owner in table.owners],
        table.nodes,
        table.requests,
    )
