"""Keeps the cluster's DRA state in step with the DeviceClass, ResourceSlice, ResourceClaim and
ResourceClaimTemplate informers.

A DRA change can make a waiting gang schedulable (a claim generated or deallocated, a slice
published, a class created), so every change tells the queue the cluster changed, as
kube-scheduler's queueing hints do for DynamicResources. A claim that cannot be read is dropped
(its pods wait with "not found" rather than use an old copy); its devices are then free as far
as we know, which is why the API server's allocations, not ours, are the truth after a
restart: every claim is read back before the first cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gangsched.core.dra.parse_claims import (
    resource_claim_from_raw,
    resource_claim_template_from_raw,
)
from gangsched.core.dra.parse_classes import device_class_from_raw
from gangsched.core.dra.parse_slices import resource_slice_from_raw
from gangsched.core.dra.state import DraState
from gangsched.edge.cache import ClusterCache
from gangsched.edge.handlers import Handler, object_key
from gangsched.edge.kube import JSON

_T = TypeVar("_T")
RESOURCE_API = "/apis/resource.k8s.io/v1"


@dataclass
class DraCache:
    cache: ClusterCache

    def enable(self) -> DraState:
        """The snapshot's DRA state, registered with it now if it has none: from then on
        pods' claims are allocated (without it, pods with claims stay unschedulable). The
        operator does this before the informers start, where resource.k8s.io/v1 is served."""
        return self.cache.cluster.snapshot.extensions.setdefault(DraState, DraState)

    @property
    def state(self) -> DraState:
        return self.enable()

    def _handler(
        self,
        kind: str,
        convert: Callable[[Any], _T],
        upsert: Callable[[DraState, _T], None],
        delete: Callable[[DraState, str], None],
        keys: Callable[[DraState], list[str]],
    ) -> Handler:
        def replace(objects: list[JSON]) -> None:
            seen = set()
            for obj in objects:
                seen.add(object_key(obj))
                upsert_one(obj, notify=False)
            for key in [k for k in keys(self.state) if k not in seen]:
                delete(self.state, key)
            self.cache.changed()

        def upsert_one(obj: JSON, *, notify: bool = True) -> None:
            value = self.cache.read(kind, obj, convert)
            if value is None:
                delete(self.state, object_key(obj))
            else:
                upsert(self.state, value)
            if notify:
                self.cache.changed()

        def delete_one(obj: JSON) -> None:
            self.cache.forgive(kind, object_key(obj))
            delete(self.state, object_key(obj))
            self.cache.changed()

        return Handler(replace, upsert_one, delete_one)

    def classes(self) -> Handler:
        return self._handler(
            "DeviceClass",
            device_class_from_raw,
            DraState.upsert_class,
            DraState.delete_class,
            lambda s: list(s.classes),
        )

    def slices(self) -> Handler:
        return self._handler(
            "ResourceSlice",
            resource_slice_from_raw,
            DraState.upsert_slice,
            DraState.delete_slice,
            lambda s: list(s.slices),
        )

    def claims(self) -> Handler:
        return self._handler(
            "ResourceClaim",
            resource_claim_from_raw,
            DraState.observe_claim,
            DraState.delete_claim,
            lambda s: list(s.claims),
        )

    def templates(self) -> Handler:
        return self._handler(
            "ResourceClaimTemplate",
            resource_claim_template_from_raw,
            DraState.upsert_template,
            DraState.delete_template,
            lambda s: list(s.templates),
        )


#: (informer name, list path, handler factory) for the operator.
DRA_INFORMERS: tuple[tuple[str, str, Callable[[DraCache], Handler]], ...] = (
    ("deviceclasses.resource.k8s.io", f"{RESOURCE_API}/deviceclasses", DraCache.classes),
    ("resourceslices.resource.k8s.io", f"{RESOURCE_API}/resourceslices", DraCache.slices),
    ("resourceclaims.resource.k8s.io", f"{RESOURCE_API}/resourceclaims", DraCache.claims),
    (
        "resourceclaimtemplates.resource.k8s.io",
        f"{RESOURCE_API}/resourceclaimtemplates",
        DraCache.templates,
    ),
)
