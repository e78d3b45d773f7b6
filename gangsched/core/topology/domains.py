"""Candidate domains: the nodes grouped by the value of a topology label.

One candidate per value, as upstream's TopologyPlacementGenerator; nodes without the label
belong to no domain and are never used by a constrained gang. The grouping depends on node
labels only, so it is cached in the snapshot until labels or the node set change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gangsched.core.framework import IndexVector
from gangsched.core.snapshot import BoolVector, Snapshot

#: Per-node domain index where a node has no value for the key.
NO_DOMAIN = -1


@dataclass(frozen=True, slots=True, eq=False)
class Domain:
    """One value of one label (or of two, when a preferred level refines a required one).

    `key` and `value` are what users see; `within` is the required level's value when this
    domain is a preferred-level domain inside it.

    Equal and hashed by those labels alone: the generated `__eq__`/`__hash__` would take in
    `nodes` and `mask`, arrays, so a set of domains raised "unhashable type" and `==`
    (`in` a list) "truth value of an array is ambiguous". The arrays follow from the labels
    within one snapshot."""

    key: str
    value: str
    nodes: IndexVector
    mask: BoolVector
    within: tuple[str, str] | None = None

    @property
    def ident(self) -> tuple[str, str, tuple[str, str] | None]:
        return (self.key, self.value, self.within)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Domain):
            return NotImplemented
        return self.ident == other.ident

    def __hash__(self) -> int:
        return hash(self.ident)

    @property
    def name(self) -> str:
        if self.within is None:
            return f"{self.key}={self.value}"
        return f"{self.within[0]}={self.within[1]}/{self.key}={self.value}"


@dataclass(frozen=True, slots=True, eq=False)
class Partition:
    """Every domain of one level, and each node's domain index (NO_DOMAIN: none). Compared
    and hashed by identity (`of_node` is an array)."""

    domains: tuple[Domain, ...]
    of_node: IndexVector

    def domain_of(self, node: int) -> Domain | None:
        index = int(self.of_node[node])
        return None if index == NO_DOMAIN else self.domains[index]


def partition(snap: Snapshot, key: str, within: str | None = None) -> Partition:
    """The domains of label `key`, split by the value of `within` too when given (a
    preferred level inside a required one: a preferred domain never crosses a required one).
    Domains come in value order, so every order derived from them is deterministic."""
    cached: Partition = snap.cached_mask(
        "TopologyDomains", (key, within), lambda: _compute(snap, key, within)
    )
    return cached


def _compute(snap: Snapshot, key: str, within: str | None) -> Partition:
    values: dict[tuple[str, str], list[int]] = {}
    for index, node in enumerate(snap.nodes):
        value = node.labels.get(key)
        if value is None:
            continue
        outer = ""
        if within is not None:
            found = node.labels.get(within)
            if found is None:
                continue
            outer = found
        values.setdefault((outer, value), []).append(index)
    of_node = np.full(len(snap), NO_DOMAIN, dtype=np.intp)
    domains: list[Domain] = []
    for position, ((outer, value), members) in enumerate(sorted(values.items())):
        nodes = np.array(members, dtype=np.intp)
        mask = np.zeros(len(snap), dtype=np.bool_)
        mask[nodes] = True
        of_node[nodes] = position
        domains.append(
            Domain(
                key=key,
                value=value,
                nodes=nodes,
                mask=mask,
                within=(within, outer) if within is not None else None,
            )
        )
    return Partition(domains=tuple(domains), of_node=of_node)


def shared_domain(
    levels: tuple[str | None, ...], node_labels: list[dict[str, str]]
) -> tuple[str, str | None]:
    """The finest level (of `levels`, finest first) whose label all the given nodes share,
    and its value; (the required or last named key, None) when they share none (or there
    are no nodes: nothing placed yet)."""
    named = [key for key in levels if key is not None]
    for key in named:
        values = {labels.get(key) for labels in node_labels}
        if node_labels and len(values) == 1 and None not in values:
            return key, values.pop()
    return named[-1], None
