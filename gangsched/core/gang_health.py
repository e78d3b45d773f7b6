"""Running gangs through voluntary and involuntary disruption (issue 32, items 3 and 4).

Two rules, both about a gang that has run whole (at least minMember members bound):

* **Protection.** While it runs, the gang gets a PodDisruptionBudget with minAvailable =
  minMember over exactly its members, so the Eviction API (`kubectl drain`, Karpenter's
  consolidation, drift and expiry, which all evict through it and skip nodes whose pods a
  budget blocks) cannot take it below its minimum. A group opts out with an annotation, and the
  configuration sets the default. Budgets are values here (GangBudget); the edge creates and
  deletes the objects (edge/gang_protection.py). The budget is first wanted once minMember
  members have started (phase Running), not at their bind: the Eviction API lets a Pending pod
  go whatever the budgets say, so before then a budget protects nothing, and the controller
  manager would recompute its status as each member starts (one status write for a gang that
  starts together, against one per start); a gang whose members never start gets none. Once
  wanted it stays while the gang runs, through member restarts and replacements.
* **Stale gangs.** A running gang that drops below minMember (a member failed or was deleted,
  its node is gone, or NotReady or unreachable: `Node.down`) does no work while it holds its
  nodes. If replacement members do not bring it back to minMember within its grace period,
  every remaining member is evicted, with a DisruptionTarget condition and an event saying
  why, so its owners recreate them and the gang is scheduled again whole. Replacements bound
  within the period cancel the release.

Pure and synchronous: the caller passes `now` (any monotonic seconds), so tests do not sleep
and simulate can drive it in virtual time. What it remembers between reviews (which gangs ran,
since when one is short) is lost on restart; the caller passes the groups whose budgets exist,
which tells a restarted scheduler which gangs had been running, and a short gang's grace period
starts again from the restart (later, never earlier, than without it).

Incremental: a review looks again only at the gangs whose members or PodGroup changed since
the last one (ClusterState.group_revisions), at the short gangs (their grace period runs out
with the clock alone) and at those a budget newly names; the others' last result (budget or
why none) stands. Looking at every gang every second cost a sixth of a core at 10,000 gangs.
Every gang is looked at again when what all of them read changes: the set of nodes, the
user's budgets, the configuration, or the cluster state itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gangsched.core.api.dialects import (
    LIGHTWEIGHT_GANG_NAME,
    SIGS_POD_GROUP_LABEL,
    X_K8S_POD_GROUP_LABEL,
)
from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import Decision, Event, Evict, SetCondition
from gangsched.core.model import Dialect, GroupRef, Pod, PodGroup

#: The DisruptionTarget reason and the event reason on a released stale gang's members.
STALE_GANG_RELEASED = "StaleGangReleased"
#: The PodGroup event when a running gang drops below minMember, and when it is whole again.
GANG_BROKEN = "GangBroken"
GANG_RECOVERED = "GangRecovered"
#: The PodGroup event when a running gang cannot be protected (and why).
GANG_UNPROTECTED = "GangNotProtected"
DISRUPTION_TARGET = "DisruptionTarget"
#: Pod labels that name a member's group in the label dialects, tried in this order.
_MEMBERSHIP_LABELS = (SIGS_POD_GROUP_LABEL, X_K8S_POD_GROUP_LABEL, LIGHTWEIGHT_GANG_NAME)
_DIALECT_TAGS = {
    Dialect.SIGS: "sigs",
    Dialect.X_K8S: "xk8s",
    Dialect.UPSTREAM: "k8s",
    Dialect.KOORDINATOR: "koord",
    Dialect.VOLCANO: "volcano",
}


#: matchLabels, sorted.
Selector = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class GangHealthConfig:
    """Cluster-wide defaults; a PodGroup's annotations override both."""

    protect: bool = True
    #: Seconds a running gang may stay below minMember before it is released; inf: never.
    grace_seconds: float = 120.0


@dataclass(frozen=True, slots=True)
class GangBudget:
    """The PodDisruptionBudget a running gang should have."""

    group: GroupRef
    name: str
    #: matchLabels selecting exactly the gang's members.
    selector: Selector
    min_available: int
    #: The PodGroup's UID for the ownerReference (empty: no object, e.g. an annotation gang).
    owner_uid: str


@dataclass
class HealthReview:
    """What one review found and decided."""

    #: The budgets that should exist now, by group.
    budgets: dict[GroupRef, GangBudget] = field(default_factory=dict)
    #: Running gangs that want protection but cannot have it, and why.
    unprotected: dict[GroupRef, str] = field(default_factory=dict)
    #: Gangs that dropped below minMember since the last review.
    broken: list[GroupRef] = field(default_factory=list)
    #: Gangs whose grace period ran out in this review: their members are evicted.
    released: list[GroupRef] = field(default_factory=list)
    #: Conditions, evictions and events, in order (released members; broken/recovered events).
    decisions: list[Decision] = field(default_factory=list)


def budget_name(ref: GroupRef) -> str:
    """`gang-<dialect>-<name>`, within the 253 characters of an object name."""
    return f"gang-{_DIALECT_TAGS.get(ref.dialect, 'group')}-{ref.name}"[:253].rstrip("-.")


@dataclass
class GangHealth:
    config: GangHealthConfig = field(default_factory=GangHealthConfig)
    #: Gangs seen with at least minMember members bound (and not completing).
    running: set[GroupRef] = field(default_factory=set)
    #: Running gangs below minMember, since when (the caller's clock).
    short_since: dict[GroupRef, float] = field(default_factory=dict)
    #: Running gangs whose budget is wanted (minMember members started once, or its budget
    #: existed): kept until the gang stops running.
    protecting: set[GroupRef] = field(default_factory=set)
    #: Unprotectable gangs already told (one event each).
    _told: set[GroupRef] = field(default_factory=set)
    #: Per gang: (members and budgets it was computed for, selector, why not).
    _selectors: dict[GroupRef, tuple[object, Selector | None, str]] = field(default_factory=dict)
    #: Every gang's last result: the budget it wants, or why it cannot have one.
    _budgets: dict[GroupRef, GangBudget] = field(default_factory=dict)
    _unprotected: dict[GroupRef, str] = field(default_factory=dict)
    #: What the last review saw: the cluster state, its revision, and the marks of what every
    #: gang reads (any change: look at every gang again).
    _cluster: ClusterState | None = None
    _revision: int = 0
    _marks: tuple[object, ...] = ()
    #: The last `budgeted`, and the gangs forgotten since it was added to `running`.
    _budgeted: frozenset[GroupRef] | None = None
    _dropped: set[GroupRef] = field(default_factory=set)

    def review(
        self, cluster: ClusterState, *, now: float, budgeted: frozenset[GroupRef] = frozenset()
    ) -> HealthReview:
        """Look at every gang of ours that may have changed (the module says which).
        `budgeted`: the groups whose gangsched budget exists (a restarted scheduler learns
        from them which gangs were running)."""
        # Gangs `budgeted` adds to running or protecting: looked at again. Passed the same set
        # again, only those forgotten since can be missing.
        named = budgeted if budgeted is not self._budgeted else self._dropped & budgeted
        joined = {ref for ref in named if ref not in self.running or ref not in self.protecting}
        self._budgeted = budgeted
        self._dropped = set()
        self.running |= joined
        self.protecting |= joined
        marks = (
            cluster.node_set_revision,
            cluster.group_revisions_pruned,
            id(cluster.budgets),
            len(cluster.budgets),
            self.config,
        )
        full = cluster is not self._cluster or marks != self._marks
        # Cleared until this review is done: one that fails half-way is followed by a full one.
        self._cluster, self._marks = None, marks
        if full:
            refs = {ref for ref in cluster.members if ref.dialect is not Dialect.LONE_POD}
            todo = refs | self.running | set(self.short_since)
            self._budgets.clear()
            self._unprotected.clear()
        else:
            todo = joined | set(self.short_since)
            todo.update(cluster.changed_since(self._revision))
            for ref in todo:
                self._budgets.pop(ref, None)
                self._unprotected.pop(ref, None)
        out = HealthReview(budgets=self._budgets, unprotected=self._unprotected)
        for ref in sorted(todo, key=_order):
            self._review_gang(cluster, ref, now, out)
        self._cluster, self._revision = cluster, cluster.revision
        if full:
            self._told &= set(self._unprotected)
            for gone in set(self._selectors) - refs:
                del self._selectors[gone]
        else:
            for ref in todo:
                if ref not in self._unprotected:
                    self._told.discard(ref)
                if ref not in cluster.members:
                    self._selectors.pop(ref, None)
        out.budgets = dict(self._budgets)
        out.unprotected = dict(self._unprotected)
        return out

    def _review_gang(
        self, cluster: ClusterState, ref: GroupRef, now: float, out: HealthReview
    ) -> None:
        group = cluster.pod_group(ref)
        members, healthy, started, completing = _census(cluster, ref)
        if group is None or group.min_member < 2 or not members or completing:
            self._forget(ref)  # gone, not a gang, or finishing its work: nothing to guard
            return
        if healthy >= group.min_member:
            if self.short_since.pop(ref, None) is not None:
                out.decisions.append(_group_event(ref, "Normal", GANG_RECOVERED, _whole(group)))
            self.running.add(ref)
            if started >= group.min_member:
                self.protecting.add(ref)
            self._protect(cluster, group, members, out)
            return
        if ref not in self.running:
            return  # never ran whole: the scheduler is still placing it
        grace = self._grace(group)
        if ref not in self.short_since:
            self.short_since[ref] = now
            out.broken.append(ref)
            note = _short_note(group, members, cluster, grace)
            out.decisions.append(_group_event(ref, "Warning", GANG_BROKEN, note))
        waited = now - self.short_since[ref]
        if waited < grace:
            self._protect(cluster, group, members, out)  # hold what is left while it waits
            return
        self._release(group, members, healthy, waited, out)

    def _protect(
        self, cluster: ClusterState, group: PodGroup, members: list[Pod], out: HealthReview
    ) -> None:
        wanted = group.disruption_protection
        if group.ref not in self.protecting or not (
            self.config.protect if wanted is None else wanted
        ):
            return
        # The selector changes only with the members and the user's budgets: computed once
        # per change, not per review (the shared-labels fallback looks at every pod).
        key = (tuple(cluster.members[group.ref]), id(cluster.budgets), len(cluster.budgets))
        cached = self._selectors.get(group.ref)
        if cached is None or cached[0] != key:
            cached = (key, *_selector(cluster, group, members))
            self._selectors[group.ref] = cached
        _, selector, why = cached
        if selector is None:
            out.unprotected[group.ref] = why
            if group.ref not in self._told:
                self._told.add(group.ref)
                note = f"running gang not protected from voluntary disruption: {why}"
                out.decisions.append(_group_event(group.ref, "Warning", GANG_UNPROTECTED, note))
            return
        out.budgets[group.ref] = GangBudget(
            group=group.ref,
            name=budget_name(group.ref),
            selector=selector,
            min_available=group.min_member,
            owner_uid=group.uid,
        )

    def _release(
        self,
        group: PodGroup,
        members: list[Pod],
        healthy: int,
        waited: float,
        out: HealthReview,
    ) -> None:
        ref = group.ref
        self._forget(ref)
        out.released.append(ref)
        message = (
            f"gangsched: releasing stale gang {ref.key}: {healthy} of minMember "
            f"{group.min_member} members held their place for {waited:.0f}s "
            f"(grace {self._grace(group):.0f}s); evicting the rest so the gang can be "
            "scheduled again whole"
        )
        evicted = sorted(
            (p for p in members if p.node_name is not None and not p.terminating),
            key=lambda p: p.key,
        )
        evicted = [p for p in evicted if not p.is_finished]
        for pod in evicted:
            out.decisions.append(
                SetCondition(
                    pod.key, pod.uid, DISRUPTION_TARGET, "True", STALE_GANG_RELEASED, message
                )
            )
            out.decisions.append(Evict(pod.key, pod.uid, ref, message))
            out.decisions.append(
                Event(
                    "Pod",
                    pod.key,
                    "Normal",
                    STALE_GANG_RELEASED,
                    "Evicting",
                    message,
                    related_kind="PodGroup",
                    related=ref.key,
                )
            )
        note = f"{message} ({len(evicted)} evicted)"
        out.decisions.append(_group_event(ref, "Warning", STALE_GANG_RELEASED, note))

    def _grace(self, group: PodGroup) -> float:
        if group.stale_grace_seconds is not None:
            return group.stale_grace_seconds
        return self.config.grace_seconds

    def _forget(self, ref: GroupRef) -> None:
        self._dropped.add(ref)
        self.running.discard(ref)
        self.short_since.pop(ref, None)
        self.protecting.discard(ref)


def _order(ref: GroupRef) -> tuple[str, str, str]:
    return (ref.namespace, ref.name, ref.dialect.value)


def _census(cluster: ClusterState, ref: GroupRef) -> tuple[list[Pod], int, int, bool]:
    """The gang's members of ours, how many hold their place (bound to a node that still
    exists and is not down, not terminating, not failed), how many of those have started
    (phase Running), and whether one succeeded (the gang is finishing its work, not broken).
    One pass: this runs for every gang every second."""
    ours, nodes = cluster.scheduler_name, cluster.nodes
    members: list[Pod] = []
    healthy = started = 0
    for pod in cluster.group_members(ref):
        if pod.scheduler_name != ours:
            continue
        if pod.phase == "Succeeded":
            return members, healthy, started, True
        members.append(pod)
        node = nodes.get(pod.node_name) if pod.node_name is not None else None
        if node is not None and not node.down and not pod.terminating and pod.phase != "Failed":
            healthy += 1
            started += pod.phase == "Running"
    return members, healthy, started, False


def _whole(group: PodGroup) -> str:
    return f"at least minMember {group.min_member} members bound again; release cancelled"


def _short_note(group: PodGroup, members: list[Pod], cluster: ClusterState, grace: float) -> str:
    lost = []
    held = 0
    for pod in sorted(members, key=lambda p: p.key):
        if pod.node_name is None:
            continue
        node = cluster.nodes.get(pod.node_name)
        if node is None:
            lost.append(f"{pod.key} (node {pod.node_name} gone)")
        elif node.down:
            lost.append(f"{pod.key} (node {pod.node_name} not ready)")
        elif pod.is_finished:
            lost.append(f"{pod.key} ({pod.phase})")
        elif pod.terminating:
            lost.append(f"{pod.key} (terminating)")
        else:
            held += 1
    when = "never released" if math.isinf(grace) else f"released whole in {grace:.0f}s"
    gone = f"; lost: {', '.join(lost)}" if lost else "; members deleted"
    return (
        f"running gang dropped below minMember: {held} of {group.min_member} "
        f"members hold their place{gone}; {when} unless replacements are bound"
    )


def _selector(
    cluster: ClusterState, group: PodGroup, members: list[Pod]
) -> tuple[Selector | None, str]:
    """matchLabels that select exactly the gang's members in its namespace: the group's
    membership label where the dialect has one, else the labels all members share when no
    other pod carries them. None (and why) when there is no such selector, or when a budget
    of the user's already selects a member: the Eviction API refuses a pod that two budgets
    select, so a second one would block evictions the user's budget allows."""
    ref = group.ref
    selector: Selector | None = None
    for label in _MEMBERSHIP_LABELS:
        if all(pod.labels.get(label) == ref.name for pod in members):
            selector = ((label, ref.name),)
            break
    if selector is None:
        common = set(members[0].labels.items())
        for pod in members[1:]:
            common &= set(pod.labels.items())
        if not common:
            return None, "its members share no label a PodDisruptionBudget could select"
        selector = tuple(sorted(common))
        keys = {pod.key for pod in members}
        others = [
            pod.key
            for pod in cluster.pods.values()
            if pod.namespace == ref.namespace
            and pod.key not in keys
            and all(pod.labels.get(k) == v for k, v in selector)
        ]
        if others:
            return None, f"the labels its members share also select {sorted(others)[0]}"
    for budget in cluster.budgets.values():
        if budget.namespace == ref.namespace and any(
            budget.selector.matches(pod.labels) for pod in members
        ):
            return None, f"PodDisruptionBudget {budget.key} already selects its members"
    return selector, ""


def _group_event(ref: GroupRef, kind: str, reason: str, note: str) -> Event:
    return Event("PodGroup", ref.key, kind, reason, "GangHealth", note)
