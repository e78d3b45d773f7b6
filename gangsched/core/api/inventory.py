"""Everything read from one input (a set of manifests, or one informer resync), in model form."""

from __future__ import annotations

from dataclasses import dataclass, field

from gangsched.core.api.priority import PriorityResolver
from gangsched.core.model import DisruptionBudget, GroupRef, Node, Pod, PodGroup, PriorityClass


@dataclass(slots=True)
class Inventory:
    """The cluster state a scheduling run starts from.

    Keys: nodes and priority classes by name; pods and budgets by "namespace/name"; groups by
    GroupRef, since two dialects may each define a PodGroup with the same namespace and name.
    Insertion order is input order, which keeps simulate runs reproducible.
    """

    #: Pending pods naming this scheduler are the ones a run places.
    scheduler_name: str = "gangsched"
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    pod_groups: dict[GroupRef, PodGroup] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    budgets: dict[str, DisruptionBudget] = field(default_factory=dict)
    #: Namespace name -> labels (with kubernetes.io/metadata.name), declared or referenced.
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def priorities(self) -> PriorityResolver:
        return PriorityResolver(self.priority_classes.values())

    def pending(self) -> list[Pod]:
        """Pods this scheduler has to place: ours, unbound, alive."""
        return [
            pod
            for pod in self.pods.values()
            if pod.scheduler_name == self.scheduler_name
            and pod.node_name is None
            and not pod.terminating
            and not pod.is_finished
        ]
