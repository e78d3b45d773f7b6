"""Why is this gang (or pod) not running? The scheduler's own answer, computed in a dry run.

`explain()` runs the real core on a throwaway ClusterState built for the question (from the
API server or from manifests): the same Scheduler, plugins, cycle and preemptor as `gangsched
run`, one `Scheduler.schedule()` of the gang, and nothing is ever written anywhere. Besides the
verdict it collects what a person needs to act on it: members present against minMember, for
every member that fits nowhere kube-scheduler's per-reason node counts (in the upstream
scheduling order, the members before it assumed placed, as the cycle evaluates them), whether
preemption would help and with which victims, and the nominations and victims of an earlier
preemption that are still terminating.
"""

from __future__ import annotations

from typing import Any

from gangsched.core.cluster import ClusterState
from gangsched.core.composite.model import composite_ref
from gangsched.core.cycle import CycleResult, Gang, member_order
from gangsched.core.decisions import (
    ERROR,
    SCHEDULED,
    UNSCHEDULABLE,
    WAITING,
    WAITING_ON_PREEMPTION,
    Bind,
    Decision,
    GroupOutcome,
    Nominate,
)
from gangsched.core.framework import Framework
from gangsched.core.gang_waiting import gated_summary
from gangsched.core.group_status import timestamp
from gangsched.core.model import Dialect, GroupRef, Pod
from gangsched.core.placers import UnitPlacer
from gangsched.core.preemption.victims import gang_priority, victim_priority
from gangsched.core.scheduler import PreemptionOutcome, Preemptor, Scheduler, SchedulerConfig
from gangsched.core.snapshot import Snapshot
from gangsched.explain.report import (
    NOTHING_PENDING,
    Explanation,
    GroupMembers,
    Member,
    PodFit,
    PreemptionView,
    TreeLevel,
    Victim,
)

#: Dialects in the order a bare NAMESPACE/NAME is looked up.
_LOOKUP_ORDER = (
    Dialect.SIGS,
    Dialect.X_K8S,
    Dialect.UPSTREAM,
    Dialect.VOLCANO,
    Dialect.KOORDINATOR,
)


class NotFound(LookupError):
    """No PodGroup or pod by that name (the message says what was looked for)."""


# ---------------------------------------------------------------------------------- lookup
def resolve(
    cluster: ClusterState, namespace: str, name: str, kind: str | None = None
) -> tuple[GroupRef, bool]:
    """The group to explain for NAMESPACE/NAME and whether it was found through a pod: a
    PodGroup of any dialect (also a Koordinator annotation gang), else the group of the pod
    of that name (a lone pod is its own group). `kind` ("podgroup" or "pod") restricts it."""
    if kind in (None, "podgroup"):
        for dialect in _LOOKUP_ORDER:
            ref = GroupRef(dialect, namespace, name)
            if ref in cluster.groups or (dialect is Dialect.KOORDINATOR and ref in cluster.members):
                return ref, False
        # Pods may name a PodGroup that does not exist (yet): explain that group too.
        for member in cluster.pods.values():
            group = member.group
            if group is not None and (group.namespace, group.name) == (namespace, name):
                return group, False
        composite = composite_ref(namespace, name)
        if composite in cluster.composites:
            return composite, False
    if kind in (None, "pod"):
        found = cluster.pods.get(f"{namespace}/{name}")
        if found is not None:
            return cluster.group_of(found), True
    what = {"podgroup": "PodGroup", "pod": "pod"}.get(kind or "", "PodGroup or pod")
    raise NotFound(f"no {what} {namespace}/{name}")


# --------------------------------------------------------------------------------- explain
class _RecordingPlacer:
    """The scheduler's placer, keeping the last CycleResult (per-pod messages)."""

    def __init__(self, inner: UnitPlacer) -> None:
        self.inner = inner
        self.last: CycleResult | None = None

    def place(self, gang: Gang, snap: Snapshot) -> CycleResult:
        self.last = self.inner.place(gang, snap)
        return self.last


def explain(
    cluster: ClusterState,
    namespace: str,
    name: str,
    *,
    kind: str | None = None,
    config: SchedulerConfig | None = None,
    preemptor: Preemptor | None = None,
    strategy: str = "",
) -> Explanation:
    """Explain the PodGroup or pod NAMESPACE/NAME (see `resolve`) by running one cycle of
    its gang on `cluster`, which this changes: pass a ClusterState built for this question
    only. Raises NotFound."""
    ref, via_pod = resolve(cluster, namespace, name, kind)
    config = config or SchedulerConfig(scheduler_name=cluster.scheduler_name)
    scheduler = Scheduler(cluster, config, preemptor=preemptor)
    placer = _RecordingPlacer(scheduler.placer)
    scheduler.placer = placer  # type: ignore[assignment]
    key = scheduler.unit_key(ref)
    gang = scheduler.gang(key)
    lone = ref.dialect is Dialect.LONE_POD
    out = Explanation(
        kind="Pod" if via_pod else "PodGroup",
        target=f"{namespace}/{name}",
        gang=key,
        groups=[_group_members(cluster, part.group.ref, gang) for part in gang.parts],
        members=_members(cluster, gang),
        result=NOTHING_PENDING,
        message="",
    )
    if via_pod and not lone:
        out.notes.append(
            f"pod {namespace}/{name} belongs to the {ref.dialect.value} PodGroup {ref.key}: "
            "the scheduler places the group whole"
        )
    if key != ref and key.dialect is Dialect.COMPOSITE:
        out.notes.append(
            f"{ref.key} is scheduled with the whole tree of CompositePodGroup {key.key}: "
            "every level placed in one cycle, or nothing"
        )
    elif key != ref:
        out.notes.append(f"{ref.key} is scheduled together with its GangGroup {key.key}")
    if gang.broken is not None:
        out.notes.append(gang.broken.message)
    priority = gang_priority(gang)
    out.terminating_victims = _terminating_victims(gang, cluster, priority)
    if not gang.pending:
        out.message = _nothing_pending(cluster, gang, lone)
        return out

    out.fits = _scheduling_order(gang, scheduler.framework, cluster.snapshot)
    report = scheduler.schedule(gang, 0.0)
    out.result, out.message = report.result, report.message
    out.topology = report.topology
    out.tree = tree_levels(gang, report.decisions)
    if report.result == SCHEDULED:
        out.placements = {d.pod: d.node for d in report.decisions if isinstance(d, Bind)}
        out.message = f"{out.message}: it fits now and is bound on its next attempt"
    elif report.result in (UNSCHEDULABLE, WAITING_ON_PREEMPTION):
        out.preemption = _preemption(report.preemption, report.decisions, preemptor, strategy)
        if placer.last is not None:
            # The cycle's own per-pod texts win where the order pass differs (search).
            for fit in out.fits:
                cycle_text = placer.last.pod_messages.get(fit.pod)
                if fit.node is None and cycle_text:
                    fit.message = cycle_text
    elif report.result == WAITING:
        if any(part.group.min_member < 0 for part in gang.parts):
            why = "the group waits for its PodGroup to be created"
        elif any(part.gated for part in gang.parts):
            why = "the group waits for members (fewer pods than minMember are bound or ungated)"
        else:
            why = "the group waits for members (fewer pods than minMember)"
        out.preemption = PreemptionView(
            enabled=preemptor is not None, strategy=strategy, message=f"not attempted: {why}"
        )
    elif report.result == ERROR:
        out.preemption = PreemptionView(
            enabled=preemptor is not None,
            strategy=strategy,
            message="not attempted: the group is inconsistent (see the message)",
        )
    return out


def tree_levels(gang: Gang, decisions: list[Decision]) -> list[TreeLevel]:
    """The tree, root first, with each level's outcome from the cycle (which level failed,
    and why)."""
    if gang.tree is None:
        return []
    outcomes = {d.group: d for d in decisions if isinstance(d, GroupOutcome)}
    levels = []
    for node in gang.tree.walk():
        depth = len(node.ancestors())
        outcome = outcomes.get(node.ref)
        if node.composite is not None:
            kind, policy = "CompositePodGroup", node.composite.policy
        else:
            kind = "PodGroup"
            policy = f"minCount {node.group.min_member}" if node.group is not None else ""
        levels.append(
            TreeLevel(
                depth=depth,
                kind=kind,
                name=node.ref.key,
                policy=policy,
                result=outcome.result if outcome is not None else "",
                message=outcome.message if outcome is not None else "",
            )
        )
    return levels


def _group_members(cluster: ClusterState, ref: GroupRef, gang: Gang) -> GroupMembers:
    part = next(p for p in gang.parts if p.group.ref == ref)
    return GroupMembers(
        ref=ref,
        min_member=part.group.min_member,
        bound=len(part.bound),
        pending=len(part.pending),
        foreign=len(part.foreign),
        gated=len(part.gated),
        schedule_timeout_seconds=part.group.schedule_timeout_seconds,
        priority=part.group.priority,
        priority_class_name=part.group.priority_class_name,
    )


def _state(cluster: ClusterState, pod: Pod) -> str:
    if pod.phase == "Succeeded":
        return "succeeded"
    if pod.phase == "Failed":
        return "failed"
    if pod.terminating:
        return "terminating"
    if pod.node_name is not None:
        return "bound"
    if cluster.is_pending(pod):
        return "pending"
    if cluster.is_gated(pod):
        return "gated"
    return "other-scheduler"


def _members(cluster: ClusterState, gang: Gang) -> list[Member]:
    rows = []
    for part in gang.parts:
        for pod in sorted(cluster.group_members(part.group.ref), key=lambda p: p.key):
            rows.append(
                Member(
                    pod=pod.key,
                    group=part.group.ref.key,
                    state=_state(cluster, pod),
                    node=pod.node_name,
                    nominated_node=pod.nominated_node_name,
                    priority=pod.priority,
                    gates=list(pod.scheduling_gates),
                )
            )
    return rows


def _nothing_pending(cluster: ClusterState, gang: Gang, lone: bool) -> str:
    if lone:
        pods = cluster.group_members(gang.key)
        if not pods:
            return "the pod does not exist"
        pod = pods[0]
        state = _state(cluster, pod)
        if state == "bound":
            return f"the pod is bound to {pod.node_name}"
        if state == "gated":
            return (
                f"the pod is held by its scheduling gates ({', '.join(pod.scheduling_gates)}): "
                "gangsched does not attempt it until they are removed"
            )
        if state == "other-scheduler":
            return (
                f"the pod is not gangsched's to schedule (schedulerName {pod.scheduler_name!r}, "
                f"gangsched schedules {cluster.scheduler_name!r})"
            )
        return f"the pod is {state}"
    bound = sum(len(part.bound) for part in gang.parts)
    foreign = sum(len(part.foreign) for part in gang.parts)
    gated = [pod for part in gang.parts for pod in part.gated]
    text = f"no member is pending: {bound} bound"
    if gated:
        text += f", {gated_summary(gated)} (not attempted until their gates are removed)"
    if foreign:
        text += (
            f", {foreign} unbound with another schedulerName "
            f"(gangsched schedules {cluster.scheduler_name!r})"
        )
    return text


def _scheduling_order(gang: Gang, framework: Framework, snap: Snapshot) -> list[PodFit]:
    """The upstream order pass: each pending member in turn, earlier ones assumed where they
    fit; for members that fit nowhere, the per-reason node counts. Leaves `snap` unchanged."""
    mark = snap.checkpoint()
    fits: list[PodFit] = []
    try:
        for pod in member_order(gang.pending):
            ctx = framework.context(pod, snap)
            mask = framework.feasible(ctx, snap)
            if mask.any():
                node = None
                if pod.nominated_node_name is not None:
                    nominated = snap.index.get(pod.nominated_node_name)
                    if nominated is not None and bool(mask[nominated]):
                        node = nominated
                if node is None:
                    node = framework.select(ctx, snap, mask)
                snap.assume(pod, node)
                fits.append(PodFit(pod.key, snap.nodes[node].name, len(snap)))
                continue
            diagnosis = framework.diagnose(ctx, snap).fit
            ranked = sorted(diagnosis.reasons.items(), key=lambda item: (-item[1], item[0]))
            fits.append(
                PodFit(
                    pod=pod.key,
                    node=None,
                    nodes=diagnosis.num_nodes,
                    reasons=dict(ranked),
                    unresolvable_nodes=diagnosis.unresolvable_nodes,
                    message=diagnosis.message(),
                )
            )
    finally:
        snap.rollback(mark)
    return fits


def _preemption(
    outcome: PreemptionOutcome | None,
    decisions: list[Any],
    preemptor: Preemptor | None,
    strategy: str,
) -> PreemptionView:
    if preemptor is None:
        return PreemptionView(
            enabled=False, message="preemption is off in the scheduler configuration"
        )
    if outcome is None:
        return PreemptionView(enabled=True, strategy=strategy, message="not attempted")
    view = PreemptionView(
        enabled=True,
        strategy=outcome.strategy or strategy,
        attempted=True,
        would_help=outcome.started,
        message=outcome.message,
        pdb_violations=outcome.pdb_violations,
        waiting_for_capacity_until=(
            None if outcome.waiting_until is None else timestamp(outcome.waiting_until)
        ),
    )
    view.victims = [
        Victim(
            pod=pod.key,
            node=pod.node_name,
            priority=pod.priority,
            group=pod.group.key if pod.group is not None else None,
        )
        for pod in outcome.victims
    ]
    view.nominations = {
        d.pod: d.node for d in decisions if isinstance(d, Nominate) and d.node is not None
    }
    return view


def _terminating_victims(gang: Gang, cluster: ClusterState, priority: int) -> list[Victim]:
    """As the preemptor's check before preempting again, but naming the pods."""
    snap = cluster.snapshot
    nodes = sorted(snap.nominated_nodes(gang.pending))
    victims = []
    for node in nodes:
        for pod in sorted(snap.node_pods[node].values(), key=lambda p: p.key):
            if pod.terminating and victim_priority(pod, cluster) < priority:
                victims.append(
                    Victim(
                        pod=pod.key,
                        node=pod.node_name,
                        priority=pod.priority,
                        group=pod.group.key if pod.group is not None else None,
                    )
                )
    return victims
