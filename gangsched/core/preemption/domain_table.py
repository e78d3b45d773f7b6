"""The victims of one topology domain, cut out of the attempt's victim table.

The domain search (`domains.py`) gives each candidate domain its own victim table: the units
holding capacity in the domain (an All-mode group whole, with its pods elsewhere), re-indexed.
A Python pass over every victim pod per domain cost 16 ms at 40,000 pods, sixteen times per
attempt; the table's pods are laid out as arrays once, and each domain is then a few array
lookups.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from gangsched.core.preemption.victims import VictimTable
from gangsched.core.snapshot import BoolVector

Positions = npt.NDArray[np.intp]


@dataclass(slots=True, eq=False)
class DomainTables:
    """A victim table's pods as arrays: node index and owning unit (position in `units`),
    and the pods of each unit (positions into the table's pod lists)."""

    table: VictimTable
    node: Positions
    owner: Positions
    by_owner: Positions
    starts: Positions

    @classmethod
    def of(cls, table: VictimTable) -> DomainTables:
        position = {id(unit): i for i, unit in enumerate(table.units)}
        owner = np.fromiter(
            (position[id(o)] for o in table.owners), dtype=np.intp, count=len(table.owners)
        )
        by_owner = np.argsort(owner, kind="stable").astype(np.intp)
        starts = np.searchsorted(owner[by_owner], np.arange(len(table.units) + 1))
        nodes = np.asarray(table.nodes, dtype=np.intp)
        return cls(table, nodes, owner, by_owner, starts.astype(np.intp))

    def of_domain(self, mask: BoolVector) -> VictimTable:
        """The victims holding capacity where `mask` is set, in the table's order,
        re-indexed from 0; their pods outside the mask too."""
        table = self.table
        units_in = np.unique(self.owner[mask[self.node]]) if self.node.size else self.node
        copies = [replace(table.units[int(u)], index=i) for i, u in enumerate(units_in)]
        copy_of = dict(zip(units_in.tolist(), copies, strict=True))
        spans = [self.by_owner[self.starts[u] : self.starts[u + 1]] for u in units_in.tolist()]
        pods = np.sort(np.concatenate(spans)).tolist() if spans else []
        return VictimTable(
            copies,
            [copy_of[int(self.owner[i])] for i in pods],
            [table.nodes[i] for i in pods],
            [table.requests[i] for i in pods],
        )
