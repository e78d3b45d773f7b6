"""Grow before you evict (issue 32 item 2): wait a bounded time for new nodes before preempting.

On a cluster that grows (Karpenter, cluster-autoscaler), a gang that fits only by preempting
running work may instead wait for the autoscaler to add nodes: evicting a training job costs
its progress, a new node costs minutes. The policy is per PodGroup (the annotation
`gangsched.io/wait-for-capacity-seconds`, core/api/capacity_wait.py) and by default in the
configuration (`preemption.waitForCapacitySeconds`); 0, the default, preempts at once as
upstream does.

`CapacityWaitPreemptor` wraps the workload preemptor. It still runs the victim search, so a
gang for which preemption cannot help is reported as before and waiting is only ever said of
a gang that preemption would place. While the wait lasts, the victims found are not evicted
and nothing is nominated: the gang's members stay `PodScheduled=False` with reason
`Unschedulable`, which is what makes an autoscaler provision, and the PodGroup's status and
FailedScheduling event say "waiting up to X for new capacity before preempting (until T)".
If nodes arrive and the gang fits, the next cycle binds it without preemption (a node added
is a cluster change that retries it). When the wait is over, the outcome the search found
goes through, its message prefixed "capacity did not arrive within X; preempting".

The wait starts when the gang became Unschedulable: the earliest of the first failed attempt
this preemptor saw and the members' `Unschedulable` condition's lastTransitionTime (so a
restarted scheduler resumes the wait). Time comes from `clock` (wall-clock seconds in
`gangsched run` and `explain`, simulate's virtual time in `gangsched simulate`); the core
never reads a clock itself. `retry_after` tells the scheduler to try the gang again when the
wait ends even if nothing in the cluster changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gangsched.core.api.capacity_wait import format_duration
from gangsched.core.cluster import ClusterState
from gangsched.core.cycle import CycleResult, Gang
from gangsched.core.framework import Framework
from gangsched.core.group_status import timestamp
from gangsched.core.model import GroupRef
from gangsched.core.scheduler import PreemptionOutcome, Preemptor


def waiting_message(bound: float, until: float, victims: int) -> str:
    return (
        f"waiting up to {format_duration(bound)} for new capacity before preempting "
        f"(until {timestamp(until)}; preemption would evict {victims} pod(s))"
    )


def expired_message(bound: float) -> str:
    return f"capacity did not arrive within {format_duration(bound)}; preempting"


def capacity_wait_of(gang: Gang, default: float) -> float:
    """The unit's wait in seconds: the longest any of its PodGroups asks for (the unit is
    preempted for as one), else the configured default."""
    own = [part.group.capacity_wait for part in gang.parts if part.group.capacity_wait is not None]
    return max(own) if own else default


@dataclass
class CapacityWaitPreemptor:
    """A Preemptor that lets gangs wait for new nodes before it evicts anything for them."""

    inner: Preemptor
    #: Wall-clock (or virtual) seconds; the same clock as the pods' condition times.
    clock: Callable[[], float]
    #: The wait of a gang whose PodGroups set none (0: preempt at once).
    default_seconds: float = 0.0
    #: Unit -> when it became Unschedulable, as first seen here.
    started: dict[GroupRef, float] = field(default_factory=dict)

    def preempt(
        self, gang: Gang, failed: CycleResult, cluster: ClusterState, framework: Framework
    ) -> PreemptionOutcome:
        self._forget_placed(cluster)
        bound = capacity_wait_of(gang, self.default_seconds)
        if bound <= 0:
            return self.inner.preempt(gang, failed, cluster, framework)
        now = self.clock()
        since = self.since(gang, now)
        outcome = self.inner.preempt(gang, failed, cluster, framework)
        if not outcome.victims:
            # Preemption cannot help (the gang waits for capacity anyway, as any
            # unschedulable gang), or earlier victims still terminate: nothing to hold back.
            return outcome
        until = since + bound
        if now < until:
            # Not started: no decisions, no nominations. The victims are the ones the wait
            # spares for now (`gangsched explain` shows them).
            return PreemptionOutcome(
                started=False,
                message=waiting_message(bound, until, len(outcome.victims)),
                victims=outcome.victims,
                strategy=outcome.strategy,
                waiting_until=until,
                retry_after=until - now,
            )
        return replace(outcome, message=f"{expired_message(bound)}: {outcome.message}")

    def since(self, gang: Gang, now: float) -> float:
        """When the gang became Unschedulable (never later than `now`), remembered."""
        times = [pod.unschedulable_since for pod in gang.pending]
        known = [t for t in times if t is not None]
        remembered = self.started.get(gang.key, now)
        start = min([remembered, *known, now])
        self.started[gang.key] = start
        return start

    def _forget_placed(self, cluster: ClusterState) -> None:
        """Units with no pending member left (placed, or gone) start afresh next time."""
        for key in list(self.started):
            members = (pod for ref in cluster.unit_of(key) for pod in cluster.group_members(ref))
            if not any(cluster.is_pending(pod) for pod in members):
                del self.started[key]
