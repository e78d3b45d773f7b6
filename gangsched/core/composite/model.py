"""The CompositePodGroup as the scheduler sees it (scheduling.k8s.io/v1alpha3, KEP-6012)."""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.core.model import Dialect, DisruptionMode, GroupRef


@dataclass(slots=True)
class CompositePodGroup:
    """An inner node of a PodGroup tree: its children are PodGroups and CompositePodGroups
    that name it in `parentCompositePodGroupName`."""

    ref: GroupRef
    #: spec.parentCompositePodGroupName (same namespace); None for a root.
    parent: str | None = None
    #: gang: {minGroupCount}; a basic policy needs one child, and lets each child go alone.
    min_group_count: int = 1
    gang: bool = False
    disruption_mode: DisruptionMode = DisruptionMode.SINGLE
    priority_class_name: str = ""
    priority: int = 0
    preemption_policy: str | None = None
    #: spec.schedulingConstraints.topology[0].key: the whole subtree in one domain of it.
    topology_key: str | None = None
    created: float = 0.0
    uid: str = ""
    generation: int = 0

    @property
    def key(self) -> str:
        return self.ref.key

    @property
    def policy(self) -> str:
        return f"gang (minGroupCount {self.min_group_count})" if self.gang else "basic"


def composite_ref(namespace: str, name: str) -> GroupRef:
    return GroupRef(Dialect.COMPOSITE, namespace, name)
