"""Which devices exist and which node can use each: ResourceSlices folded into pools.

A pool (driver, pool name) counts only at its newest generation, and only once every one of
that generation's `resourceSliceCount` slices has been seen; an incomplete pool offers no
device (and makes `allocationMode: All` fail, since "all" is unknown), as upstream's
`GatherPools`. A pool listing one device name twice is invalid and offers nothing.

Devices get a global index (`DeviceEntry.index`) so the in-use set and the per-node device
lists are plain integers, and a fingerprint (see `model.Device`) shared by identical devices,
given when first asked for (`DeviceKinds.fingerprint`): on a fleet whose devices each carry
their own NVLink domain, a filter mostly never needs one (see `signature.py`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from gangsched.core.dra.cel import DeviceView
from gangsched.core.dra.model import Device, ResourceSlice
from gangsched.core.labels import NodeSelectorTerm
from gangsched.core.model import Node

DeviceId = tuple[str, str, str]  # driver, pool, device
_TOKENS = itertools.count(1)


@dataclass(slots=True)
class DeviceEntry:
    index: int
    driver: str
    pool: str
    device: Device
    slice: ResourceSlice

    @property
    def device_id(self) -> DeviceId:
        return (self.driver, self.pool, self.device.name)

    @property
    def node_local(self) -> bool:
        return self.slice.node_name is not None


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    generation: int
    slices: list[ResourceSlice]
    complete: bool
    invalid: str = ""
    #: A usable pool's devices by name: their inventory indices.
    devices: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(slots=True)
class NodeDevices:
    """What one node can use: device indices (in a fixed order) and the pools that cannot be
    used because they are incomplete or invalid (their labels, for `All` requests)."""

    devices: tuple[int, ...]
    unusable_pools: tuple[str, ...] = ()


@dataclass(slots=True)
class DeviceKinds:
    """Fingerprints of device kinds, kept across inventory rebuilds so that selector results
    cached per kind stay valid when unrelated slices change."""

    registry: dict[object, int] = field(default_factory=dict)
    views: list[DeviceView] = field(default_factory=list)
    #: Marks the devices this registry fingerprinted (a device object outlives rebuilds:
    #: slices that did not change keep theirs).
    token: int = field(default_factory=lambda: next(_TOKENS))

    def fingerprint(self, driver: str, device: Device) -> int:
        if device.kinds_token == self.token:
            return device.fingerprint
        # Types beside values (True == 1 for Python); fractions as integer pairs (hashing a
        # Fraction is slow). Items in the slice's order: identical devices listed in another
        # order only get two fingerprints (less sharing, same answers).
        attributes = device.attributes
        key = (
            driver,
            tuple(attributes.items()),
            tuple(map(type, attributes.values())),
            tuple((k, v.numerator, v.denominator) for k, v in device.capacity.items()),
            device.taints,
            device.unsupported,
        )
        found = self.registry.get(key)
        if found is None:
            found = len(self.views)
            self.registry[key] = found
            self.views.append(DeviceView(driver, device.attributes, device.capacity))
        device.fingerprint, device.kinds_token = found, self.token
        return found


@dataclass(slots=True)
class Inventory:
    pools: dict[tuple[str, str], Pool] = field(default_factory=dict)
    entries: list[DeviceEntry] = field(default_factory=list)
    kinds: DeviceKinds = field(default_factory=DeviceKinds)
    _local: dict[str, list[int]] = field(default_factory=dict)
    _shared: list[tuple[Pool, list[int]]] = field(default_factory=list)
    _unusable_local: dict[str, list[str]] = field(default_factory=dict)
    _names: tuple[frozenset[str], frozenset[str]] | None = None

    @classmethod
    def build(cls, slices: Iterable[ResourceSlice], kinds: DeviceKinds | None = None) -> Inventory:
        inventory = cls(kinds=kinds or DeviceKinds())
        grouped: dict[tuple[str, str], list[ResourceSlice]] = defaultdict(list)
        for s in sorted(slices, key=lambda s: s.name):
            grouped[(s.driver, s.pool)].append(s)
        for key in sorted(grouped):
            members = grouped[key]
            newest = max(s.generation for s in members)
            current = [s for s in members if s.generation == newest]
            pool = Pool(
                driver=key[0],
                name=key[1],
                generation=newest,
                slices=current,
                complete=len(current) >= current[0].slice_count,
            )
            inventory.pools[key] = pool
            names = [d.name for s in current for d in s.devices]
            if len(names) != len(set(names)):
                pool.invalid = "duplicate device names"
            unsupported = next((s.unsupported for s in current if s.unsupported), "")
            if unsupported:
                pool.invalid = unsupported
            usable = pool.complete and not pool.invalid
            indices: list[int] = []
            entries = inventory.entries
            start = len(entries)
            for s in current if usable else ():
                if s.node_name is None:
                    target = indices
                else:
                    target = inventory._local.setdefault(s.node_name, [])
                for device in s.devices:
                    target.append(len(entries))
                    entries.append(DeviceEntry(len(entries), s.driver, s.pool, device, s))
            if not usable:
                for s in current:
                    if s.node_name is not None:
                        inventory._unusable_local.setdefault(s.node_name, []).append(pool.label)
                if any(s.node_name is None for s in current):
                    inventory._shared.append((pool, []))
                continue
            pool.devices = dict(zip(names, range(start, len(entries)), strict=True))
            if indices:
                inventory._shared.append((pool, indices))
        return inventory

    def index_of(self, device_id: DeviceId) -> int | None:
        """The inventory index of a device of a usable pool."""
        pool = self.pools.get((device_id[0], device_id[1]))
        return None if pool is None else pool.devices.get(device_id[2])

    @property
    def by_id(self) -> dict[DeviceId, int]:
        """Every usable device's index by its id (built on each call: for tests and tools;
        the scheduler asks `index_of`)."""
        return {
            (pool.driver, pool.name, name): index
            for pool in self.pools.values()
            for name, index in pool.devices.items()
        }

    def names(self) -> tuple[frozenset[str], frozenset[str]]:
        """Every attribute name and every capacity name a usable device has."""
        if self._names is None:
            devices = [entry.device for entry in self.entries]
            self._names = (
                frozenset().union(*(device.attributes for device in devices)),
                frozenset().union(*(device.capacity for device in devices)),
            )
        return self._names

    def node_devices(self, node: Node) -> NodeDevices:
        """Devices usable on `node`: its own slices' and those of matching shared slices."""
        devices = list(self._local.get(node.name, ()))
        unusable = list(dict.fromkeys(self._unusable_local.get(node.name, ())))
        for pool, indices in self._shared:
            selected = [s for s in pool.slices if s.node_name is None and _targets(s, node)]
            if not selected:
                continue
            if not indices:
                unusable.append(pool.label)
                continue
            names = {s.name for s in selected}
            devices.extend(i for i in indices if self.entries[i].slice.name in names)
        return NodeDevices(devices=tuple(devices), unusable_pools=tuple(unusable))


def _targets(s: ResourceSlice, node: Node) -> bool:
    if s.all_nodes:
        return True
    if s.node_selector is None:
        return False
    return any(_term_matches(term, node) for term in s.node_selector)


def _term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    return term.matches(node.name, node.labels)
