"""Which nodes can allocate a set of claim specs, kept up to date node by node.

The DynamicResources filter asks this for every pending member of a gang over every node.
Running the allocator on 1,000 nodes for each of 64 members would cost seconds; but a node's
answer for given claim specs changes only when one of its devices is taken or freed. So each
node has a version, bumped whenever a device usable there changes hands, and the answers for
one tuple of claim specs are an array over the snapshot's nodes with the version each was
computed at: a filter recomputes only the candidate nodes whose version moved. Identical gang
members (claims generated from one template) share the specs, hence the answers: the second
member re-runs the allocator only on the node the first one took devices from. Nodes whose
devices are alike for the claims share one search (`shared`), so a cold 1,000-node filter
costs a few searches, not a thousand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gangsched.core.dra.allocator import Outcome, SharedSearches
from gangsched.core.dra.model import ClaimSpec
from gangsched.core.model import Node

SpecKey = tuple[ClaimSpec, ...]
#: An allocator answer for one node: the outcome, or why the claims can go nowhere as written.
Answer = Outcome | str


@dataclass(slots=True, eq=False)
class _Answers:
    versions: npt.NDArray[np.int64]
    ok: npt.NDArray[np.bool_]
    answers: dict[int, Answer] = field(default_factory=dict)
    #: Per node: would the claims fit if every device there were free (for preemption)?
    fit_empty: dict[int, bool] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class FeasibilityCache:
    _nodes: Sequence[Node] | None = None
    _generation: int = -1
    _index: dict[str, int] = field(default_factory=dict)
    _versions: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    _specs: dict[SpecKey, _Answers] = field(default_factory=dict)
    #: Allocator outcomes by search signature (see `allocator.allocate`), per claim specs.
    _shared: dict[SpecKey, SharedSearches] = field(default_factory=dict)

    def align(self, nodes: Sequence[Node], generation: int) -> None:
        """Follow the snapshot's node list (a new list or changed labels start afresh)."""
        if nodes is self._nodes and generation == self._generation:
            return
        self._nodes, self._generation = nodes, generation
        self._index = {node.name: i for i, node in enumerate(nodes)}
        self._versions = np.zeros(len(nodes), dtype=np.int64)
        self._specs.clear()

    def index_of(self, node: Node) -> int | None:
        index = self._index.get(node.name)
        if index is None or self._nodes is None or self._nodes[index] is not node:
            return None
        return index

    def bump(self, node_name: str | None) -> None:
        """Devices usable on `node_name` (None: on any node) changed hands."""
        if node_name is None:
            self._versions += 1
            return
        index = self._index.get(node_name)
        if index is not None:
            self._versions[index] += 1

    def reset(self) -> None:
        """Devices or classes changed: every answer is stale."""
        self._specs.clear()
        self._shared.clear()

    def shared(self, key: SpecKey) -> SharedSearches:
        """Outcomes nodes with alike devices share for these claim specs (valid until the
        devices or classes change: `reset`)."""
        found = self._shared.get(key)
        if found is None or len(found.outcomes) > 10_000:
            if len(self._shared) > 1000:
                self._shared.clear()
            found = self._shared[key] = SharedSearches()
        return found

    def feasible(
        self,
        key: SpecKey,
        candidates: npt.NDArray[np.bool_],
        compute: Callable[[int], Answer],
    ) -> npt.NDArray[np.bool_]:
        """The candidate nodes where the claims can be allocated now."""
        entry = self._entry(key)
        stale = np.flatnonzero(candidates & (entry.versions != self._versions))
        for index in stale:
            node = int(index)
            answer = compute(node)
            entry.answers[node] = answer
            entry.ok[node] = not isinstance(answer, str) and answer.ok
            entry.versions[node] = self._versions[node]
        return candidates & entry.ok

    def answer(self, key: SpecKey, node: int, compute: Callable[[int], Answer]) -> Answer:
        """One node's current answer (computed now if stale)."""
        entry = self._entry(key)
        if entry.versions[node] != self._versions[node]:
            entry.answers[node] = compute(node)
            entry.ok[node] = not isinstance(entry.answers[node], str) and bool(
                getattr(entry.answers[node], "ok", False)
            )
            entry.versions[node] = self._versions[node]
        return entry.answers[node]

    def fits_empty(self, key: SpecKey, node: int, compute: Callable[[int], bool]) -> bool:
        entry = self._entry(key)
        found = entry.fit_empty.get(node)
        if found is None:
            found = entry.fit_empty[node] = compute(node)
        return found

    def _entry(self, key: SpecKey) -> _Answers:
        entry = self._specs.get(key)
        if entry is None:
            size = len(self._versions)
            entry = _Answers(
                versions=np.full(size, -1, dtype=np.int64), ok=np.zeros(size, dtype=np.bool_)
            )
            if len(self._specs) > 1000:
                self._specs.clear()
            self._specs[key] = entry
        return entry
