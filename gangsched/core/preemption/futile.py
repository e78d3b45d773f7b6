"""Not searching again for victims that were not there a moment ago.

A preemption search that finds nothing has shown that the gang does not fit even with every
lower-priority pod removed (or that no such pod exists). Most cluster changes cannot undo
that: a bind or a new pod only takes room, and a new lower-priority pod is one more victim
the search would remove anyway. Yet every such change sends the gang back to the queue, and
a big gang that no rack can take repeated the whole search (every domain, every candidate)
on each retry: in the topology trace of issue 14, gangsched spent twice kube-scheduler's CPU
there. So the last futile outcome per gang is kept with what it depended on, and given again
while nothing changed that can give room (`ClusterState.freeing`), the gang's pods and
PodGroups are the same objects (any update replaces them), and the PriorityClasses are the
same. The outcome given again says what the last search found (which nodes lacked what): a
pod bound since may have changed those words, not the answer, as kube-scheduler keeps a pod's
last failure message while its queueing hints skip the events that cannot help it. A gang
with no lower-priority pod at all is not remembered: a new low pod would make "no victims"
untrue, and finding that out costs one pass over the pods.

Gangs for which taking room can help are always searched: required pod affinity (a new pod
can be the one a member must join) and DoNotSchedule spread constraints (a pod elsewhere
raises the minimum the skew is measured from); so are gangs with volumes or device claims
(their free PVs and devices are not counted by `freeing`) and CompositePodGroup trees.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import Gang
from gangsched.core.model import GroupRef, Pod, PodGroup
from gangsched.core.scheduler import PreemptionOutcome

#: Entries kept at most (one per unschedulable gang); the oldest go first beyond it.
MAX_ENTRIES = 4096


@dataclass(frozen=True, slots=True)
class _Basis:
    freeing: int
    priority_classes: tuple[tuple[str, int, str], ...]
    pods: tuple[Pod, ...]
    groups: tuple[PodGroup, ...]

    def same(self, other: _Basis) -> bool:
        return (
            self.freeing == other.freeing
            and self.priority_classes == other.priority_classes
            and len(self.pods) == len(other.pods)
            and all(a is b for a, b in zip(self.pods, other.pods, strict=True))
            and len(self.groups) == len(other.groups)
            and all(a is b for a, b in zip(self.groups, other.groups, strict=True))
        )


def can_gain_from_new_pods(pod: Pod) -> bool:
    """Whether a pod placed elsewhere (not a pod removed) could make room for this one."""
    if pod.affinity or pod.volume_claims or pod.claims:
        return True
    return any(c.when_unsatisfiable == "DoNotSchedule" for c in pod.spread)


class FutileSearches:
    """The last futile preemption outcome of each gang, and when it still holds."""

    def __init__(self) -> None:
        self._entries: dict[GroupRef, tuple[_Basis, PreemptionOutcome]] = {}
        self.reused = 0

    @staticmethod
    def _basis(gang: Gang, cluster: ClusterState) -> _Basis | None:
        if gang.tree is not None or any(can_gain_from_new_pods(p) for p in gang.pending):
            return None
        bound = (p for part in gang.parts for p in part.bound)
        return _Basis(
            freeing=cluster.freeing,
            priority_classes=tuple(
                sorted(
                    (name, pc.value, pc.preemption_policy)
                    for name, pc in cluster.priority_classes.items()
                )
            ),
            pods=(*gang.pending, *bound),
            groups=tuple(part.group for part in gang.parts),
        )

    def recall(self, gang: Gang, cluster: ClusterState) -> PreemptionOutcome | None:
        """The outcome remembered for this gang when nothing that matters changed since."""
        entry = self._entries.get(gang.key)
        if entry is None:
            return None
        basis = self._basis(gang, cluster)
        if basis is None or not basis.same(entry[0]):
            del self._entries[gang.key]
            return None
        self.reused += 1
        return entry[1]

    def remember(self, gang: Gang, cluster: ClusterState, outcome: PreemptionOutcome) -> None:
        basis = self._basis(gang, cluster)
        if basis is None:
            return
        if len(self._entries) >= MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]
        self._entries[gang.key] = (basis, outcome)

    def forget(self, gang: Gang) -> None:
        self._entries.pop(gang.key, None)
