"""ResourceClaim write-backs for the pre-bind stage: kube-scheduler's DynamicResources PreBind,
per gang.

For each claim a cycle allocated or reserved (`AllocateClaim`):
1. the finalizer `resource.kubernetes.io/delete-protection` (before the allocation exists, so
   a claim deleted meanwhile cannot lose track of allocated devices), conditional on the
   claim's resourceVersion, by reading and updating the whole claim (see `set_finalizers`);
2. one status write: `status.allocation` (when this cycle allocated it) and
   `status.reservedFor` with the gang's pods appended, conditional on the resourceVersion the
   finalizer write returned. A claim that changed since the cycle is refused with 409: the
   stage then fails, undoes the other claims and the gang is retried on fresh state.

Confirmed when the informer shows the claim allocated as decided and reserved for every pod.
Undo takes back what this write-back added, as kube-scheduler's Unreserve: the pods leave
`reservedFor`, and a claim this cycle allocated that no other consumer uses is deallocated and
loses the finalizer again. The DRA state forgets the decision, so the next cycle sees the
API server's claim.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import AllocateClaim
from gangsched.core.dra.model import (
    DELETE_PROTECTION_FINALIZER,
    AllocatedConfig,
    Allocation,
    Consumer,
)
from gangsched.core.dra.state import DraState
from gangsched.core.labels import NodeSelectorTerm, Requirement
from gangsched.edge.kube import Kube, KubeError
from gangsched.edge.prebind import CONFIRMED, PENDING, Check, WriteBack, failed


def claim_path(key: str, subresource: str = "") -> str:
    namespace, _, name = key.partition("/")
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
    return f"{path}/{subresource}" if subresource else path


def allocation_json(allocation: Allocation, *, now: datetime | None = None) -> dict[str, Any]:
    """status.allocation as the API takes it. `now` becomes `allocationTimestamp`, which
    kube-scheduler 1.37 sets when it writes an allocation (DRADeviceBindingConditions and
    DRAResourceClaimDeviceStatus are on by default): drivers with binding conditions time
    their wait from it."""
    results = []
    for r in allocation.results:
        result: dict[str, Any] = {
            "request": r.request,
            "driver": r.driver,
            "pool": r.pool,
            "device": r.device,
        }
        if r.admin_access:
            result["adminAccess"] = True
        results.append(result)
    devices: dict[str, Any] = {"results": results}
    if allocation.config:
        devices["config"] = [_config_json(c) for c in allocation.config]
    body: dict[str, Any] = {"devices": devices}
    if now is not None:
        body["allocationTimestamp"] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if allocation.node_selector is not None:
        body["nodeSelector"] = {
            "nodeSelectorTerms": [_term_json(term) for term in allocation.node_selector]
        }
    return body


def _config_json(allocated: AllocatedConfig) -> dict[str, Any]:
    config = allocated.config
    out: dict[str, Any] = {
        "source": allocated.source.value,
        "opaque": {"driver": config.driver, "parameters": json.loads(config.parameters)},
    }
    if config.requests:
        out["requests"] = list(config.requests)
    return out


def _term_json(term: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.match_expressions:
        out["matchExpressions"] = [_requirement_json(r) for r in term.match_expressions]
    if term.match_fields:
        out["matchFields"] = [_requirement_json(r) for r in term.match_fields]
    return out


def _requirement_json(requirement: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": requirement.key, "operator": requirement.operator}
    if requirement.values:
        out["values"] = list(requirement.values)
    return out


async def set_finalizers(kube: Kube, key: str, finalizers: list[str], *, version: str) -> str:
    """Write the claim's finalizers if it is still at `version` (409 otherwise); returns its
    new resourceVersion.

    Read and written back whole (get, then update), as kube-scheduler does: the API server
    1.37 refuses every patch of a ResourceClaim whose spec holds opaque device configuration
    ("spec: Invalid value: null: field is immutable"), merge and JSON patches alike, while an
    update passes. The status writes are patches of the status subresource, which do pass.

    Every claim write is encoded by `claim_body` (the standard library's encoder, as the
    generated client encoded every request before issue 30's orjson): with orjson's compact
    encoding, the claims the e2e tests write (opaque parameters written by a Python client)
    were refused with that same error, and a deallocation after preemption too."""
    current = await kube.get(claim_path(key))
    metadata = current.setdefault("metadata", {})
    metadata["resourceVersion"] = version
    metadata["finalizers"] = finalizers
    answer = await kube.put(claim_path(key), claim_body(current))
    return str((answer.get("metadata") or {}).get("resourceVersion") or version)


def claim_body(body: dict[str, Any]) -> bytes:
    """A ResourceClaim write as the standard library encodes it (set_finalizers says why)."""
    return json.dumps(body).encode()


def _consumer_json(consumer: Consumer) -> dict[str, str]:
    out = {"resource": consumer.resource, "name": consumer.name, "uid": consumer.uid}
    if consumer.api_group:
        out["apiGroup"] = consumer.api_group
    return out


@dataclass
class ClaimWrite:
    decision: AllocateClaim
    cluster: ClusterState
    _wrote_allocation: bool = False
    _added_finalizer: bool = False
    #: The claim's resourceVersion after our last write (undo is conditional on it) and the
    #: finalizers we wrote (the informer may not show them yet).
    _version: str = ""
    _finalizers: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"ResourceClaim {self.decision.claim}"

    @property
    def plugin(self) -> str:
        return "DynamicResources"

    def forget(self) -> None:
        state = self.cluster.snapshot.extensions.get(DraState)
        if state is not None:
            state.forget_claim(self.decision.claim)

    @property
    def state(self) -> DraState:
        state = self.cluster.snapshot.extensions.get(DraState)
        assert state is not None  # the cycle that decided the write-back had one
        return state

    async def write(self, kube: Kube) -> None:
        d = self.decision
        observed = self.state.observed_claim(d.claim)
        if observed is None or (d.uid and observed.uid != d.uid):
            raise KubeError(404, "NotFound", f"ResourceClaim {d.claim} was deleted")
        if self._done(observed):
            return  # written before (a retry, or before a restart)
        version = d.resource_version or observed.resource_version
        if DELETE_PROTECTION_FINALIZER not in observed.finalizers:
            finalizers = [*observed.finalizers, DELETE_PROTECTION_FINALIZER]
            version = await set_finalizers(kube, d.claim, finalizers, version=version)
            self._added_finalizer = True
            self._finalizers = tuple(finalizers)
            self._version = version
        status: dict[str, Any] = {
            "reservedFor": [_consumer_json(c) for c in (*observed.reserved_for, *d.reserve)]
        }
        if d.allocation is not None:
            status["allocation"] = allocation_json(d.allocation, now=datetime.now(UTC))
        answer = await kube.patch(
            claim_path(d.claim, "status"),
            claim_body({"metadata": {"resourceVersion": version}, "status": status}),
        )
        self._wrote_allocation = d.allocation is not None
        self._version = str((answer.get("metadata") or {}).get("resourceVersion") or "")

    def _done(self, observed: Any) -> bool:
        d = self.decision
        if d.allocation is not None and observed.allocation is None:
            return False
        uids = {c.uid for c in observed.reserved_for}
        return all(c.uid in uids for c in d.reserve)

    def check(self) -> Check:
        d = self.decision
        observed = self.state.observed_claim(d.claim)
        if observed is None or (d.uid and observed.uid != d.uid):
            return failed(f"ResourceClaim {d.claim} was deleted")
        if observed.deleting:
            return failed(f"ResourceClaim {d.claim} is being deleted")
        if (
            d.allocation is not None
            and observed.allocation is not None
            and set(observed.allocation.results) != set(d.allocation.results)
        ):
            return failed(f"ResourceClaim {d.claim} was allocated other devices meanwhile")
        return CONFIRMED if self._done(observed) else PENDING

    async def undo(self, kube: Kube) -> None:
        d = self.decision
        self.state.forget_claim(d.claim)
        observed = self.state.observed_claim(d.claim)
        if observed is None:
            return
        ours = {c.uid for c in d.reserve}
        others = [c for c in observed.reserved_for if c.uid not in ours]
        deallocate = self._wrote_allocation and not others
        version = self._version or observed.resource_version
        # Refused when changed meanwhile: then it is no longer only ours to take back.
        with contextlib.suppress(KubeError):
            if len(others) != len(observed.reserved_for) or deallocate:
                status: dict[str, Any] = {
                    "reservedFor": [_consumer_json(c) for c in others] or None
                }
                if deallocate:
                    status["allocation"] = None
                answer = await kube.patch(
                    claim_path(d.claim, "status"),
                    claim_body({"metadata": {"resourceVersion": version}, "status": status}),
                )
                version = str((answer.get("metadata") or {}).get("resourceVersion") or "")
            unallocated = deallocate or observed.allocation is None
            if self._added_finalizer and unallocated and version:
                finalizers = [
                    f
                    for f in self._finalizers or observed.finalizers
                    if f != DELETE_PROTECTION_FINALIZER
                ]
                await set_finalizers(kube, d.claim, finalizers, version=version)


def claim_write_backs(decisions: list[AllocateClaim], cluster: ClusterState) -> list[WriteBack]:
    return [ClaimWrite(decision, cluster) for decision in decisions]
