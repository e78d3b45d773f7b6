"""The internal model the scheduler works on, independent of the API dialect it came from.

Objects are plain slotted dataclasses: the informers and the simulate loader build them once
from raw Kubernetes JSON (see `gangsched.core.api`), and the hot path reads attributes only.
The placement-relevant part of a pod is split into hashable pieces so that results computed
for one pod (e.g. which nodes its selector admits) are reused for every identical gang member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gangsched.core.labels import LabelSelector, NodeSelectorTerm
from gangsched.core.resources import ResourceList
from gangsched.core.topology.request import GatherRule, TopologyRequest

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


class Dialect(StrEnum):
    """Where a group definition came from. The value is what users see in messages."""

    SIGS = "scheduling.sigs.k8s.io"
    X_K8S = "scheduling.x-k8s.io"
    UPSTREAM = "scheduling.k8s.io"
    KOORDINATOR = "gang.scheduling.koordinator.sh"
    VOLCANO = "scheduling.volcano.sh"
    LONE_POD = "pod"
    #: A scheduling.k8s.io/v1alpha3 CompositePodGroup: the root (or an inner level) of a tree
    #: of PodGroups (gangsched.core.composite); never a pod's own group.
    COMPOSITE = "scheduling.k8s.io composite"


class DisruptionMode(StrEnum):
    SINGLE = "Single"
    ALL = "All"


class MatchPolicy(StrEnum):
    """Koordinator's gang match policy: which members count toward minMember.

    ONCE_SATISFIED: once any member has been bound the gang is satisfied for good, and later
    members are placed one by one. ONLY_WAITING: only the members placed in this cycle count.
    WAITING_AND_RUNNING: bound members count too (kube-scheduler's and scheduler-plugins' rule).
    """

    ONCE_SATISFIED = "once-satisfied"
    ONLY_WAITING = "only-waiting"
    WAITING_AND_RUNNING = "waiting-and-running"


class GangMode(StrEnum):
    """Koordinator's gang mode; here both give the same all-or-nothing result (see
    docs/concepts/dialects.md)."""

    STRICT = "Strict"
    NON_STRICT = "NonStrict"


@dataclass(frozen=True, slots=True)
class GangAnnotations:
    """What a member of a Koordinator annotation gang says about its gang."""

    min_available: int | None = None
    total_number: int | None = None
    mode: GangMode = GangMode.STRICT
    match_policy: MatchPolicy | None = None
    gang_group: tuple[GroupRef, ...] = ()
    #: network-topology-spec's gather rules, resolved against the cluster's layers when the
    #: gang is built (ClusterState.pod_group), since the layers may change after the pod.
    gather: tuple[GatherRule, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupRef:
    """Identifies a PodGroup. Lone pods get a ref of dialect LONE_POD named after the pod."""

    dialect: Dialect
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True  # an empty key with Exists tolerates everything
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    weight: int
    term: NodeSelectorTerm


#: Seconds past a pod's deletionTimestamp after which it counts as stuck terminating (see
#: `Pod.stuck_terminating`; the node lifecycle controller's view of an unreachable node).
STUCK_AFTER = 30.0


@dataclass(frozen=True, slots=True)
class NodeConstraints:
    """Everything that decides a pod's eligible nodes from node labels, name and taints alone.

    Hashable: the snapshot caches the eligible-node mask per distinct value.
    """

    node_name: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    preferred_terms: tuple[PreferredNodeTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    def selects_namespace(
        self, own_namespace: str, namespace: str, ns_labels: dict[str, str]
    ) -> bool:
        """Namespaces the term applies to: its list, its selector, or else the pod's own."""
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is not None:
            return self.namespace_selector.matches(ns_labels)
        return not self.namespaces and namespace == own_namespace


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    """A preferred pod (anti-)affinity term: only scores, never filters."""

    weight: int  # 1-100
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector | None
    min_domains: int = 1
    honor_node_affinity: bool = True  # nodeAffinityPolicy Honor (default)
    honor_node_taints: bool = False  # nodeTaintsPolicy Ignore (default)


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wildcard = ("", "0.0.0.0")
        return (
            self.host_ip in wildcard or other.host_ip in wildcard or self.host_ip == other.host_ip
        )


@dataclass(frozen=True, slots=True)
class PodVolumeClaim:
    """A pod volume backed by a PersistentVolumeClaim in the pod's namespace: a
    `persistentVolumeClaim` volume, or a generic `ephemeral` one whose claim
    `<pod>-<volume>` the ephemeral-volume controller creates (owned by the pod)."""

    volume: str
    claim: str
    ephemeral: bool = False
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of spec.resourceClaims: a named claim, or one generated from a template."""

    name: str
    claim_name: str = ""
    template_name: str = ""
    #: Template claims: the generated claim's name from status.resourceClaimStatuses; None
    #: while the resourceclaim controller has not created it, "" when it needed no claim.
    generated_name: str | None = None

    @property
    def resolved_name(self) -> str | None:
        """The ResourceClaim's name, "" when none is needed, None when not known yet."""
        return self.claim_name if self.claim_name else self.generated_name


#: The NoExecute taints the node lifecycle controller puts on a node whose kubelet reports it
#: NotReady or has stopped reporting (Ready False or Unknown); it evicts the pods there once
#: their tolerations run out (300 s by default).
NODE_DOWN_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


@dataclass(slots=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    allocatable: ResourceList = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    #: metadata.creationTimestamp, seconds since the epoch: tells nodes an autoscaler added
    #: for a waiting gang from the ones it found (0.0: not known).
    created: float = 0.0

    @property
    def down(self) -> bool:
        """NotReady or unreachable, as the node lifecycle controller's taints say: its pods
        are still bound, but do no work."""
        return any(t.effect == "NoExecute" and t.key in NODE_DOWN_TAINTS for t in self.taints)


@dataclass(slots=True, eq=False)
class Pod:
    """A pod as the scheduler sees it. Identity is the (namespace, name) key; `uid` guards binds."""

    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    nominated_node_name: str | None = None
    phase: str = "Pending"
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    requests: ResourceList = field(default_factory=dict)
    constraints: NodeConstraints = field(default_factory=NodeConstraints)
    host_ports: tuple[HostPort, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    spread: tuple[TopologySpreadConstraint, ...] = ()
    #: Seconds since the epoch; orders members (first seen first) and victims (youngest first).
    created: float = 0.0
    terminating: bool = False
    #: metadata.deletionTimestamp, seconds since the epoch: when the grace period ends and
    #: the kubelet kills what still runs (None: not being deleted, or not known).
    deleting_at: float | None = None
    group: GroupRef | None = None
    #: Members of a Koordinator annotation gang carry its definition themselves.
    gang_annotations: GangAnnotations | None = None
    #: "namespace/name" of the controller owning the pod (PodGroup status.occupiedBy).
    owner: str = ""
    #: Volumes backed by PersistentVolumeClaims (see gangsched.core.volumes).
    volume_claims: tuple[PodVolumeClaim, ...] = ()
    #: spec.schedulingGates names: while any is left the API server refuses to bind the pod,
    #: so it is never placed, never a preemptor and never counted toward minMember.
    scheduling_gates: tuple[str, ...] = ()
    #: spec.os.name ("linux", "windows"; "" when unset): the kubelet refuses other OSes.
    os_name: str = ""
    #: Spec features gangsched cannot place yet, as users name them (e.g. "spec.resourceClaims
    #: (Dynamic Resource Allocation)"): the pod is refused on every node, never bound.
    unsupported: tuple[str, ...] = ()
    #: spec.resourceClaims (Dynamic Resource Allocation).
    claims: tuple[PodClaim, ...] = ()
    #: "namespace/name" of every owner reference (scheduler-plugins' status.occupiedBy).
    owner_refs: tuple[str, ...] = ()
    #: The Volcano task the pod belongs to (`volcano.sh/task-spec`), for minTaskMember.
    task: str = ""
    #: When the pod became Unschedulable (PodScheduled=False reason Unschedulable, its
    #: lastTransitionTime; seconds since the epoch): where a wait for new capacity starts.
    unschedulable_since: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def annotation_min_available(self) -> int | None:
        return self.gang_annotations.min_available if self.gang_annotations else None

    @property
    def is_bound(self) -> bool:
        return self.node_name is not None

    @property
    def is_gated(self) -> bool:
        return bool(self.scheduling_gates)

    @property
    def is_finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def stuck_terminating(self, now: float) -> bool:
        """Still here `STUCK_AFTER` seconds past its deletionTimestamp (`now`: wall clock):
        the kubelet kills a pod at that time, so one still here is on a node that is gone
        or not responding, and may never leave. Nobody should wait for it."""
        return self.deleting_at is not None and now > self.deleting_at + STUCK_AFTER

    @property
    def holds_resources(self) -> bool:
        """Bound pods hold their requests until they finish (terminating ones too)."""
        return self.node_name is not None and not self.is_finished

    def __repr__(self) -> str:
        return f"Pod({self.key}, node={self.node_name}, prio={self.priority})"


@dataclass(slots=True)
class PodGroup:
    """One gang: at least `min_member` of its pods run together or none are placed."""

    ref: GroupRef
    min_member: int = 1
    min_resources: ResourceList = field(default_factory=dict)
    schedule_timeout_seconds: int | None = None
    priority_class_name: str = ""
    #: Resolved from priority_class_name; None when the group names no class.
    priority: int | None = None
    preemption_policy: str | None = None
    disruption_mode: DisruptionMode = DisruptionMode.SINGLE
    #: Koordinator GangGroup: every group listed here (self included) is placed at once.
    gang_group: tuple[GroupRef, ...] = ()
    #: Koordinator's match policy; None: the dialect's rule (bound members count).
    match_policy: MatchPolicy | None = None
    #: Koordinator's mode and total-number: read and checked, no effect on placement.
    gang_mode: GangMode = GangMode.STRICT
    total_number: int | None = None
    #: Volcano's minTaskMember: task name (a member's `volcano.sh/task-spec`) -> how many of
    #: that task's members must run with the gang.
    min_task_members: dict[str, int] = field(default_factory=dict)
    created: float = 0.0
    uid: str = ""
    #: metadata.generation: status conditions carry it as observedGeneration.
    generation: int = 0
    #: Keep the gang inside one domain of a node label (issue 14); None: anywhere.
    topology: TopologyRequest | None = None
    #: scheduling.k8s.io spec.parentCompositePodGroupName: the CompositePodGroup (same
    #: namespace) whose tree this gang belongs to; None for a root.
    parent: str | None = None
    #: `gangsched.io/wait-for-capacity-seconds`: seconds to wait for new nodes before preempting
    #: (0: at once); None: the configuration's default.
    capacity_wait: float | None = None
    #: The annotations of docs/concepts/gang-protection.md (core/gang_health.py): protect the
    #: running gang from voluntary disruption (None: the configured default), and how long it
    #: may stay below minMember before it is released (None: the default; inf: never).
    disruption_protection: bool | None = None
    stale_grace_seconds: float | None = None

    @property
    def key(self) -> str:
        return self.ref.key


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY


@dataclass(slots=True)
class DisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector
    #: From status when the API server reported it; simulate computes it otherwise.
    disruptions_allowed: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
