"""The cluster's DRA state for the scheduler: objects, devices in use, and in-flight claims.

One instance is registered with the snapshot as one of its extensions
(gangsched.core.reservations), where the cluster can have claims written back: when the cycle
assumes a pod on a node, its unallocated claims are allocated there at once (the undo
journaled with the pod), so the next gang member sees those devices taken and a claim shared
by several members is allocated once and only reserved by the others. A rollback undoes both.
When the cycle's result is committed the allocations become the claims' assumed state and
are handed out as `AllocateClaim` decisions (`write_backs`), which the edge writes before
binding any pod.

Answers are cached by what decides them: the node's devices (their kinds and whether each is
free) and the claim specs to allocate. Identical nodes and identical gang members (claims from
one template) then share one allocator run; a node's signature changes only when one of its
devices is taken or freed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import numpy.typing as npt

from gangsched.core.api.inventory import Inventory as ApiInventory
from gangsched.core.decisions import AllocateClaim, Decision
from gangsched.core.dra.allocator import (
    AllocationError,
    ClaimToAllocate,
    Outcome,
    allocate,
)
from gangsched.core.dra.cel import SelectorCache
from gangsched.core.dra.claims import ClaimProblem, check_classes, pod_claims, reserves
from gangsched.core.dra.feasibility import FeasibilityCache
from gangsched.core.dra.inventory import DeviceKinds, Inventory, NodeDevices
from gangsched.core.dra.model import (
    Allocation,
    Consumer,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from gangsched.core.dra.results import allocation_of_picks
from gangsched.core.model import Node, Pod
from gangsched.core.reservations import Undo
from gangsched.core.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the pod's claims fit on a node; `resolvable` when freeing devices could help."""

    ok: bool
    reason: str = ""
    resolvable: bool = False


@dataclass(slots=True)
class _Changes:
    """What one `reserve` or `release` changed, for `_revert` to take back."""

    allocated: list[str] = field(default_factory=list)
    reserved: list[str] = field(default_factory=list)
    released: list[tuple[str, Allocation]] = field(default_factory=list)
    restored: list[tuple[str, Allocation]] = field(default_factory=list)


@dataclass(slots=True)
class DraState:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    selectors: SelectorCache = field(default_factory=SelectorCache)
    #: Claims allocated / reserved in the running cycle (journaled), by claim key.
    pending_allocation: dict[str, Allocation] = field(default_factory=dict)
    pending_reserve: dict[str, list[Consumer]] = field(default_factory=dict)
    #: Claims whose devices a preemption dry run freed (their only consumer was removed).
    released: dict[str, Allocation] = field(default_factory=dict)
    #: Decisions of committed cycles not handed out yet.
    outbox: list[AllocateClaim] = field(default_factory=list)
    _kinds: DeviceKinds = field(default_factory=DeviceKinds)
    _inventory: Inventory | None = None
    _holders: dict[int, set[str]] = field(default_factory=dict)
    _node_devices: dict[str, tuple[Node, NodeDevices]] = field(default_factory=dict)
    feasibility: FeasibilityCache = field(default_factory=FeasibilityCache)
    #: Claims whose committed decision the API server has not shown yet: key -> what the
    #: decision writes (an allocation, pods' uids for reservedFor).
    _assumed: dict[str, tuple[bool, frozenset[str]]] = field(default_factory=dict)
    #: The API server's latest copy of each claim (what `forget_claim` goes back to).
    _observed: dict[str, ResourceClaim] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        *,
        classes: Iterable[DeviceClass] = (),
        slices: Iterable[ResourceSlice] = (),
        claims: Iterable[ResourceClaim] = (),
        templates: Iterable[ResourceClaimTemplate] = (),
    ) -> DraState:
        state = cls()
        for device_class in classes:
            state.upsert_class(device_class)
        for resource_slice in slices:
            state.upsert_slice(resource_slice)
        for claim in claims:
            state.upsert_claim(claim)
        for template in templates:
            state.upsert_template(template)
        return state

    # ------------------------------------------------------------------- object changes
    def upsert_class(self, device_class: DeviceClass) -> None:
        self.classes[device_class.name] = device_class
        self.feasibility.reset()

    def delete_class(self, name: str) -> None:
        self.classes.pop(name, None)
        self.feasibility.reset()

    def upsert_slice(self, resource_slice: ResourceSlice) -> None:
        self.slices[resource_slice.name] = resource_slice
        self._inventory = None

    def delete_slice(self, name: str) -> None:
        if self.slices.pop(name, None) is not None:
            self._inventory = None

    def upsert_template(self, template: ResourceClaimTemplate) -> None:
        self.templates[template.key] = template

    def delete_template(self, key: str) -> None:
        self.templates.pop(key, None)

    def upsert_claim(self, claim: ResourceClaim) -> None:
        old = self.claims.get(claim.key)
        if old is not None and old.allocation is not None:
            self._hold(claim.key, old.allocation, add=False)
        self.claims[claim.key] = claim
        if claim.allocation is not None:
            self._hold(claim.key, claim.allocation, add=True)

    def observe_claim(self, claim: ResourceClaim) -> None:
        """A claim as the API server has it. While a decision about it is being written, the
        assumed claim stands until the API server's copy shows the decision done (as in
        kube-scheduler's assume cache): the finalizer write in between, a resync or an
        unrelated update must not free its devices. A write that fails (the claim changed
        meanwhile: 409) ends with `forget_claim`."""
        self._observed[claim.key] = claim
        assumed = self._assumed.get(claim.key)
        if assumed is not None:
            allocates, uids = assumed
            reserved = {c.uid for c in claim.reserved_for}
            if (allocates and claim.allocation is None) or not uids <= reserved:
                return
            del self._assumed[claim.key]
        self.upsert_claim(claim)

    def forget_claim(self, key: str) -> None:
        """Writing the decision failed: the claim is again what the API server last said."""
        if self._assumed.pop(key, None) is None:
            return
        observed = self._observed.get(key)
        if observed is None:
            self.delete_claim(key)
        else:
            self.upsert_claim(observed)

    def observed_claim(self, key: str) -> ResourceClaim | None:
        return self._observed.get(key)

    def delete_claim(self, key: str) -> None:
        self._observed.pop(key, None)
        self._assumed.pop(key, None)
        old = self.claims.pop(key, None)
        if old is not None and old.allocation is not None:
            self._hold(key, old.allocation, add=False)

    # --------------------------------------------------------------------------- devices
    @property
    def inventory(self) -> Inventory:
        if self._inventory is None:
            self._inventory = Inventory.build(self.slices.values(), self._kinds)
            self._node_devices.clear()
            self.feasibility.reset()
            self._holders = {}
            for key, claim in self.claims.items():
                allocation = self.pending_allocation.get(key) or claim.allocation
                if allocation is not None and key not in self.released:
                    self._hold(key, allocation, add=True)
        return self._inventory

    def _hold(self, key: str, allocation: Allocation, *, add: bool) -> None:
        if self._inventory is None:
            return  # counted when the inventory is built
        for result in allocation.results:
            if result.admin_access:
                continue
            index = self._inventory.index_of(result.device_id)
            if index is None:
                continue
            holders = self._holders.setdefault(index, set())
            if add:
                holders.add(key)
            else:
                holders.discard(key)
                if not holders:
                    del self._holders[index]
            self.feasibility.bump(self._inventory.entries[index].slice.node_name)

    def is_free(self, index: int) -> bool:
        return index not in self._holders

    def devices_of(self, node: Node) -> NodeDevices:
        inventory = self.inventory
        cached = self._node_devices.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        devices = inventory.node_devices(node)
        self._node_devices[node.name] = (node, devices)
        return devices

    # ---------------------------------------------------------------------------- claims
    def allocation_of(self, claim: ResourceClaim) -> Allocation | None:
        """The claim's allocation as this cycle sees it (in-flight ones included)."""
        if claim.key in self.released:
            return None
        return self.pending_allocation.get(claim.key) or claim.allocation

    def pod_claims(self, pod: Pod) -> list[ResourceClaim]:
        """The ResourceClaims the pod uses; ClaimProblem when one is unusable."""
        return pod_claims(pod, claims=self.claims, consumers=self._consumers)

    def _consumers(self, claim: ResourceClaim) -> list[Consumer]:
        return [*claim.reserved_for, *self.pending_reserve.get(claim.key, ())]

    def check_classes(self, claims: Iterable[ResourceClaim]) -> None:
        check_classes(claims, self.classes)

    # ---------------------------------------------------------------------------- filter
    def feasible_nodes(
        self,
        claims: Sequence[ResourceClaim],
        *,
        nodes: Sequence[Node],
        generation: int,
        candidates: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.bool_]:
        """The candidate nodes where the pod's (resolved) claims can be used as things stand:
        allocated ones admit the node, the others can be allocated there together."""
        self.inventory  # noqa: B018 - (re)built first: building it resets the answers
        self.feasibility.align(nodes, generation)
        mask = candidates.copy()
        todo = []
        for claim in claims:
            allocation = self.allocation_of(claim)
            if allocation is None:
                todo.append(claim)
            elif allocation.node_selector is not None:
                for index in np.flatnonzero(mask):
                    node = nodes[int(index)]
                    if not allocation.admits(node.name, node.labels):
                        mask[index] = False
        if todo and mask.any():
            key = tuple(c.spec for c in todo)
            run = self._allocator(todo)
            mask = self.feasibility.feasible(key, mask, lambda i: run(nodes[i]))
        return mask

    def verdict(
        self,
        claims: Sequence[ResourceClaim],
        *,
        nodes: Sequence[Node],
        generation: int,
        node: int,
    ) -> Verdict:
        """Why the claims can or cannot be used on `nodes[node]` (for explanations)."""
        self.inventory  # noqa: B018 - (re)built first: building it resets the answers
        self.feasibility.align(nodes, generation)
        target = nodes[node]
        todo = []
        for claim in claims:
            allocation = self.allocation_of(claim)
            if allocation is None:
                todo.append(claim)
            elif not allocation.admits(target.name, target.labels):
                return Verdict(False, f"resourceclaim {claim.key} not available on the node")
        if not todo:
            return Verdict(True)
        key = tuple(c.spec for c in todo)
        answer = self.feasibility.answer(key, node, lambda i: self._allocator(todo)(nodes[i]))
        if isinstance(answer, str):
            return Verdict(False, answer)
        if answer.ok:
            return Verdict(True)
        # Would the claims fit with every device of the node free? Then evicting their
        # holders can help (preemption); otherwise nothing on this node can.
        empty = self.feasibility.fits_empty(
            key, node, lambda i: _fits(self._allocator(todo, all_free=True)(nodes[i]))
        )
        return Verdict(False, answer.reason(), empty)

    def _allocator(
        self, claims: Sequence[ResourceClaim], *, all_free: bool = False
    ) -> Callable[[Node], Outcome | str]:
        """Allocates `claims` on a given node: the outcome, or why they can go nowhere as
        written. What does not depend on the node is prepared once (a filter asks a
        thousand nodes)."""
        to_allocate = [ClaimToAllocate(c.key, c.spec) for c in claims]
        inventory = self.inventory
        is_free = (lambda _: True) if all_free else self.is_free
        shared = self.feasibility.shared(tuple(c.spec for c in claims))

        def run(node: Node) -> Outcome | str:
            try:
                return allocate(
                    to_allocate,
                    inventory=inventory,
                    node=self.devices_of(node),
                    is_free=is_free,
                    classes=self.classes,
                    selectors=self.selectors,
                    shared=shared,
                )
            except AllocationError as error:
                return str(error)

        return run

    # --------------------------------------------------------- the snapshot's extension
    def reserve(self, snap: Snapshot, pod: Pod, node: int) -> Sequence[Undo]:
        """Allocate and reserve the pod's claims for node index `node`; the undo."""
        if not pod.claims:
            return ()
        changes = self._assume(pod, snap.nodes[node])
        return () if changes is None else (partial(self._revert, changes),)

    def release(self, snap: Snapshot, pod: Pod) -> Sequence[Undo]:
        """A preemption dry run removed `pod`: claims reserved for it alone free their
        devices (the resourceclaim controller deallocates them once the pod is gone)."""
        if not pod.claims:
            return ()
        changes = self._release(pod)
        return () if changes is None else (partial(self._revert, changes),)

    def pod_write_backs(self, pod: Pod, node: str) -> list[Decision]:
        return []  # claims are written for the cycle as a whole (`write_backs`)

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        pass  # claims name their pods (reservedFor); no index of pods to keep

    def _assume(self, pod: Pod, node: Node) -> _Changes | None:
        """Allocate and reserve the pod's claims for `node`; what reverts it (None: no
        change, the claims cannot be used or allocated there)."""
        try:
            claims = self.pod_claims(pod)
        except ClaimProblem:
            return None
        undo = _Changes()
        for claim in claims:
            # A preemption dry run putting a victim back: its claims hold their devices again.
            allocation = self.released.get(claim.key)
            if allocation is not None and reserves(self._consumers(claim), pod):
                del self.released[claim.key]
                self._hold(claim.key, allocation, add=True)
                undo.restored.append((claim.key, allocation))
        todo = [c for c in claims if self.allocation_of(c) is None]
        if todo:
            index = self.feasibility.index_of(node)
            run = self._allocator(todo)
            outcome = (
                run(node)
                if index is None
                else self.feasibility.answer(
                    tuple(c.spec for c in todo), index, lambda _: run(node)
                )
            )
            if isinstance(outcome, str) or outcome.picks is None:
                return None
            devices = self.devices_of(node)
            for claim, picks in zip(todo, outcome.picks, strict=True):
                allocation = allocation_of_picks(
                    picks,
                    entries=self.inventory.entries,
                    devices=devices,
                    node=node,
                    spec=claim.spec,
                    classes=self.classes,
                )
                self.pending_allocation[claim.key] = allocation
                self._hold(claim.key, allocation, add=True)
                undo.allocated.append(claim.key)
        consumer = Consumer(resource="pods", name=pod.name, uid=pod.uid)
        for claim in claims:
            if not reserves(self._consumers(claim), pod):
                self.pending_reserve.setdefault(claim.key, []).append(consumer)
                undo.reserved.append(claim.key)
        return undo

    def _release(self, pod: Pod) -> _Changes | None:
        """Free the devices of claims reserved for `pod` alone; what reverts it (None: no
        change)."""
        undo = _Changes()
        for pod_claim in pod.claims:
            name = pod_claim.resolved_name
            claim = self.claims.get(f"{pod.namespace}/{name}") if name else None
            if claim is None or claim.key in self.released:
                continue
            allocation = self.allocation_of(claim)
            others = [c for c in self._consumers(claim) if c.uid != pod.uid or c.name != pod.name]
            if allocation is None or others:
                continue
            self.released[claim.key] = allocation
            self._hold(claim.key, allocation, add=False)
            undo.released.append((claim.key, allocation))
        return undo if undo.released else None

    def _revert(self, record: _Changes) -> None:
        for key in reversed(record.reserved):
            self.pending_reserve[key].pop()
            if not self.pending_reserve[key]:
                del self.pending_reserve[key]
        for key in reversed(record.allocated):
            allocation = self.pending_allocation.pop(key)
            self._hold(key, allocation, add=False)
        for key, allocation in reversed(record.restored):
            self.released[key] = allocation
            self._hold(key, allocation, add=False)
        for key, allocation in reversed(record.released):
            del self.released[key]
            self._hold(key, allocation, add=True)

    def commit(self) -> None:
        """The cycle's result stands: in-flight allocations become the claims' assumed state
        and decisions for the edge (see `write_backs`)."""
        if self.released:
            for key, held in self.released.items():
                self._hold(key, held, add=True)
            self.released.clear()
        if not self.pending_allocation and not self.pending_reserve:
            return  # every cache update commits: most have allocated nothing
        keys = sorted(set(self.pending_allocation) | set(self.pending_reserve))
        for key in keys:
            claim = self.claims.get(key)
            allocation = (
                self.pending_allocation.pop(key) if key in self.pending_allocation else None
            )
            reserve = tuple(self.pending_reserve.pop(key, ()))
            if claim is None:
                continue
            self.outbox.append(
                AllocateClaim(
                    claim=key,
                    uid=claim.uid,
                    allocation=allocation,
                    reserve=reserve,
                    resource_version=claim.resource_version,
                )
            )
            # A new object: the API server's copy stays as it was (see `forget_claim`).
            self.claims[key] = replace(
                claim,
                allocation=allocation or claim.allocation,  # already held in _holders
                reserved_for=(*claim.reserved_for, *reserve),
            )
            allocates, uids = self._assumed.get(key, (False, frozenset()))
            self._assumed[key] = (
                allocates or allocation is not None,
                uids | {c.uid for c in reserve},
            )

    def write_backs(self) -> list[Decision]:
        """The claims' decisions of committed cycles not handed out yet: allocation and
        reservedFor, written before any pod of the cycle binds."""
        out: list[Decision] = [*self.outbox]
        self.outbox = []
        return out


def _fits(answer: Outcome | str) -> bool:
    return not isinstance(answer, str) and answer.ok


def dra_state(inventory: ApiInventory) -> DraState:
    """The DRA state of everything an input (manifests) holds."""
    return DraState.build(
        classes=inventory.device_classes,
        slices=inventory.resource_slices,
        claims=inventory.resource_claims,
        templates=inventory.claim_templates,
    )
