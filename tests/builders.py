"""The one set of test builders: model objects for the pure core, raw JSON for the converters.

Unit convention, everywhere in this module: quantities are written as in a manifest, as
strings ("500m", "2Gi") or plain numbers meaning whole units (cpu=2 is two cores and
cpu=0.5 half of one, as `cpu: 2` and `cpu: 0.5` in YAML), converted with the production
parser. So a model pod and the raw pod it stands for are built from the same arguments, and
no test carries its own unit.

Defaults: a node has 4 CPUs, 16Gi and room for 110 pods; a pod requests 1 CPU and 100Mi and
names gangsched as its scheduler (pass OTHER_SCHEDULER for pods placed by someone else); a
pod without a node is pending, a pod with one is running.

Model builders are the short names (node, pod, group, ...); raw builders start with `raw_`
and return the dicts an informer or `gangsched simulate` reads (nodes, pods, PodGroups of
every dialect, priority classes, budgets, storage and claims).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from gangsched.core.api.dialects import (
    KOORDINATOR_GANG_GROUPS,
    KOORDINATOR_GANG_NAME,
    KOORDINATOR_MIN_AVAILABLE,
    SIGS_POD_GROUP_LABEL,
    X_K8S_POD_GROUP_LABEL,
)
from gangsched.core.cluster import ClusterState
from gangsched.core.dra.model import (
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    ExactRequest,
    MatchAttribute,
    ResourceClaim,
    ResourceSlice,
)
from gangsched.core.labels import LabelSelector, NodeSelectorTerm, Requirement
from gangsched.core.model import (
    Dialect,
    DisruptionBudget,
    DisruptionMode,
    GroupRef,
    HostPort,
    Node,
    NodeConstraints,
    Pod,
    PodAffinityTerm,
    PodClaim,
    PodGroup,
    PodVolumeClaim,
    PreferredNodeTerm,
    PriorityClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from gangsched.core.quantity import to_milli, to_units
from gangsched.core.snapshot import Snapshot
from gangsched.core.volumes.book import VolumeBook
from gangsched.core.volumes.model import (
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

SCHEDULER = "gangsched"
OTHER_SCHEDULER = "default-scheduler"
JSON = dict[str, Any]
Quantity = str | int | float
#: For asserting on model values, which are in bytes: `claim.request == 20 * GIB`.
GIB = 1024**3

#: apiVersion of a PodGroup object per dialect (Koordinator gangs live on pod annotations,
#: or use a scheduling.sigs.k8s.io PodGroup).
POD_GROUP_API_VERSIONS: dict[Dialect, str] = {
    Dialect.SIGS: "scheduling.sigs.k8s.io/v1alpha1",
    Dialect.X_K8S: "scheduling.x-k8s.io/v1alpha1",
    Dialect.UPSTREAM: "scheduling.k8s.io/v1alpha3",
}


# ================================================================================ quantities
def resources(
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    extra: Mapping[str, Quantity] | None = None,
) -> dict[str, int]:
    """A model resource list (millicores, whole units) from manifest quantities."""
    out: dict[str, int] = {}
    if cpu is not None:
        out["cpu"] = to_milli(cpu)
    if memory is not None:
        out["memory"] = to_units(memory)
    for name, value in (extra or {}).items():
        out[name] = to_units(value)
    return out


def _manifest_resources(
    cpu: Quantity | None, memory: Quantity | None, extra: Mapping[str, Quantity] | None
) -> dict[str, str]:
    out = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {name: str(value) for name, value in out.items() if value is not None}


# ================================================================================ model
def ref(name: str, namespace: str = "default", dialect: Dialect = Dialect.SIGS) -> GroupRef:
    return GroupRef(dialect, namespace, name)


def lone(name: str, namespace: str = "default") -> GroupRef:
    """The ref of a pod that belongs to no group (a gang of one)."""
    return GroupRef(Dialect.LONE_POD, namespace, name)


def node(
    name: str,
    cpu: Quantity = 4,
    *,
    memory: Quantity = "16Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    unschedulable: bool = False,
    extra: Mapping[str, Quantity] | None = None,
) -> Node:
    allocatable = resources(cpu, memory, extra)
    allocatable["pods"] = pods
    return Node(
        name=name,
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        allocatable=allocatable,
        taints=tuple(taints),
        unschedulable=unschedulable,
    )


def pod(
    name: str = "p",
    cpu: Quantity | None = 1,
    *,
    memory: Quantity | None = "100Mi",
    extra: Mapping[str, Quantity] | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    group: str | None = None,
    dialect: Dialect = Dialect.SIGS,
    priority: int = 0,
    preemption_policy: str = "PreemptLowerPriority",
    scheduler_name: str = SCHEDULER,
    created: float = 0.0,
    nominated: str | None = None,
    terminating: bool = False,
    phase: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    required_terms: Sequence[NodeSelectorTerm] | None = None,
    preferred_terms: Sequence[PreferredNodeTerm] = (),
    tolerations: Iterable[Toleration] = (),
    spec_node_name: str | None = None,
    affinity: Iterable[PodAffinityTerm] = (),
    anti_affinity: Iterable[PodAffinityTerm] = (),
    preferred_affinity: Iterable[WeightedPodAffinityTerm] = (),
    preferred_anti_affinity: Iterable[WeightedPodAffinityTerm] = (),
    spread: Iterable[TopologySpreadConstraint] = (),
    host_ports: Iterable[HostPort] = (),
) -> Pod:
    """A model pod. `node_name` binds it (a running pod); `spec_node_name` is the constraint of a
    pending pod that names its node; cpu=None and memory=None request nothing."""
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=dict(labels or {}),
        scheduler_name=scheduler_name,
        node_name=node_name,
        nominated_node_name=nominated,
        phase=phase or ("Running" if node_name else "Pending"),
        priority=priority,
        preemption_policy=preemption_policy,
        requests=resources(cpu, memory, extra),
        constraints=NodeConstraints(
            node_name=spec_node_name,
            node_selector=tuple(sorted((node_selector or {}).items())),
            required_terms=None if required_terms is None else tuple(required_terms),
            preferred_terms=tuple(preferred_terms),
            tolerations=tuple(tolerations),
        ),
        affinity=tuple(affinity),
        anti_affinity=tuple(anti_affinity),
        preferred_affinity=tuple(preferred_affinity),
        preferred_anti_affinity=tuple(preferred_anti_affinity),
        spread=tuple(spread),
        host_ports=tuple(host_ports),
        created=created,
        terminating=terminating,
        group=ref(group, namespace, dialect) if group else None,
    )


def gang_pods(name: str, count: int, *, start: float = 0.0, **kwargs: Any) -> list[Pod]:
    """`count` pending members name-0 .. name-(count-1) of group `name`, created in order."""
    return [
        pod(f"{name}-{i}", group=name, created=start + float(i), **kwargs) for i in range(count)
    ]


def group(
    name: str,
    min_member: int = 1,
    *,
    namespace: str = "default",
    dialect: Dialect = Dialect.SIGS,
    priority: int | None = None,
    preemption_policy: str | None = None,
    mode: DisruptionMode = DisruptionMode.SINGLE,
    gang_group: Iterable[str] = (),
    min_resources: Mapping[str, Quantity] | None = None,
    created: float = 0.0,
) -> PodGroup:
    return PodGroup(
        ref=ref(name, namespace, dialect),
        min_member=min_member,
        min_resources=resources(extra=min_resources),
        priority=priority,
        preemption_policy=preemption_policy,
        disruption_mode=mode,
        gang_group=tuple(ref(g, namespace, dialect) for g in gang_group),
        created=created,
    )


def priority_class(
    name: str, value: int, *, preemption_policy: str = "PreemptLowerPriority"
) -> PriorityClass:
    return PriorityClass(name=name, value=value, preemption_policy=preemption_policy)


def budget(
    name: str, allowed: int, *, namespace: str = "default", **match_labels: str
) -> DisruptionBudget:
    return DisruptionBudget(
        namespace=namespace,
        name=name,
        selector=selector(**match_labels),
        disruptions_allowed=allowed,
    )


def cluster(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    groups: Iterable[PodGroup] = (),
    budgets: Iterable[DisruptionBudget] = (),
    priority_classes: Iterable[PriorityClass] = (),
    *,
    volumes: VolumeBook | None = None,
    scheduler_name: str = SCHEDULER,
) -> ClusterState:
    return ClusterState.build(
        scheduler_name=scheduler_name,
        nodes=nodes,
        pods=pods,
        groups=groups,
        budgets=budgets,
        priority_classes=priority_classes,
        volumes=volumes,
    )


def snapshot(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> Snapshot:
    return Snapshot.build(nodes, pods)


# ------------------------------------------------------------------------ selectors, terms
def selector(**match_labels: str) -> LabelSelector:
    return LabelSelector(match_labels=tuple(sorted(match_labels.items())))


def req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, operator, tuple(values))


def term(*expressions: Requirement, fields: Sequence[Requirement] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields))


# ------------------------------------------------------------------------ volumes
def claim(
    name: str,
    *,
    storage_class: str | None = "local",
    size: Quantity = "10Gi",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    volume_name: str = "",
    namespace: str = "default",
    selected_node: str = "",
    deleting: bool = False,
    owner_uids: frozenset[str] = frozenset(),
) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        namespace=namespace,
        name=name,
        uid=f"uid-pvc-{name}",
        storage_class=storage_class,
        access_modes=frozenset(modes),
        request=to_units(size),
        volume_name=volume_name,
        bind_completed=bool(volume_name),
        phase="Bound" if volume_name else "Pending",
        selected_node=selected_node,
        deleting=deleting,
        owner_uids=owner_uids,
    )


def local_volume(
    name: str,
    node_name: str | None,
    *,
    storage_class: str = "local",
    size: Quantity = "50Gi",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    labels: dict[str, str] | None = None,
    claim_ref: ClaimRef | None = None,
    csi_driver: str = "",
) -> PersistentVolume:
    affinity = None
    if node_name is not None:
        affinity = (
            NodeSelectorTerm(
                match_expressions=(Requirement("kubernetes.io/hostname", "In", (node_name,)),)
            ),
        )
    return PersistentVolume(
        name=name,
        labels=tuple(sorted((labels or {}).items())),
        storage_class=storage_class,
        capacity=to_units(size),
        access_modes=frozenset(modes),
        node_affinity=affinity,
        claim_ref=claim_ref,
        phase="Bound" if claim_ref is not None else "Available",
        csi_driver=csi_driver,
        volume_handle=name if csi_driver else "",
    )


def storage_class(
    name: str = "local",
    *,
    provisioner: str = "kubernetes.io/no-provisioner",
    mode: str = "WaitForFirstConsumer",
    zones: tuple[str, ...] | None = None,
) -> StorageClass:
    topologies = None
    if zones is not None:
        topologies = (
            NodeSelectorTerm(
                match_expressions=(Requirement("topology.kubernetes.io/zone", "In", zones),)
            ),
        )
    return StorageClass(
        name=name, provisioner=provisioner, binding_mode=mode, allowed_topologies=topologies
    )


def with_claims(base: Pod, *claims: str, ephemeral: tuple[str, ...] = ()) -> Pod:
    """The pod with `persistentVolumeClaim` volumes for `claims` and generic ephemeral
    volumes named `ephemeral` (claims `<pod>-<volume>`)."""
    volumes = [PodVolumeClaim(volume=f"v-{c}", claim=c) for c in claims]
    volumes += [
        PodVolumeClaim(volume=v, claim=f"{base.name}-{v}", ephemeral=True) for v in ephemeral
    ]
    base.volume_claims = tuple(volumes)
    return base


def volume_book(
    *,
    claims: Sequence[PersistentVolumeClaim] = (),
    volumes: Sequence[PersistentVolume] = (),
    classes: Sequence[StorageClass] | None = None,
) -> VolumeBook:
    book = VolumeBook()
    for known in classes if classes is not None else [storage_class()]:
        book.classes[known.name] = known
    for pending in claims:
        book.upsert_claim(pending)
    book.replace_volumes(volumes)
    return book


def volume_cluster(
    nodes: Iterable[Node], pods: Iterable[Pod], groups: Iterable[PodGroup] = (), *, book: VolumeBook
) -> ClusterState:
    return cluster(nodes, pods, groups, volumes=book)


# ================================================================================ raw JSON
def raw_node(
    name: str,
    cpu: Quantity = 4,
    *,
    memory: Quantity = "16Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, Quantity] | None = None,
    uid: str | None = None,
) -> JSON:
    allocatable = {**_manifest_resources(cpu, memory, extra), "pods": str(pods)}
    spec: JSON = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid or f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": spec,
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def raw_pod(
    name: str,
    cpu: Quantity | None = 1,
    *,
    memory: Quantity | None = None,
    extra: Mapping[str, Quantity] | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_name: str | None = None,
    group: str | None = None,
    dialect: Dialect = Dialect.SIGS,
    min_available: int | None = None,
    scheduler: str = SCHEDULER,
    phase: str | None = None,
    uid: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> JSON:
    """A pod manifest. `group` joins it to a group the way `dialect` spells membership
    (Koordinator: by annotations, with `min_available`); `metadata` and `status` are merged
    in; other keyword arguments are spec fields (priorityClassName=..., volumes=[...])."""
    labels = dict(labels or {})
    annotations = dict(annotations or {})
    if group:
        if dialect is Dialect.SIGS:
            labels[SIGS_POD_GROUP_LABEL] = group
        elif dialect is Dialect.X_K8S:
            labels[X_K8S_POD_GROUP_LABEL] = group
        elif dialect is Dialect.KOORDINATOR:
            annotations[KOORDINATOR_GANG_NAME] = group
            if min_available is not None:
                annotations[KOORDINATOR_MIN_AVAILABLE] = str(min_available)
        elif dialect is Dialect.UPSTREAM:
            spec["schedulingGroup"] = {"podGroupName": group}
    body: JSON = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "c", "resources": {"requests": _manifest_resources(cpu, memory, extra)}}
        ],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    meta: JSON = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    meta.update(metadata or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": body,
        "status": {"phase": phase or ("Running" if node_name else "Pending"), **(status or {})},
    }


def raw_pod_group(
    name: str,
    min_member: int = 1,
    *,
    dialect: Dialect = Dialect.SIGS,
    namespace: str = "default",
    priority_class: str | None = None,
    disruption_mode: str | None = None,
    gang_group: Sequence[str] = (),
    uid: str | None = None,
    api_version: str | None = None,
    **spec: Any,
) -> JSON:
    """A PodGroup in the shape of its dialect: the coscheduling CRD (sigs, x-k8s) or the
    scheduling.k8s.io workload API (schedulingPolicy.gang.minCount, union disruptionMode).
    `gang_group` lists "namespace/name" groups for Koordinator's GangGroup annotation."""
    if dialect not in POD_GROUP_API_VERSIONS:
        raise ValueError(f"{dialect} gangs have no PodGroup object; use raw_pod(group=...)")
    body: JSON
    if dialect is Dialect.UPSTREAM:
        body = {"schedulingPolicy": {"gang": {"minCount": min_member}}}
        if disruption_mode is not None:
            body["disruptionMode"] = {disruption_mode.lower(): {}}
    else:
        body = {"minMember": min_member}
        if disruption_mode is not None:
            body["disruptionMode"] = disruption_mode
    if priority_class is not None:
        body["priorityClassName"] = priority_class
    body.update(spec)
    meta: JSON = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if gang_group:
        meta["annotations"] = {KOORDINATOR_GANG_GROUPS: json.dumps(list(gang_group))}
    return {
        "apiVersion": api_version or POD_GROUP_API_VERSIONS[dialect],
        "kind": "PodGroup",
        "metadata": meta,
        "spec": body,
    }


def raw_priority_class(
    name: str,
    value: int,
    *,
    preemption_policy: str = "PreemptLowerPriority",
    global_default: bool = False,
) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "value": value,
        "globalDefault": global_default,
        "preemptionPolicy": preemption_policy,
    }


def raw_pdb(
    name: str,
    match_labels: Mapping[str, str],
    *,
    namespace: str = "default",
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int | None = None,
) -> JSON:
    spec: JSON = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    body: JSON = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": spec,
    }
    if disruptions_allowed is not None:
        body["status"] = {"disruptionsAllowed": disruptions_allowed}
    return body


# ------------------------------------------------------------------------ storage, claims
def raw_storage_class(
    name: str,
    *,
    provisioner: str = "example.com/csi",
    binding_mode: str = "WaitForFirstConsumer",
    allowed_topologies: Sequence[Mapping[str, Sequence[str]]] = (),
) -> JSON:
    """`allowed_topologies`: one {label key: values} mapping per topology term."""
    body: JSON = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "provisioner": provisioner,
        "volumeBindingMode": binding_mode,
    }
    if allowed_topologies:
        body["allowedTopologies"] = [
            {
                "matchLabelExpressions": [
                    {"key": key, "values": list(values)} for key, values in term.items()
                ]
            }
            for term in allowed_topologies
        ]
    return body


def raw_pvc(
    name: str,
    *,
    namespace: str = "default",
    storage: Quantity = "1Gi",
    storage_class: str | None = "standard",
    volume_name: str | None = None,
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    phase: str | None = None,
) -> JSON:
    """A claim; with `volume_name` it is bound (phase Bound unless given)."""
    spec: JSON = {
        "accessModes": list(access_modes),
        "resources": {"requests": {"storage": str(storage)}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name is not None:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": spec,
        "status": {"phase": phase or ("Bound" if volume_name else "Pending")},
    }


def raw_pv(
    name: str,
    *,
    storage: Quantity = "1Gi",
    storage_class: str | None = "standard",
    node_affinity: Mapping[str, Sequence[str]] | None = None,
    claim: tuple[str, str] | None = None,
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    phase: str | None = None,
) -> JSON:
    """A volume; `node_affinity` {label key: values} pins it (a local volume), `claim`
    (namespace, name) pre-binds it."""
    spec: JSON = {
        "capacity": {"storage": str(storage)},
        "accessModes": list(access_modes),
        "persistentVolumeReclaimPolicy": "Delete",
        "csi": {"driver": "example.com/csi", "volumeHandle": name},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if node_affinity:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": key, "operator": "In", "values": list(values)}
                            for key, values in node_affinity.items()
                        ]
                    }
                ]
            }
        }
    if claim is not None:
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim[0],
            "name": claim[1],
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": phase or ("Bound" if claim else "Available")},
    }


def pod_volume(claim: str, *, name: str | None = None) -> JSON:
    """A pod spec `volumes` entry using a PersistentVolumeClaim: raw_pod(volumes=[...])."""
    return {"name": name or claim, "persistentVolumeClaim": {"claimName": claim}}


def raw_resource_claim(
    name: str,
    *,
    namespace: str = "default",
    device_class: str = "gpu.example.com",
    count: int = 1,
    api_version: str = "resource.k8s.io/v1",
) -> JSON:
    """A ResourceClaim asking for `count` devices of one DeviceClass (exact request)."""
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "req-0",
                        "exactly": {
                            "deviceClassName": device_class,
                            "allocationMode": "ExactCount",
                            "count": count,
                        },
                    }
                ]
            }
        },
    }


def pod_claim(claim: str, *, name: str | None = None) -> JSON:
    """A pod spec `resourceClaims` entry: raw_pod(resourceClaims=[pod_claim("c")])."""
    return {"name": name or claim, "resourceClaimName": claim}


# -- Dynamic Resource Allocation ---------------------------------------------------------------
GPU_DRIVER = "gpu.example.com"
GPU_CLASS = "gpu.example.com"
NVLINK = f"{GPU_DRIVER}/nvlinkDomain"


def gpu_class(name: str = GPU_CLASS, *selectors: str) -> DeviceClass:
    return DeviceClass(name=name, selectors=(f'device.driver == "{GPU_DRIVER}"', *selectors))


def gpu_slice(
    node_name: str, gpus: int = 8, *, domains: int = 2, model: str = "A100", memory_gib: int = 40
) -> ResourceSlice:
    """`gpus` GPUs on one node in `domains` NVLink domains of equal size."""
    per_domain = max(1, gpus // max(domains, 1))
    return ResourceSlice(
        name=f"{node_name}-{GPU_DRIVER}",
        driver=GPU_DRIVER,
        pool=node_name,
        generation=1,
        slice_count=1,
        node_name=node_name,
        devices=[
            Device(
                name=f"gpu-{i}",
                attributes={
                    f"{GPU_DRIVER}/model": model,
                    NVLINK: f"{node_name}-nvl{i // per_domain}",
                    f"{GPU_DRIVER}/index": i,
                },
                capacity={f"{GPU_DRIVER}/memory": Fraction(memory_gib * GIB)},
            )
            for i in range(gpus)
        ],
    )


def gpu_claim_spec(
    count: int, *, selectors: tuple[str, ...] = (), same_domain: bool = False
) -> ClaimSpec:
    request = DeviceRequest(
        name="gpus",
        exactly=ExactRequest(name="gpus", class_name=GPU_CLASS, selectors=selectors, count=count),
    )
    constraints = (MatchAttribute(attribute=NVLINK),) if same_domain else ()
    return ClaimSpec(requests=(request,), constraints=constraints)


def resource_claim(name: str, spec: ClaimSpec, *, namespace: str = "default") -> ResourceClaim:
    return ResourceClaim(namespace=namespace, name=name, uid=f"uid-claim-{name}", spec=spec)


def with_resource_claims(p: Pod, *claim_names: str) -> Pod:
    """The pod uses the named ResourceClaims (spec.resourceClaims[].resourceClaimName)."""
    p.claims = tuple(PodClaim(name=f"c{i}", claim_name=n) for i, n in enumerate(claim_names))
    return p
