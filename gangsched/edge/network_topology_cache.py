"""Keeps Koordinator's ClusterNetworkTopology layers in step with their informer, and re-reads
the PodGroups whose network-topology-spec annotation names those layers when they change.

A PodGroup's annotation says "gather on BlockLayer"; only the ClusterNetworkTopology says
which node label BlockLayer is, so a PodGroup read before the layers arrived (or against
older ones) is read again: its constraint follows the cluster's current layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gangsched.core.api import InvalidObject
from gangsched.core.api.network_topology import (
    NETWORK_TOPOLOGY_SPEC,
    NetworkTopology,
    network_topology_from_raw,
)
from gangsched.edge.cache_host import CacheHost
from gangsched.edge.handlers import Handler, object_key
from gangsched.edge.kube import JSON

KIND = "ClusterNetworkTopology"
API_VERSION = "scheduling.koordinator.sh/v1alpha1"
INFORMER = "clusternetworktopologies.scheduling.koordinator.sh"
PATH = f"/apis/{API_VERSION}/clusternetworktopologies"


@dataclass
class NetworkTopologyCache:
    #: The ClusterCache composing this one (edge/cache_host.py says why a protocol).
    cache: CacheHost
    #: The layers PodGroups are read against; None while no ClusterNetworkTopology exists.
    current: NetworkTopology | None = None
    raw: dict[str, JSON] = field(default_factory=dict)
    #: Raw PodGroups carrying the annotation, by "<apiVersion>/<key>", read again on change.
    annotated: dict[str, JSON] = field(default_factory=dict)

    def handler(self) -> Handler:
        return Handler(self._replace, self._upsert, self._delete)

    def remember(self, obj: JSON) -> None:
        """Called for every PodGroup read: keep it if the layers decide its constraint."""
        key = f"{obj.get('apiVersion')}/{object_key(obj)}"
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if isinstance(annotations, dict) and NETWORK_TOPOLOGY_SPEC in annotations:
            self.annotated[key] = obj
        else:
            self.annotated.pop(key, None)

    def forget(self, obj: JSON) -> None:
        self.annotated.pop(f"{obj.get('apiVersion')}/{object_key(obj)}", None)

    def _replace(self, objects: list[JSON]) -> None:
        self.raw = {object_key(obj): obj for obj in objects}
        self._rebuild()

    def _upsert(self, obj: JSON) -> None:
        self.raw[object_key(obj)] = obj
        self._rebuild()

    def _delete(self, obj: JSON) -> None:
        self.raw.pop(object_key(obj), None)
        self.cache.forgive(KIND, object_key(obj))
        self._rebuild()

    def _rebuild(self) -> None:
        """Objects added one at a time in name order, so a malformed one (or one defining a
        layer another already defines differently) is reported on itself and left out."""
        accepted: list[JSON] = []
        network: NetworkTopology | None = None
        for key, obj in sorted(self.raw.items()):
            try:
                network = network_topology_from_raw([*accepted, obj])
            except InvalidObject as exc:
                self.cache.report(KIND, key, exc, obj)
                continue
            self.cache.forgive(KIND, key)
            accepted.append(obj)
        if network == self.current:
            return
        self.current = network
        # Annotation gangs (no PodGroup object) resolve their pods' spec on the next cycle.
        self.cache.cluster.network_topology = network
        for obj in list(self.annotated.values()):
            self.cache.read_group(obj)
        self.cache.changed()
