"""The shapes of the raw Kubernetes JSON gangsched reads, as TypedDicts.

Only the fields the scheduler looks at are listed; everything else passes through untouched.
They are `total=False` because the API omits empty fields and hand-written manifests omit
defaults. They document the input and type the informer caches; the converters still check
every value, since YAML gives no guarantee that a field has the declared type.
"""

from __future__ import annotations

from typing import Any, TypedDict

#: "500m", "1.5Gi", or a bare number (YAML gives ints and floats).
Quantity = str | int | float
RawResourceList = dict[str, Quantity]
#: An int or a percentage such as "25%".
IntOrString = int | str


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creationTimestamp: str
    deletionTimestamp: str
    resourceVersion: str
    generation: int


class RawObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta


# -- selectors --------------------------------------------------------------------------------
class RawLabelSelectorRequirement(TypedDict, total=False):
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: list[str]


class RawLabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[RawLabelSelectorRequirement]


class RawNodeSelectorRequirement(TypedDict, total=False):
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: list[str]


class RawNodeSelectorTerm(TypedDict, total=False):
    matchExpressions: list[RawNodeSelectorRequirement]
    matchFields: list[RawNodeSelectorRequirement]


# -- nodes ------------------------------------------------------------------------------------
class RawTaint(TypedDict, total=False):
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute
    timeAdded: str


class RawNodeSpec(TypedDict, total=False):
    unschedulable: bool
    taints: list[RawTaint]
    podCIDR: str
    providerID: str


class RawNodeStatus(TypedDict, total=False):
    capacity: RawResourceList
    allocatable: RawResourceList
    conditions: list[dict[str, Any]]


class RawNode(RawObject, total=False):
    spec: RawNodeSpec
    status: RawNodeStatus


# -- pods -------------------------------------------------------------------------------------
class RawResourceRequirements(TypedDict, total=False):
    requests: RawResourceList
    limits: RawResourceList


class RawContainerPort(TypedDict, total=False):
    name: str
    containerPort: int
    hostPort: int
    hostIP: str
    protocol: str  # TCP (default) | UDP | SCTP


class RawContainer(TypedDict, total=False):
    name: str
    image: str
    resources: RawResourceRequirements
    ports: list[RawContainerPort]
    #: Only on init containers: "Always" makes it a sidecar.
    restartPolicy: str


class RawNodeSelector(TypedDict, total=False):
    nodeSelectorTerms: list[RawNodeSelectorTerm]


class RawPreferredSchedulingTerm(TypedDict, total=False):
    weight: int
    preference: RawNodeSelectorTerm


class RawNodeAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: RawNodeSelector
    preferredDuringSchedulingIgnoredDuringExecution: list[RawPreferredSchedulingTerm]


class RawPodAffinityTerm(TypedDict, total=False):
    labelSelector: RawLabelSelector
    namespaces: list[str]
    topologyKey: str
    namespaceSelector: RawLabelSelector
    matchLabelKeys: list[str]
    mismatchLabelKeys: list[str]


class RawWeightedPodAffinityTerm(TypedDict, total=False):
    weight: int
    podAffinityTerm: RawPodAffinityTerm


class RawPodAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: list[RawPodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution: list[RawWeightedPodAffinityTerm]


class RawAffinity(TypedDict, total=False):
    nodeAffinity: RawNodeAffinity
    podAffinity: RawPodAffinity
    podAntiAffinity: RawPodAffinity


class RawToleration(TypedDict, total=False):
    key: str
    operator: str  # Equal (default) | Exists
    value: str
    effect: str
    tolerationSeconds: int


class RawTopologySpreadConstraint(TypedDict, total=False):
    maxSkew: int
    topologyKey: str
    whenUnsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    labelSelector: RawLabelSelector
    minDomains: int
    nodeAffinityPolicy: str  # Honor (default) | Ignore
    nodeTaintsPolicy: str  # Honor | Ignore (default)
    matchLabelKeys: list[str]


class RawPodSchedulingGroup(TypedDict, total=False):
    """core/v1 PodSchedulingGroup (Kubernetes 1.36+, feature gate GenericWorkload)."""

    podGroupName: str


class RawPodSchedulingGate(TypedDict, total=False):
    name: str


class RawPodSpec(TypedDict, total=False):
    schedulerName: str
    nodeName: str
    nodeSelector: dict[str, str]
    affinity: RawAffinity
    tolerations: list[RawToleration]
    topologySpreadConstraints: list[RawTopologySpreadConstraint]
    containers: list[RawContainer]
    initContainers: list[RawContainer]
    overhead: RawResourceList
    #: Pod-level resources (feature gate PodLevelResources): override the container sum.
    resources: RawResourceRequirements
    priority: int
    priorityClassName: str
    preemptionPolicy: str
    schedulingGroup: RawPodSchedulingGroup
    volumes: list[RawVolume]


class RawPersistentVolumeClaimVolumeSource(TypedDict, total=False):
    claimName: str
    readOnly: bool


class RawVolume(TypedDict, total=False):
    """A pod volume; only the sources that need a PersistentVolumeClaim are typed."""

    name: str
    persistentVolumeClaim: RawPersistentVolumeClaimVolumeSource
    #: A generic ephemeral volume: its claim template (read by the ephemeral-volume controller).
    ephemeral: dict[str, Any]
    schedulingGates: list[RawPodSchedulingGate]


class RawPodStatus(TypedDict, total=False):
    phase: str
    nominatedNodeName: str
    conditions: list[dict[str, Any]]


class RawPod(RawObject, total=False):
    spec: RawPodSpec
    status: RawPodStatus


# -- PodGroups --------------------------------------------------------------------------------
class RawPodGroupStatus(TypedDict, total=False):
    phase: str
    occupiedBy: str
    scheduled: int
    running: int
    succeeded: int
    failed: int
    scheduleStartTime: str
    conditions: list[dict[str, Any]]


class RawSigsTopology(TypedDict, total=False):
    required: str
    preferred: str


class RawSigsPodGroupSpec(TypedDict, total=False):
    """scheduling.sigs.k8s.io/v1alpha1, extended by gangsched with KEP-5710 fields."""

    minMember: int
    minResources: RawResourceList
    scheduleTimeoutSeconds: int
    priorityClassName: str
    disruptionMode: str  # Single (default) | All
    #: Issue 14: {"required": <node label>, "preferred": <node label>}, both optional.
    topology: RawSigsTopology


class RawSigsPodGroup(RawObject, total=False):
    spec: RawSigsPodGroupSpec
    status: RawPodGroupStatus


class RawXK8sPodGroupSpec(TypedDict, total=False):
    """scheduling.x-k8s.io/v1alpha1 (kubernetes-sigs/scheduler-plugins today)."""

    minMember: int
    minResources: RawResourceList
    scheduleTimeoutSeconds: int


class RawXK8sPodGroup(RawObject, total=False):
    spec: RawXK8sPodGroupSpec
    status: RawPodGroupStatus


class RawGangSchedulingPolicy(TypedDict, total=False):
    minCount: int


class RawPodGroupSchedulingPolicy(TypedDict, total=False):
    """Exactly one member is set."""

    basic: dict[str, Any]
    gang: RawGangSchedulingPolicy


class RawDisruptionModeObject(TypedDict, total=False):
    """v1alpha3 / v1beta1 (1.37) union; exactly one member is set."""

    single: dict[str, Any]
    all: dict[str, Any]


class RawTopologyConstraint(TypedDict, total=False):
    key: str


class RawSchedulingConstraints(TypedDict, total=False):
    topology: list[RawTopologyConstraint]


class RawUpstreamPodGroupSpec(TypedDict, total=False):
    """scheduling.k8s.io PodGroup: v1beta1 and v1alpha3 (Kubernetes 1.37+, one shape), v1alpha2
    (1.36 only)."""

    schedulingPolicy: RawPodGroupSchedulingPolicy
    #: v1beta1/v1alpha3: {"single": {}} | {"all": {}}; v1alpha2: "Pod" | "PodGroup".
    disruptionMode: RawDisruptionModeObject | str
    priorityClassName: str
    priority: int
    #: 1.37+ (feature gate PodGroupPreemptionPolicy).
    preemptionPolicy: str
    podGroupTemplateRef: dict[str, Any]  # v1alpha2
    workloadRef: dict[str, Any]  # 1.37+
    parentCompositePodGroupName: str  # 1.37+ (feature gate CompositePodGroup)
    #: Feature gate TopologyAwareWorkloadScheduling: {"topology": [{"key": <node label>}]}
    #: (v1alpha2 once: {"topologyConstraints": [{"topologyKey": ...}]}).
    schedulingConstraints: RawSchedulingConstraints


class RawUpstreamPodGroup(RawObject, total=False):
    spec: RawUpstreamPodGroupSpec
    status: dict[str, Any]


RawPodGroup = RawSigsPodGroup | RawXK8sPodGroup | RawUpstreamPodGroup


# -- priority and disruption policy -----------------------------------------------------------
class RawPriorityClass(RawObject, total=False):
    value: int
    globalDefault: bool
    preemptionPolicy: str
    description: str


class RawPDBSpec(TypedDict, total=False):
    minAvailable: IntOrString
    maxUnavailable: IntOrString
    selector: RawLabelSelector
    unhealthyPodEvictionPolicy: str


class RawPDBStatus(TypedDict, total=False):
    disruptionsAllowed: int
    currentHealthy: int
    desiredHealthy: int
    expectedPods: int


class RawPDB(RawObject, total=False):
    spec: RawPDBSpec
    status: RawPDBStatus


class RawNamespace(RawObject, total=False):
    spec: dict[str, Any]
    status: dict[str, Any]
