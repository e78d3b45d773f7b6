"""Keeps the cluster state's PriorityClasses, PodDisruptionBudgets and namespace labels in step
with their informers: the policy objects preemption and priority admission read.

A PriorityClass change rebuilds the resolver pods and PodGroups are read with. A PDB's
disruptionsAllowed comes from its status, or is computed here from the cached pods when no
controller reports it (a cluster without kube-controller-manager, simulate): the pod cache
calls `pod_changed` when a pod the budgets may count comes, goes or changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gangsched.core.api import (
    InvalidObject,
    PriorityResolver,
    compute_disruptions_allowed,
    has_reported_disruptions,
    namespace_from_raw,
    pdb_from_raw,
    priority_class_from_raw,
)
from gangsched.core.api.disruption import is_gang_budget
from gangsched.edge.cache_host import CacheHost
from gangsched.edge.handlers import Handler, object_key
from gangsched.edge.kube import JSON


@dataclass
class PolicyCache:
    #: The ClusterCache composing this one (edge/cache_host.py says why a protocol).
    cache: CacheHost
    #: Raw PDBs, kept to recompute disruptionsAllowed when the API server reports none.
    raw_budgets: dict[str, JSON] = field(default_factory=dict)
    #: Bumped by every change of raw_budgets (gang protection reads its budgets anew only then).
    raw_budgets_revision: int = 0
    #: Keys of the budgets whose disruptionsAllowed is computed here, by namespace.
    _local: dict[str, set[str]] = field(default_factory=dict)
    _priorities: PriorityResolver | None = None

    def resolver(self) -> PriorityResolver:
        """Priority admission as the pods and PodGroups are read; rebuilt only when the
        PriorityClasses change, not per event."""
        if self._priorities is None:
            self._priorities = PriorityResolver(self.cache.cluster.priority_classes.values())
        return self._priorities

    def priority_classes(self) -> Handler:
        return Handler(self._replace_classes, self._upsert_class, self._delete_class)

    def _replace_classes(self, objects: list[JSON]) -> None:
        classes = {}
        for obj in objects:
            try:
                pc = priority_class_from_raw(obj)
            except InvalidObject as exc:
                self.cache.report("PriorityClass", object_key(obj), exc, obj)
                continue
            classes[pc.name] = pc
        self.cache.cluster.priority_classes = classes
        self._priorities = None
        self.cache.reread_unreadable_groups()
        self.cache.changed()

    def _upsert_class(self, obj: JSON) -> None:
        try:
            pc = priority_class_from_raw(obj)
        except InvalidObject as exc:
            self.cache.report("PriorityClass", object_key(obj), exc, obj)
            return
        self.cache.cluster.priority_classes[pc.name] = pc
        self._priorities = None
        self.cache.reread_unreadable_groups()
        self.cache.changed()

    def _delete_class(self, obj: JSON) -> None:
        self.cache.cluster.priority_classes.pop(object_key(obj), None)
        self._priorities = None
        self.cache.changed()

    def budgets(self) -> Handler:
        return Handler(self._replace_budgets, self._upsert_budget, self._delete_budget)

    def _replace_budgets(self, objects: list[JSON]) -> None:
        self.raw_budgets = {object_key(obj): obj for obj in objects}
        self.raw_budgets_revision += 1
        self.refresh_budgets()
        self.cache.changed()

    def _upsert_budget(self, obj: JSON) -> None:
        key = object_key(obj)
        self.raw_budgets[key] = obj
        self.raw_budgets_revision += 1
        self._read_budget(key, obj)
        self.cache.changed()

    def _delete_budget(self, obj: JSON) -> None:
        key = object_key(obj)
        if self.raw_budgets.pop(key, None) is not None:
            self.raw_budgets_revision += 1
        self._drop_budget(key)
        self.cache.changed()

    def refresh_budgets(self) -> None:
        """Every budget read again (after a relist): one budget's change reads only that one
        (`_upsert_budget`), and a pod's change only the budgets counted here that select it
        (`pod_changed`). With a budget per running gang (issue 32), reading them all at
        every pod event made each event cost as much as there were gangs."""
        self.cache.cluster.budgets = {}
        self._local = {}
        for key, raw in self.raw_budgets.items():
            self._read_budget(key, raw)

    def pod_changed(self, namespace: str, *labels: Mapping[str, str]) -> None:
        """A pod of `namespace`, with these labels (before and after), came, went, or changed:
        the budgets whose disruptionsAllowed is computed here and that select it count it
        again. Nothing to do where a controller reports every budget's status."""
        keys = self._local.get(namespace)
        if not keys:
            return
        budgets = self.cache.cluster.budgets
        for key in list(keys):
            budget = budgets.get(key)
            if budget is not None and any(budget.selector.matches(each) for each in labels):
                self._read_budget(key, self.raw_budgets[key])

    def _read_budget(self, key: str, raw: JSON) -> None:
        """disruptionsAllowed from the status, or computed here when no controller reports it
        (`_local` then remembers the budget, whose count follows the pods)."""
        self._drop_budget(key)
        if is_gang_budget(raw):
            return  # gangsched's own gang budgets never weigh on its choice of victims
        try:
            budget = pdb_from_raw(raw)
            if not has_reported_disruptions(raw):
                matching = [
                    p
                    for p in self.cache.cluster.pods.values()
                    if p.namespace == budget.namespace
                    and p.node_name is not None
                    and not p.terminating
                    and not p.is_finished
                    and budget.selector.matches(p.labels)
                ]
                budget.disruptions_allowed = compute_disruptions_allowed(
                    raw, matching_pods=matching
                )
                self._local.setdefault(budget.namespace, set()).add(key)
        except InvalidObject as exc:
            self.cache.report("PodDisruptionBudget", key, exc, raw)
            return
        self.cache.cluster.budgets[key] = budget

    def _drop_budget(self, key: str) -> None:
        self.cache.cluster.budgets.pop(key, None)
        namespace, _, _ = key.partition("/")
        keys = self._local.get(namespace)
        if keys is not None:
            keys.discard(key)

    # ---------------------------------------------------------------------------- namespaces
    def namespaces(self) -> Handler:
        return Handler(self._replace_namespaces, self._upsert_namespace, self._delete_namespace)

    def _replace_namespaces(self, objects: list[JSON]) -> None:
        labels = {}
        for obj in objects:
            try:
                name, ns_labels = namespace_from_raw(obj)
            except InvalidObject:
                continue
            labels[name] = ns_labels
        self.cache.cluster.replace_namespace_labels(labels)

    def _upsert_namespace(self, obj: JSON) -> None:
        try:
            name, ns_labels = namespace_from_raw(obj)
        except InvalidObject:
            return
        self.cache.cluster.set_namespace_labels(name, ns_labels)

    def _delete_namespace(self, obj: JSON) -> None:
        self.cache.cluster.set_namespace_labels(object_key(obj), None)
