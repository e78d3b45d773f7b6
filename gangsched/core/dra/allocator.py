"""Structured-parameters allocation of a set of claims on one node (pure, deterministic).

Semantics of k8s.io/dynamic-resource-allocation/structured (stable variant): claims in order,
requests in order, `firstAvailable` alternatives in order (the first that leads to a full
solution wins); a device must pass its class's selectors and the request's, must not be in use
(unless the request has admin access, which only may not take one device twice in a claim),
must tolerate its NoSchedule/NoExecute taints; `matchAttribute` constraints make every device
of the named requests share one attribute value. `All` takes every matching device of the
node and fails when one is in use or a pool it could come from is incomplete.

The search is a depth-first backtracking like upstream's, with two prunings that keep it
polynomial on real GPU nodes without losing solutions: devices of one request are chosen as
a combination (increasing positions; the order within a request means nothing), and at each
choice point a device equivalent to one already tried there is skipped, since it would lead to
an isomorphic subtree: equivalent devices are candidates for the same requests and carry the
same values of every attribute a constraint compares. A
brute-force property test checks completeness. A step budget bounds pathological cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from gangsched.core.dra.cel import SelectorCache
from gangsched.core.dra.inventory import DeviceEntry, DeviceKinds, Inventory, NodeDevices
from gangsched.core.dra.model import (
    ALLOCATION_RESULTS_MAX_SIZE,
    AllocationMode,
    AttributeValue,
    ClaimSpec,
    DeviceClass,
    ExactRequest,
    MatchAttribute,
)
from gangsched.core.dra.signature import NodeSignatures, free_shortfall, least_needed

#: Device choices the search may try for one node before it gives up on that node.
SEARCH_BUDGET = 50_000
CANNOT_ALLOCATE = "cannot allocate all claims"


class AllocationError(Exception):
    """A claim that cannot be allocated anywhere as written: a missing class, a selector that
    does not compile or fails to evaluate, too many devices. Not a node's fault."""


@dataclass(frozen=True, slots=True)
class ClaimToAllocate:
    key: str  # namespace/name
    spec: ClaimSpec


@dataclass(frozen=True, slots=True)
class Pick:
    """One chosen device: `position` indexes the node's device list."""

    request: str  # "<request>" or "<request>/<alternative>"
    position: int
    admin_access: bool = False


@dataclass(slots=True)
class Outcome:
    """Per claim the devices picked, or why the claims do not fit on this node."""

    picks: list[list[Pick]] | None
    #: The request the search could not get past ("claim ns/x request gpus"), on failure.
    failed: str = ""
    exhausted: bool = False

    @property
    def ok(self) -> bool:
        return self.picks is not None

    def reason(self) -> str:
        if self.ok:
            return ""
        text = CANNOT_ALLOCATE
        if self.failed:
            text += f" ({self.failed})"
        if self.exhausted:
            text += "; search budget exhausted"
        return text


@dataclass(slots=True)
class _Slot:
    claim: int
    claim_key: str
    name: str
    alternatives: tuple[ExactRequest, ...]
    prioritized: bool


@dataclass(slots=True)
class _Constraint:
    rule: MatchAttribute
    value: tuple[str, AttributeValue] | None = None
    count: int = 0

    def applies(self, request: str, parent: str) -> bool:
        scope = self.rule.requests
        return not scope or parent in scope or request in scope


@dataclass(slots=True)
class _Search:
    claims: Sequence[ClaimToAllocate]
    entries: Sequence[DeviceEntry]
    kinds: DeviceKinds
    node: NodeDevices
    is_free: Callable[[int], bool]
    classes: Mapping[str, DeviceClass]
    selectors: SelectorCache
    budget: int
    slots: list[_Slot] = field(default_factory=list)
    constraints: list[list[_Constraint]] = field(default_factory=list)
    taken: dict[int, set[int]] = field(default_factory=dict)  # position -> claims
    picks: list[list[Pick]] = field(default_factory=list)
    candidates: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    errors: dict[tuple[int, int], AllocationError] = field(default_factory=dict)
    #: Per device position, its equivalence class for this search (see the module doc).
    kind: list[int] = field(default_factory=list)
    #: Per device position: the alternatives it is a candidate for and the values of the
    #: attributes constraints compare, numbered in order of appearance on the node.
    shape: list[tuple[tuple[bool, ...], tuple[int, ...]]] = field(default_factory=list)
    deepest: int = -1
    exhausted: bool = False

    def prepare(self) -> None:
        """Slots, constraints, candidates and device classes: everything but the search."""
        for index, claim in enumerate(self.claims):
            self.constraints.append([_Constraint(rule) for rule in claim.spec.constraints])
            self.picks.append([])
            for request in claim.spec.requests:
                self.slots.append(
                    _Slot(
                        claim=index,
                        claim_key=claim.key,
                        name=request.name,
                        alternatives=request.alternatives,
                        prioritized=request.exactly is None,
                    )
                )
        self._classify()

    def signature(self) -> object | None:
        """What decides this search's outcome, independent of which node it is: per device
        position whether it is free, which alternatives it is a candidate for, and the
        values of the attributes constraints compare, numbered in order of appearance (a
        constraint only tests equality, so nodes whose devices differ only in those values'
        spelling, such as each node's own NVLink domain name, search alike and pick the same
        positions). None when a candidate list ended in an error (its message names a
        device)."""
        if self.errors:
            return None
        free = tuple(self.is_free(index) for index in self.node.devices)
        return (free, tuple(self.shape), self.node.unusable_pools)

    def solve(self) -> Outcome:
        if self._solve(0):
            return Outcome(picks=[list(p) for p in self.picks])
        failed = ""
        if 0 <= self.deepest < len(self.slots):
            failed = self._describe(self.deepest)
        return Outcome(picks=None, failed=failed, exhausted=self.exhausted)

    def _describe(self, slot_index: int) -> str:
        """The request the search could not get past, with what this node offers it (its
        first alternative): how many devices match, how many of those are free."""
        slot = self.slots[slot_index]
        text = f"claim {slot.claim_key} request {slot.name}"
        alt = slot.alternatives[0] if slot.alternatives else None
        if alt is None or (slot_index, 0) in self.errors:
            return text
        matching = self.candidates.get((slot_index, 0), [])
        free = sum(1 for p in matching if self.is_free(self.node.devices[p]))
        need = "all" if alt.mode is AllocationMode.ALL else str(alt.count)
        text += f": {free} of {len(matching)} matching device(s) free, {need} needed"
        constrained = [
            c.attribute
            for c in self.claims[slot.claim].spec.constraints
            if not c.requests or slot.name in c.requests
        ]
        if constrained:
            text += f" with the same {', '.join(constrained)}"
        return text

    # -- candidates ------------------------------------------------------------------------
    def _classify(self) -> None:
        """Candidates of every alternative (errors kept until the search reaches them) and
        each device's equivalence class."""
        for slot_index, slot in enumerate(self.slots):
            for alt_index in range(len(slot.alternatives)):
                try:
                    self._candidates(slot_index, alt_index)
                except AllocationError as error:
                    self.errors[(slot_index, alt_index)] = error
                    self.candidates[(slot_index, alt_index)] = []
        lists = list(self.candidates.values())
        flags = [[False] * len(lists) for _ in self.node.devices]
        for number, found in enumerate(lists):
            for position in found:
                flags[position][number] = True
        compared = sorted({c.attribute for claim in self.claims for c in claim.spec.constraints})
        numbering: list[dict[object, int]] = [{} for _ in compared]
        classes: dict[object, int] = {}
        entries = self.entries
        for position, index in enumerate(self.node.devices):
            values: list[int] = []
            if compared:
                attributes = entries[index].device.attributes
                for seen, name in zip(numbering, compared, strict=True):
                    value = attributes.get(name)
                    if value is None:
                        values.append(-1)
                    else:
                        values.append(seen.setdefault((type(value), value), len(seen)))
            key = (tuple(flags[position]), tuple(values))
            self.shape.append(key)
            self.kind.append(classes.setdefault(key, len(classes)))

    def _candidates(self, slot_index: int, alt_index: int) -> list[int]:
        """Positions of the node's devices that satisfy the alternative (selectors, class,
        taints, support); in-use checks come later because they change during the search."""
        key = (slot_index, alt_index)
        found = self.candidates.get(key)
        if found is not None:
            return found
        slot = self.slots[slot_index]
        alt = slot.alternatives[alt_index]
        device_class = self.classes.get(alt.class_name)
        if device_class is None:
            raise AllocationError(
                f"claim {slot.claim_key} request {slot.name}: "
                f"device class {alt.class_name} does not exist"
            )
        found = []
        selectors = (device_class.selectors, alt.selectors)
        passes, kinds = self.selectors.passes, self.kinds
        for position, index in enumerate(self.node.devices):
            entry = self.entries[index]
            device = entry.device
            if device.unsupported:
                continue
            fingerprint = kinds.fingerprint(entry.driver, device)
            selected = passes(selectors, fingerprint, kinds.views[fingerprint])
            if selected is None:
                # A selector failed on this device: raises, naming the device.
                selected = self._selected(
                    slot, device_class.selectors, entry, f"class {alt.class_name}"
                ) and self._selected(slot, alt.selectors, entry, f"claim {slot.claim_key}")
            if not selected:
                continue
            if any(
                taint.effect in ("NoSchedule", "NoExecute")
                and not any(t.tolerates(taint) for t in alt.tolerations)
                for taint in device.taints
            ):
                continue
            found.append(position)
        self.candidates[key] = found
        return found

    def _selected(
        self, slot: _Slot, expressions: tuple[str, ...], entry: DeviceEntry, owner: str
    ) -> bool:
        fingerprint = self.kinds.fingerprint(entry.driver, entry.device)
        view = self.kinds.views[fingerprint]
        for number, expression in enumerate(expressions):
            verdict = self.selectors.matches(expression, fingerprint, view)
            if isinstance(verdict, str):
                raise AllocationError(
                    f"{owner}: selector #{number} on device "
                    f"{entry.driver}/{entry.pool}/{entry.device.name}: {verdict}"
                )
            if not verdict:
                return False
        return True

    # -- search ----------------------------------------------------------------------------
    def _solve(self, slot_index: int) -> bool:
        if slot_index == len(self.slots):
            return True
        self.deepest = max(self.deepest, slot_index)
        slot = self.slots[slot_index]
        for alt_index, alt in enumerate(slot.alternatives):
            request = f"{slot.name}/{alt.name}" if slot.prioritized else slot.name
            error = self.errors.get((slot_index, alt_index))
            if error is not None:
                raise error
            candidates = self.candidates[(slot_index, alt_index)]
            if alt.mode is AllocationMode.ALL:
                if self.node.unusable_pools:
                    raise AllocationError(
                        f"claim {slot.claim_key} request {slot.name}: asks for all devices, "
                        f"but resource pool {self.node.unusable_pools[0]} is currently "
                        "being updated or invalid"
                    )
                if candidates and self._take_all(slot_index, slot, alt, request, candidates):
                    return True
                continue
            if len(self.picks[slot.claim]) + alt.count > ALLOCATION_RESULTS_MAX_SIZE:
                continue
            if self._choose(
                slot_index,
                slot,
                alt=alt,
                request=request,
                candidates=candidates,
                start=0,
                need=alt.count,
            ):
                return True
        return False

    def _choose(
        self,
        slot_index: int,
        slot: _Slot,
        *,
        alt: ExactRequest,
        request: str,
        candidates: list[int],
        start: int,
        need: int,
    ) -> bool:
        if need == 0:
            return self._solve(slot_index + 1)
        tried: set[int] = set()
        for i in range(start, len(candidates)):
            if len(candidates) - i < need:
                return False
            if self.budget <= 0:
                self.exhausted = True
                return False
            position = candidates[i]
            kind = self.kind[position]
            if kind in tried or not self._usable(position, slot.claim, alt):
                continue
            tried.add(kind)
            self.budget -= 1
            if not self._add(slot.claim, request, slot.name, position, alt):
                continue
            if self._choose(
                slot_index,
                slot,
                alt=alt,
                request=request,
                candidates=candidates,
                start=i + 1,
                need=need - 1,
            ):
                return True
            self._remove(slot.claim, request, slot.name, position)
        return False

    def _take_all(
        self, slot_index: int, slot: _Slot, alt: ExactRequest, request: str, candidates: list[int]
    ) -> bool:
        if len(self.picks[slot.claim]) + len(candidates) > ALLOCATION_RESULTS_MAX_SIZE:
            raise AllocationError(
                f"claim {slot.claim_key} request {slot.name}: {len(candidates)} devices exceed "
                f"the limit of {ALLOCATION_RESULTS_MAX_SIZE} per claim"
            )
        added: list[int] = []
        ok = True
        for position in candidates:
            if not self._usable(position, slot.claim, alt) or not self._add(
                slot.claim, request, slot.name, position, alt
            ):
                ok = False
                break
            added.append(position)
        if ok and self._solve(slot_index + 1):
            return True
        for position in reversed(added):
            self._remove(slot.claim, request, slot.name, position)
        return False

    def _usable(self, position: int, claim: int, alt: ExactRequest) -> bool:
        holders = self.taken.get(position)
        if alt.admin_access:
            return not holders or claim not in holders
        return not holders and self.is_free(self.node.devices[position])

    def _add(self, claim: int, request: str, parent: str, position: int, alt: ExactRequest) -> bool:
        device = self.entries[self.node.devices[position]].device
        bound: list[_Constraint] = []
        for constraint in self.constraints[claim]:
            if not constraint.applies(request, parent):
                continue
            value = _attribute(device.attributes, constraint.rule.attribute)
            if value is None or (constraint.value is not None and constraint.value != value):
                for undo in bound:
                    undo.count -= 1
                    if not undo.count:
                        undo.value = None
                return False
            constraint.value = value
            constraint.count += 1
            bound.append(constraint)
        self.taken.setdefault(position, set()).add(claim)
        self.picks[claim].append(Pick(request, position, alt.admin_access))
        return True

    def _remove(self, claim: int, request: str, parent: str, position: int) -> None:
        for constraint in self.constraints[claim]:
            if constraint.applies(request, parent):
                constraint.count -= 1
                if not constraint.count:
                    constraint.value = None
        holders = self.taken[position]
        holders.discard(claim)
        if not holders:
            del self.taken[position]
        self.picks[claim].pop()


def _attribute(
    attributes: Mapping[str, AttributeValue], name: str
) -> tuple[str, AttributeValue] | None:
    value = attributes.get(name)
    return None if value is None else (type(value).__name__, value)


@dataclass(slots=True, eq=False)
class SharedSearches:
    """Outcomes nodes share for one set of claim specs, one device inventory and one set of
    device classes (see `allocate`)."""

    outcomes: dict[object, Outcome] = field(default_factory=dict)
    signatures: NodeSignatures | None = None


def allocate(
    claims: Sequence[ClaimToAllocate],
    *,
    inventory: Inventory,
    node: NodeDevices,
    is_free: Callable[[int], bool],
    classes: Mapping[str, DeviceClass],
    selectors: SelectorCache,
    budget: int = SEARCH_BUDGET,
    shared: SharedSearches | None = None,
) -> Outcome:
    """Allocate `claims` together from `node`'s devices; raises AllocationError for claims
    that cannot be allocated on any node as written.

    `shared` (kept by the caller for one set of claim specs, one device inventory and one
    set of classes) remembers outcomes by the search's signature, so nodes whose devices are
    alike for these claims (the usual GPU fleet) share one search: the picks are device
    positions, valid on each. The signature is read without building the search
    (`signature.NodeSignatures`)."""
    signatures = None
    if shared is not None:
        if shared.signatures is None:
            specs = [c.spec for c in claims]
            shared.signatures = NodeSignatures.of(
                specs, classes=classes, selectors=selectors, inventory=inventory
            )
        signatures = shared.signatures
    # A node whose free devices are fewer than the claims need at the least (a taken node,
    # every later gang member asks it again) fails without a search.
    need = least_needed([c.spec for c in claims]) if signatures is None else signatures.need
    free = free_shortfall(need, node, is_free)
    if free is not None:
        names = ", ".join(c.key for c in claims)
        failed = f"claim {names}: {free} of {len(node.devices)} device(s) free, {need} needed"
        return Outcome(picks=None, failed=failed)
    search = partial(
        _Search,
        claims=claims,
        entries=inventory.entries,
        kinds=inventory.kinds,
        node=node,
        is_free=is_free,
        classes=classes,
        selectors=selectors,
        budget=budget,
    )
    if shared is None or signatures is None:
        return _solve(search())
    signature = signatures.signature(node, entries=inventory.entries, is_free=is_free)
    if signature is None:
        return _solve(search())
    # Claim keys too: a failure names the claim and request it could not get past.
    key = (tuple(c.key for c in claims), signature)
    found = shared.outcomes.get(key)
    if found is None:
        found = shared.outcomes[key] = _solve(search())
    return found


def _solve(search: _Search) -> Outcome:
    search.prepare()
    return search.solve()
