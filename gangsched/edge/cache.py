"""Keeps the core's ClusterState in step with what the informers see.

Raw objects are converted once, on arrival, into the model; the snapshot is updated
incrementally (a pod bound or gone updates two rows, not the whole matrix). Each change also
tells the queue whether it may help waiting gangs, as kube-scheduler's queueing hints do: a
node added or changed, a pod deleted or finished, a PodGroup or member pod changed, a
PriorityClass or PDB changed.

Placements the scheduler decided are "assumed" until the watch shows the pod bound, so an
older event that still shows the pod pending cannot free its capacity for another gang.
Likewise victims whose eviction is in flight count as terminating at once: a gang retried
before the watch shows them going waits for them instead of preempting them a second time.

This module keeps pods, nodes and PodGroups; PriorityClasses, PDBs and namespaces are kept by
edge/policy_cache.py, ClusterNetworkTopology layers by edge/network_topology_cache.py (both
composed here, calling back only through edge/cache_host.py), storage objects by
edge/volume_cache.py, DRA objects by edge/dra_cache.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from gangsched.core.api import (
    InvalidObject,
    PriorityResolver,
    node_from_raw,
    pod_from_raw,
    pod_group_from_raw,
)
from gangsched.core.api.volcano import volcano_queue
from gangsched.core.cluster import ClusterState
from gangsched.core.model import Dialect, GroupRef, Pod
from gangsched.core.scheduler import Scheduler
from gangsched.edge.handlers import Handler, PagedHandler, Relist, object_key
from gangsched.edge.kube import JSON
from gangsched.edge.network_topology_cache import NetworkTopologyCache
from gangsched.edge.nodepool_cache import NodePoolCache
from gangsched.edge.pod_fingerprint import PodFingerprint, pod_fingerprint, rebound
from gangsched.edge.policy_cache import PolicyCache

log = structlog.get_logger("gangsched.cache")

_T = TypeVar("_T")


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass
class ClusterCache:
    scheduler: Scheduler
    clock: Callable[[], float] = time.monotonic
    #: Pod key -> node name for binds decided but not yet observed.
    assumed: dict[str, str] = field(default_factory=dict)
    #: Pod key -> nominated node (None: cleared) decided but not yet observed.
    nominations: dict[str, str | None] = field(default_factory=dict)
    #: Pod key -> uid of victims being evicted, not yet seen terminating.
    evicting: dict[str, str] = field(default_factory=dict)
    #: Objects we could not read, with the problem (reported on the object by the edge).
    problems: dict[str, str] = field(default_factory=dict)
    #: Called with (kind, key, message) for an object that cannot be read.
    on_problem: Callable[[str, str, str], None] | None = None
    #: Raw PodGroups that could not be read, by apiVersion/key: read again when the
    #: PriorityClasses change (a group named a class created after it; nothing else would
    #: change the group, so its members waited for good).
    unreadable_groups: dict[str, JSON] = field(default_factory=dict)
    #: apiVersion, uid and schedulerName of each object in `problems` (to post events on it).
    problem_refs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Called when something happened that may let a waiting gang schedule.
    on_change: Callable[[], None] | None = None
    #: Called with (ref, status) on every PodGroup event: the status writer compares with the
    #: server's copy (kopf's own PodGroup watches did it, at 3 ms of CPU per event, issue 30).
    on_group_status: Callable[[GroupRef, JSON], None] | None = None
    #: Called with the ref of a deleted PodGroup or CompositePodGroup: what others keep per
    #: group goes with it (a scheduler running for months sees every Job's group come and go).
    on_group_deleted: Callable[[GroupRef], None] | None = None
    #: Whether a relist queues the pending gangs. `gangsched run` starts without (the lists
    #: of its start would walk every pending pod once per list, a twentieth of the CPU before
    #: its first bind, issue 30) and queues them all once, when its caches have synced
    #: (`start_queueing`).
    queueing: bool = True
    #: Whether the log already said that Volcano queues are ignored (said once per process).
    _volcano_queue_noted: bool = False
    _fingerprints: dict[str, PodFingerprint] = field(default_factory=dict)
    #: PriorityClasses, PDBs and Namespaces.
    policy: PolicyCache = field(init=False)
    #: Koordinator's ClusterNetworkTopology layers (and the PodGroups read against them).
    network: NetworkTopologyCache = field(init=False)
    #: Karpenter's NodePools (their room for new nodes), where the CRD is served.
    node_pools: NodePoolCache = field(init=False)

    def __post_init__(self) -> None:
        self.policy = PolicyCache(self)
        self.network = NetworkTopologyCache(self)
        self.node_pools = NodePoolCache(self)

    @property
    def cluster(self) -> ClusterState:
        return self.scheduler.cluster

    # ------------------------------------------------------------------------------- helpers
    def changed(self) -> None:
        self.scheduler.queue.cluster_changed(self.clock())
        self.wake()

    def requeue_pending(self) -> None:
        """Every gang with pending pods queued (and the waiting ones woken: a relist may have
        brought their members or PodGroups), unless queueing has not started."""
        if self.queueing:
            self.scheduler.enqueue_pending(self.clock())
            self.scheduler.queue.wake_waiting()

    def start_queueing(self) -> None:
        self.queueing = True
        self.scheduler.enqueue_pending(self.clock())

    def wake(self) -> None:
        """Wake the scheduling loop now, not at its next tick (up to a second away)."""
        if self.on_change is not None:
            self.on_change()

    def report(self, kind: str, key: str, exc: InvalidObject, obj: JSON | None = None) -> None:
        message = "; ".join(str(p) for p in exc.problems)
        if self.problems.get(f"{kind}/{key}") != message:
            self.problems[f"{kind}/{key}"] = message
            meta = (obj or {}).get("metadata") if isinstance(obj, dict) else None
            spec = (obj or {}).get("spec") if isinstance(obj, dict) else None
            self.problem_refs[f"{kind}/{key}"] = {
                "apiVersion": str((obj or {}).get("apiVersion") or ""),
                "uid": str(meta.get("uid") or "") if isinstance(meta, dict) else "",
                "schedulerName": str(spec.get("schedulerName") or "")
                if isinstance(spec, dict)
                else "",
            }
            log.warning("cannot read object", kind=kind, key=key, problem=message)
            if self.on_problem is not None:
                self.on_problem(kind, key, message)

    # ---------------------------------------------------------------------------------- pods
    def pods(self) -> PagedHandler:
        return PagedHandler(
            self._replace_pods, self._upsert_pod, self._delete_pod, self._relist_pods
        )

    def _replace_pods(self, objects: list[JSON]) -> None:
        relist = self._relist_pods()
        relist.add(objects)
        relist.done()

    def _relist_pods(self) -> Relist:
        """Pods go into the cache page by page as the list arrives (no page is kept, so the
        raw JSON of 50,000 pods is never held at once); pods no page brought are gone."""
        seen: set[str] = set()

        def add(objects: list[JSON]) -> None:
            for obj in objects:
                seen.add(object_key(obj))
                self._upsert_pod(obj, notify=False)

        def done() -> None:
            for key in [k for k in self.cluster.pods if k not in seen]:
                self._forget_pod(key)
            self.policy.refresh_budgets()
            self.requeue_pending()
            self.changed()

        return Relist(add, done)

    def _upsert_pod(self, obj: JSON, *, notify: bool = True) -> None:
        key = object_key(obj)
        old_fingerprint = self._fingerprints.get(key)
        fingerprint = pod_fingerprint(obj)
        if old_fingerprint == fingerprint and key in self.cluster.pods:
            return  # e.g. kwok/kubelet status churn: nothing the scheduler reads changed
        self._fingerprints[key] = fingerprint
        try:
            # The cached model matches the last update unless that one could not be read.
            cached = None if f"Pod/{key}" in self.problems else self.cluster.pods.get(key)
            pod = rebound(cached, old_fingerprint, fingerprint) or pod_from_raw(
                obj, priorities=self._resolver()
            )
        except InvalidObject as exc:
            self.report("Pod", key, exc, obj)
            stale = self.cluster.pods.get(key)
            if stale is not None and self.cluster.is_pending(stale):
                # Never schedule from a copy the pod no longer matches; a bound pod's old
                # copy stays (its node capacity is still in use).
                self._forget_pod(key)
            return
        self.forgive("Pod", key)
        old: Pod | None = self.cluster.pods.get(key)
        if key in self.nominations:
            wanted = self.nominations[key]
            if pod.nominated_node_name == wanted or not self.cluster.is_pending(pod):
                del self.nominations[key]  # written (or moot: bound, deleted)
            else:
                pod.nominated_node_name = wanted  # the status write is still in flight
        if key in self.evicting:
            if pod.terminating or pod.uid != self.evicting[key]:
                del self.evicting[key]  # the deletion landed (or another pod took the name)
            else:
                pod.terminating = True  # the eviction is in flight
        assumed = self.assumed.get(key)
        if assumed is not None:
            if pod.node_name is None and not pod.terminating:
                pod.node_name = assumed  # the bind is in flight: keep its capacity
            else:
                self.assumed.pop(key, None)
        self.cluster.upsert_pod(pod)
        if old is not None and old.group is None and pod.group is not None:
            # It joined a group (a label or annotation added later): its old entry as a
            # group of one must not schedule it apart from its gang.
            self.scheduler.queue.remove(self.cluster.group_of(old))
        if not notify:
            return
        freed = old is not None and old.holds_resources and not pod.holds_resources
        if freed or (old is not None and old.terminating != pod.terminating):
            self.changed()
        if self.cluster.is_pending(pod):
            self.scheduler.enqueue_pod(pod, self.clock())
            # A member that is new, or whose last scheduling gate just went, may complete a
            # gang that was waiting for members: retry it at once (upstream's
            # UpdatePodSchedulingGatesEliminated event does the same).
            arrived = old is None or self.cluster.is_gated(old)
            if pod.group is not None:
                unit = self.scheduler.unit_key(pod.group)
                if arrived:
                    self.scheduler.queue.activate(unit)
                else:  # e.g. Koordinator's min-available annotation changed
                    self.scheduler.queue.activate_waiting(unit)
            if old is not None and old.claims != pod.claims:
                # The resourceclaim controller named the pod's generated claims (DRA): the
                # pod was waiting for them, so retry its gang now.
                self.scheduler.queue.activate(self.scheduler.unit_key(self.cluster.group_of(pod)))
                arrived = True
            if arrived:
                self.wake()
        elif self.cluster.is_gated(pod) and pod.group is not None:
            # A gated member arrived or changed: a gang waiting for members says so again
            # (how many are gated, by which gates), though it still cannot go.
            self.scheduler.queue.activate_waiting(self.scheduler.unit_key(pod.group))
        self.policy.pod_changed(pod.namespace, pod.labels, old.labels if old is not None else {})

    def read(self, kind: str, obj: JSON, convert: Callable[[Any], _T]) -> _T | None:
        """`convert(obj)`, or None with the problem reported on the object (and forgotten
        once the object reads again): the storage and DRA caches read their kinds so."""
        try:
            value = convert(obj)
        except InvalidObject as exc:
            self.report(kind, object_key(obj), exc, obj)
            return None
        self.forgive(kind, object_key(obj))
        return value

    def forgive(self, kind: str, key: str) -> None:
        """The object is readable again (or gone): forget its problem."""
        self.problems.pop(f"{kind}/{key}", None)
        self.problem_refs.pop(f"{kind}/{key}", None)

    def _delete_pod(self, obj: JSON) -> None:
        key = object_key(obj)
        self.forgive("Pod", key)
        gone = self.cluster.pods.get(key)
        self._forget_pod(key)
        if gone is not None:
            self.policy.pod_changed(gone.namespace, gone.labels)
        self.changed()

    def nominate(self, key: str, uid: str, node: str | None) -> None:
        """A nomination decided now (the API server learns it a moment later): reserve the
        capacity in the cluster state at once."""
        pod = self.cluster.pods.get(key)
        if pod is None or pod.uid != uid or not self.cluster.is_pending(pod):
            return
        self.nominations[key] = node
        self.cluster.nominate(pod, node)

    def evict(self, key: str, uid: str) -> None:
        """A victim chosen now (its eviction is sent a moment later): terminating at once."""
        pod = self.cluster.pods.get(key)
        if pod is None or pod.uid != uid or pod.terminating:
            return
        self.evicting[key] = uid
        self.cluster.set_terminating(pod, True)

    def eviction_failed(self, key: str, uid: str) -> None:
        """The eviction was not carried out: the victim counts as running again."""
        if self.evicting.pop(key, None) != uid:
            return
        pod = self.cluster.pods.get(key)
        if pod is not None and pod.uid == uid:
            self.cluster.set_terminating(pod, False)
            self.changed()

    def _forget_pod(self, key: str) -> None:
        self.evicting.pop(key, None)
        self.assumed.pop(key, None)
        self.nominations.pop(key, None)
        self._fingerprints.pop(key, None)
        pod = self.cluster.delete_pod(key)
        if pod is not None and pod.group is None and pod.node_name is None:
            self.scheduler.queue.remove(self.cluster.group_of(pod))

    # --------------------------------------------------------------------------------- nodes
    def nodes(self) -> Handler:
        return Handler(self._replace_nodes, self._upsert_node, self._delete_node)

    def _replace_nodes(self, objects: list[JSON]) -> None:
        nodes = []
        for obj in objects:
            try:
                nodes.append(node_from_raw(obj))
            except InvalidObject as exc:
                self.report("Node", object_key(obj), exc, obj)
        self.cluster.replace_nodes(nodes)
        # Pods whose node arrived only now hold resources there.
        for pod in self.cluster.pods.values():
            index = self.cluster.snapshot.node_of(pod)
            if (
                pod.holds_resources
                and index is not None
                and pod.key not in self.cluster.snapshot.node_pods[index]
            ):
                self.cluster.snapshot.place(pod, index)
        self.changed()

    def _upsert_node(self, obj: JSON) -> None:
        try:
            node = node_from_raw(obj)
        except InvalidObject as exc:
            self.report("Node", object_key(obj), exc, obj)
            return
        old = self.cluster.nodes.get(node.name)
        if old is not None and (old.labels, old.allocatable, old.taints, old.unschedulable) == (
            node.labels,
            node.allocatable,
            node.taints,
            node.unschedulable,
        ):
            return  # heartbeat-only update: nothing the scheduler reads changed
        is_new = old is None
        self.cluster.upsert_node(node)
        if is_new:
            for pod in self.cluster.pods.values():
                if pod.holds_resources and pod.node_name == node.name:
                    index = self.cluster.snapshot.index[node.name]
                    if pod.key not in self.cluster.snapshot.node_pods[index]:
                        self.cluster.snapshot.place(pod, index)
        self.changed()

    def _delete_node(self, obj: JSON) -> None:
        self.cluster.delete_node(object_key(obj))
        self.changed()

    # ---------------------------------------------------------------------------- PodGroups
    def pod_groups(self, dialect: Dialect | None = None) -> Handler:
        return Handler(
            lambda objects: self._replace_groups(objects, dialect),
            self._upsert_group,
            self._delete_group,
        )

    def _replace_groups(self, objects: list[JSON], dialect: Dialect | None = None) -> None:
        if dialect is not None:
            dialect_prefix = dialect.value
        elif objects:
            dialect_prefix = str(objects[0].get("apiVersion", "")).split("/", 1)[0]
        else:
            return
        seen = set()
        for obj in objects:
            ref = self._upsert_group(obj, notify=False)
            if ref is not None:
                seen.add(ref)
        for ref in [
            r for r in self.cluster.groups if r.dialect.value == dialect_prefix and r not in seen
        ]:
            self.cluster.delete_group(ref)
        self.requeue_pending()
        self.changed()

    def read_group(self, obj: JSON) -> GroupRef | None:
        """Read a PodGroup again (its ClusterNetworkTopology layers changed)."""
        return self._upsert_group(obj)

    def _upsert_group(self, obj: JSON, *, notify: bool = True) -> GroupRef | None:
        self.network.remember(obj)
        try:
            group = pod_group_from_raw(
                obj, priorities=self._resolver(), network_topology=self.network.current
            )
        except InvalidObject as exc:
            self.report("PodGroup", object_key(obj), exc, obj)
            self.unreadable_groups[_raw_group_key(obj)] = obj
            stale = _group_ref(obj)
            if stale is not None and stale in self.cluster.groups:
                # Its members wait (PodGroup not found) instead of following the old spec.
                self.cluster.delete_group(stale)
                self.scheduler.queue.activate(self.scheduler.unit_key(stale))
            return None
        self.forgive("PodGroup", object_key(obj))
        self.unreadable_groups.pop(_raw_group_key(obj), None)
        if group.ref.dialect is Dialect.VOLCANO and not self._volcano_queue_noted:
            queue = volcano_queue(_dict(obj.get("spec")))
            if queue:
                self._volcano_queue_noted = True
                log.info(
                    "Volcano queues are ignored: gangsched has no queue capacity or fair "
                    "share; scheduling.volcano.sh PodGroups are scheduled by priority and age "
                    "(said once)",
                    podGroup=group.key,
                    queue=queue,
                )
        # The model holds only what scheduling reads (spec, uid, creation): a status-only
        # update, e.g. the one we write after each cycle, changes nothing. Requeueing on it
        # made a preempting gang retry at once, before its victims were seen terminating,
        # and preempt again (bench/README.md, workload (c)).
        unchanged = self.cluster.groups.get(group.ref) == group
        self.cluster.upsert_group(group)
        if self.on_group_status is not None:
            self.on_group_status(group.ref, dict(obj.get("status") or {}))
        if notify and not unchanged:
            key = self.scheduler.unit_key(group.ref)
            self.scheduler.enqueue_unit(key, self.clock())
            self.scheduler.queue.activate(key)
            # Members created before their PodGroup (a controller that writes the group
            # last) otherwise waited for the loop's next tick (bench/README.md, (t) with
            # t_pods_first).
            self.wake()
        return group.ref

    def reread_unreadable_groups(self) -> None:
        """Read again the PodGroups that could not be read (the PriorityClasses changed)."""
        for obj in list(self.unreadable_groups.values()):
            self._upsert_group(obj)

    def _delete_group(self, obj: JSON) -> None:
        self.forgive("PodGroup", object_key(obj))
        self.unreadable_groups.pop(_raw_group_key(obj), None)
        self.network.forget(obj)
        ref = _group_ref(obj)
        if ref is None:
            return
        self.cluster.delete_group(ref)
        if self.on_group_deleted is not None:
            self.on_group_deleted(ref)
        self.scheduler.queue.activate(self.scheduler.unit_key(ref))
        self.wake()  # its members now wait for it: say so at once

    # ------------------------------------------- PriorityClasses, PDBs, Namespaces (policy_cache)
    def priority_classes(self) -> Handler:
        return self.policy.priority_classes()

    def budgets(self) -> Handler:
        return self.policy.budgets()

    def namespaces(self) -> Handler:
        return self.policy.namespaces()

    def _resolver(self) -> PriorityResolver:
        return self.policy.resolver()


def _group_ref(obj: JSON) -> GroupRef | None:
    """The ref of a raw PodGroup, readable or not (its apiVersion group and name)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    group = str(obj.get("apiVersion") or "").split("/", 1)[0]
    dialect = next((d for d in Dialect if d.value == group), None)
    if dialect is None or dialect in (Dialect.LONE_POD, Dialect.KOORDINATOR):
        return None
    return GroupRef(dialect, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _raw_group_key(obj: JSON) -> str:
    """A raw PodGroup's API group and namespace/name (one object whatever version serves it)."""
    return f"{str(obj.get('apiVersion') or '').split('/', 1)[0]}/{object_key(obj)}"
