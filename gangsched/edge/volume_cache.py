"""Keeps the VolumeBook in step with the PVC, PV, StorageClass, CSINode, CSIDriver and
CSIStorageCapacity informers.

A storage change can make a waiting gang schedulable (a PVC created, a PV released, a claim
bound, a class or capacity added), so every change tells the queue the cluster changed, as
kube-scheduler's queueing hints do for VolumeBinding. Status-only churn the plugins do not
read is skipped. Unreadable objects are reported like the other kinds, and a claim that
cannot be read is dropped (its pods wait with "not found" rather than use an old copy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gangsched.core.api.storage import (
    csi_driver_from_raw,
    csi_node_from_raw,
    csi_storage_capacity_from_raw,
    persistent_volume_claim_from_raw,
    persistent_volume_from_raw,
    storage_class_from_raw,
)
from gangsched.core.volumes.book import VolumeBook
from gangsched.edge.cache import ClusterCache
from gangsched.edge.handlers import Handler, object_key
from gangsched.edge.kube import JSON

_T = TypeVar("_T")


@dataclass
class VolumeCache:
    cache: ClusterCache

    @property
    def book(self) -> VolumeBook:
        """The snapshot's VolumeBook, registered with it on first use."""
        return self.cache.cluster.snapshot.extensions.setdefault(VolumeBook, VolumeBook)

    def _changed(self) -> None:
        self.cache.changed()

    # ------------------------------------------------------------------------------ claims
    def claims(self) -> Handler:
        return Handler(self._replace_claims, self._upsert_claim, self._delete_claim)

    def _replace_claims(self, objects: list[JSON]) -> None:
        seen = set()
        for obj in objects:
            seen.add(object_key(obj))
            self._upsert_claim(obj, notify=False)
        for key in [k for k in self.book.claims if k not in seen]:
            self.book.delete_claim(key)
        self._changed()

    def _upsert_claim(self, obj: JSON, *, notify: bool = True) -> None:
        claim = self.cache.read("PersistentVolumeClaim", obj, persistent_volume_claim_from_raw)
        if claim is None:
            self.book.delete_claim(object_key(obj))
            return
        if self.book.claims.get(claim.key) == claim:
            return
        self.book.upsert_claim(claim)
        if notify:
            self._changed()

    def _delete_claim(self, obj: JSON) -> None:
        self.cache.forgive("PersistentVolumeClaim", object_key(obj))
        self.book.delete_claim(object_key(obj))
        self._changed()

    # ----------------------------------------------------------------------------- volumes
    def volumes(self) -> Handler:
        return Handler(self._replace_volumes, self._upsert_volume, self._delete_volume)

    def _replace_volumes(self, objects: list[JSON]) -> None:
        volumes = []
        for obj in objects:
            volume = self.cache.read("PersistentVolume", obj, persistent_volume_from_raw)
            if volume is not None:
                volumes.append(volume)
        self.book.replace_volumes(volumes)
        for volume in volumes:  # settle assumptions the list shows done
            self.book.upsert_volume(volume)
        self._changed()

    def _upsert_volume(self, obj: JSON) -> None:
        volume = self.cache.read("PersistentVolume", obj, persistent_volume_from_raw)
        if volume is None:
            self.book.delete_volume(object_key(obj))
            return
        if self.book.volumes.get(volume.name) == volume:
            return
        self.book.upsert_volume(volume)
        self._changed()

    def _delete_volume(self, obj: JSON) -> None:
        self.cache.forgive("PersistentVolume", object_key(obj))
        self.book.delete_volume(object_key(obj))
        self._changed()

    # ------------------------------------------- classes, CSI nodes, drivers, capacities
    def _table(
        self, kind: str, table: Callable[[], dict[str, _T]], convert: Callable[[Any], _T]
    ) -> Handler:
        def replace(objects: list[JSON]) -> None:
            values = table()
            values.clear()
            for obj in objects:
                value = self.cache.read(kind, obj, convert)
                if value is not None:
                    values[object_key(obj)] = value
            self._changed()

        def upsert(obj: JSON) -> None:
            value = self.cache.read(kind, obj, convert)
            values = table()
            if value is None:
                values.pop(object_key(obj), None)
            elif values.get(object_key(obj)) == value:
                return
            else:
                values[object_key(obj)] = value
            self._changed()

        def delete(obj: JSON) -> None:
            self.cache.forgive(kind, object_key(obj))
            table().pop(object_key(obj), None)
            self._changed()

        return Handler(replace, upsert, delete)

    def storage_classes(self) -> Handler:
        return self._table("StorageClass", lambda: self.book.classes, storage_class_from_raw)

    def csi_nodes(self) -> Handler:
        return self._table("CSINode", lambda: self.book.csi_nodes, csi_node_from_raw)

    def csi_drivers(self) -> Handler:
        return self._table("CSIDriver", lambda: self.book.drivers, csi_driver_from_raw)

    def capacities(self) -> Handler:
        return self._table(
            "CSIStorageCapacity", lambda: self.book.capacities, csi_storage_capacity_from_raw
        )


#: (informer name, list path, handler factory) for the operator.
STORAGE_INFORMERS: tuple[tuple[str, str, Callable[[VolumeCache], Handler]], ...] = (
    ("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", VolumeCache.claims),
    ("persistentvolumes", "/api/v1/persistentvolumes", VolumeCache.volumes),
    ("storageclasses", "/apis/storage.k8s.io/v1/storageclasses", VolumeCache.storage_classes),
    ("csinodes", "/apis/storage.k8s.io/v1/csinodes", VolumeCache.csi_nodes),
    ("csidrivers", "/apis/storage.k8s.io/v1/csidrivers", VolumeCache.csi_drivers),
    (
        "csistoragecapacities",
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        VolumeCache.capacities,
    ),
)
