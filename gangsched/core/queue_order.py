"""Where a gang stands in the scheduling queue: each dialect ordered as its owner orders it.

Every entity is compared on (priority, higher first; timestamp, older first; name), and each
dialect supplies the timestamp and name its own scheduler sorts by:

* upstream `scheduling.k8s.io` groups and lone pods, as kube-scheduler's PrioritySort: a
  group enters the queue with its first pod, so its timestamp is that of its earliest pending
  member; a lone pod's is its own. The PodGroup object's age plays no part: a lone pod created
  before a gang's pods goes first even when the gang's PodGroup is older;
* `scheduling.x-k8s.io` and `scheduling.sigs.k8s.io` groups, as scheduler-plugins'
  Coscheduling and Koordinator's QueueSort: the PodGroup's creationTimestamp (its pods'
  time only while the PodGroup does not exist); Koordinator's annotation-only gangs, the
  creation time of their first pod; `scheduling.volcano.sh` groups as Volcano orders jobs
  (priority, then the PodGroup's creationTimestamp);
* ties, as scheduler-plugins and Koordinator break them: the smallest "namespace/name" of
  the pods queued (kube-scheduler leaves ties to its heap; any fixed order will do).

A GangGroup (several PodGroups placed together) stands where its earliest part stands. The
queue timestamp upstream is the time the scheduler first saw the pod; gangsched uses the
pod's creationTimestamp, the same instant for a running scheduler and, unlike a first-seen
time, stable across restarts. kube-scheduler also refreshes the timestamp of an entity that
failed, moving it behind younger ones of its priority; gangsched keeps it, as scheduler-plugins
and Koordinator do (failed gangs wait out their backoff in the unschedulable pool anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.core.cycle import Gang, GangMember
from gangsched.core.model import Dialect

#: Dialects whose groups are ordered by the PodGroup object's creation time.
_BY_GROUP_CREATION = frozenset({Dialect.SIGS, Dialect.X_K8S, Dialect.KOORDINATOR, Dialect.VOLCANO})


@dataclass(frozen=True, slots=True)
class QueuePosition:
    priority: int
    #: Seconds since the epoch; older first among equal priorities.
    timestamp: float
    #: Final tie-break: "namespace/name" of a pod.
    name: str


def queue_position(gang: Gang) -> QueuePosition:
    """The gang's place in the queue by the rules of its dialects' owners (module doc)."""
    stamps = [_part_position(part) for part in gang.parts if part.pending]
    if not stamps:
        return QueuePosition(gang.priority, 0.0, gang.key.key)
    timestamp, name = min(stamps)
    return QueuePosition(gang.priority, timestamp, name)


def _part_position(part: GangMember) -> tuple[float, str]:
    first = min(part.pending, key=lambda pod: (pod.created, pod.key))
    if part.group.ref.dialect in _BY_GROUP_CREATION and part.group.min_member >= 0:
        # min_member < 0 marks a PodGroup the pods name but the cluster lacks.
        return part.group.created, min(pod.key for pod in part.pending)
    return first.created, first.key
