"""What a node's allocator search depends on, found without building the search.

Nodes whose devices are alike for a set of claims share one search (`allocator.allocate`'s
`shared`): the key is, per device position, whether the device is free, which of the claims'
alternatives it is a candidate for, and the values of the attributes constraints compare,
numbered in order of appearance. Building a whole search to read that key cost a cold
1,000-node filter most of its time: a search object, candidate lists per alternative and a
selector lookup per device and alternative, on every node.

`NodeSignatures` keeps what does not depend on the node (the alternatives' selectors and
tolerations, the attributes compared) and the candidate flags per *projection* of a device:
its driver, the attributes and capacities any of the selectors can observe, its taints and
whether it is supported. On a GPU fleet every device has its own fingerprint (each carries
its node's NVLink domain) but the selectors observe only, say, the memory: the thousand
nodes' devices then fall into one or two projections, and a node's key costs a projection
and a dictionary lookup per device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from gangsched.core.dra.cel import SelectorCache, Selectors
from gangsched.core.dra.inventory import DeviceEntry, DeviceKinds, Inventory, NodeDevices
from gangsched.core.dra.model import (
    AllocationMode,
    AttributeValue,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceToleration,
)

#: One alternative's filter: the class's and the request's selectors, and its tolerations.
_Filter = tuple[Selectors, tuple[DeviceToleration, ...]]
_UNKNOWN = object()


@dataclass(slots=True, eq=False)
class NodeSignatures:
    """The node-independent part of `allocator._Search.signature` for one set of claim
    specs and one inventory, with the same answers (a property test compares the two)."""

    selectors: SelectorCache
    kinds: DeviceKinds
    #: Per alternative of every request of every claim, in the search's order; None when an
    #: alternative's device class does not exist (the search raises: nothing is shared).
    filters: tuple[_Filter, ...] | None
    #: The attributes `matchAttribute` constraints compare (sorted).
    compared: tuple[str, ...]
    #: The attribute and capacity names of the inventory's devices that some selector can
    #: observe (sorted); None: a selector can observe every one (see `cel.Selector`).
    observed: tuple[tuple[str, ...], tuple[str, ...]] | None
    #: `least_needed` of the claims.
    need: int | None
    #: Candidate flags per device projection; None when a selector fails on the device.
    _flags: dict[object, tuple[bool, ...] | None] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        specs: Sequence[ClaimSpec],
        *,
        classes: Mapping[str, DeviceClass],
        selectors: SelectorCache,
        inventory: Inventory,
    ) -> NodeSignatures:
        filters: list[_Filter] | None = []
        seen: frozenset[str] | None = frozenset()
        for spec in specs:
            for request in spec.requests:
                for alt in request.alternatives:
                    device_class = classes.get(alt.class_name)
                    if device_class is None or filters is None:
                        filters = None
                        continue
                    filters.append(((device_class.selectors, alt.selectors), alt.tolerations))
                    for expression in (*device_class.selectors, *alt.selectors):
                        compiled = selectors.compile(expression)
                        if compiled.visible is None or seen is None:
                            seen = None
                        else:
                            seen |= compiled.seen
        observed = None
        if seen is not None:
            attributes, capacity = inventory.names()
            observed = (tuple(sorted(seen & attributes)), tuple(sorted(seen & capacity)))
        compared = sorted({c.attribute for spec in specs for c in spec.constraints})
        return cls(
            selectors=selectors,
            kinds=inventory.kinds,
            filters=None if filters is None else tuple(filters),
            compared=tuple(compared),
            observed=observed,
            need=least_needed(specs),
        )

    def signature(
        self,
        node: NodeDevices,
        *,
        entries: Sequence[DeviceEntry],
        is_free: Callable[[int], bool],
    ) -> object | None:
        """The search's signature on `node` (see `allocator._Search.signature`), or None
        when it has none (a missing class, a selector failing on one of the devices)."""
        if self.filters is None:
            return None
        flags_of, compared = self._flags, self.compared
        numbering: list[dict[object, int]] = [{} for _ in compared]
        shape: list[tuple[tuple[bool, ...], tuple[int, ...]]] = []
        for index in node.devices:
            entry = entries[index]
            device = entry.device
            key = self._projection(entry.driver, device)
            flags = flags_of.get(key, _UNKNOWN)
            if flags is _UNKNOWN:
                flags = flags_of[key] = self._candidate_flags(entry)
            if flags is None:
                return None
            values: list[int] = []
            if compared:
                attributes = device.attributes
                for seen, name in zip(numbering, compared, strict=True):
                    value = attributes.get(name)
                    values.append(
                        -1 if value is None else seen.setdefault((type(value), value), len(seen))
                    )
            shape.append((flags, tuple(values)))  # type: ignore[arg-type]
        free = tuple(map(is_free, node.devices))
        return (free, tuple(shape), node.unusable_pools)

    def _projection(self, driver: str, device: Device) -> object:
        """What any of the selectors can observe of the device, with its taints and whether
        it is supported: devices with equal projections are candidates for the same
        alternatives. Missing names project to None (no attribute value is None)."""
        if self.observed is None:
            attributes: object = tuple(sorted(_typed(device.attributes.items())))
            capacity: object = tuple(sorted(_amounts(device.capacity.items())))
        else:
            names, amounts = self.observed
            values = device.attributes
            attributes = tuple([(type(v), v) for v in map(values.get, names)]) if names else ()
            capacity = ()
            if amounts:
                quantities = device.capacity
                capacity = tuple(
                    [
                        None if q is None else (q.numerator, q.denominator)
                        for q in map(quantities.get, amounts)
                    ]
                )
        return (driver, attributes, capacity, device.taints, device.unsupported)

    def _candidate_flags(self, entry: DeviceEntry) -> tuple[bool, ...] | None:
        """Whether the device is a candidate for each alternative (`_Search._candidates`'s
        test); None when a selector fails to compile or evaluate on it."""
        assert self.filters is not None
        device = entry.device
        fingerprint = self.kinds.fingerprint(entry.driver, device)
        view = self.kinds.views[fingerprint]
        flags: list[bool] = []
        for selectors, tolerations in self.filters:
            if device.unsupported:
                flags.append(False)
                continue
            selected = self.selectors.passes(selectors, fingerprint, view)
            if selected is None:
                return None
            flags.append(
                selected
                and not any(
                    taint.effect in ("NoSchedule", "NoExecute")
                    and not any(t.tolerates(taint) for t in tolerations)
                    for taint in device.taints
                )
            )
        return tuple(flags)


def least_needed(specs: Sequence[ClaimSpec]) -> int | None:
    """How many devices the claims need at the least; None when a request has admin access
    (it may take devices in use: counting free ones proves nothing)."""
    alternatives = [a for spec in specs for r in spec.requests for a in r.alternatives]
    if any(a.admin_access for a in alternatives):
        return None
    return sum(
        min(a.count if a.mode is AllocationMode.EXACT_COUNT else 1 for a in r.alternatives)
        for spec in specs
        for r in spec.requests
        if r.alternatives
    )


def free_shortfall(
    need: int | None, node: NodeDevices, is_free: Callable[[int], bool]
) -> int | None:
    """The number of free devices when `node` has fewer than `need` (`least_needed`), which
    fails the claims without a search; None otherwise, and always when a pool of the node
    is unusable (an `All` request must say so)."""
    if need is None or node.unusable_pools:
        return None
    free = sum(1 for index in node.devices if is_free(index))
    return free if free < need else None


def _typed(items: Iterable[tuple[str, AttributeValue]]) -> tuple[tuple[str, type, object], ...]:
    # Types beside values: True == 1 for Python, not for a selector.
    return tuple((k, type(v), v) for k, v in items)


def _amounts(items: Iterable[tuple[str, Fraction]]) -> tuple[tuple[str, int, int], ...]:
    # Fractions as integer pairs: hashing a Fraction is slow.
    return tuple((k, v.numerator, v.denominator) for k, v in items)
