"""The four workloads (sizes, gangs, pods) in each scheduler's dialect, and the objects
that make them: what is created is the same for every scheduler but for the dialect."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

NAMESPACE = "bench"
KS_NAME = "kube-scheduler-baseline"
#: scheduler-plugins' kube-scheduler with Coscheduling (the gang scheduler Kubeflow documents).
CO_NAME = "scheduler-plugins-coscheduling"
SCHEDULERS = ("gangsched", "kube-scheduler", "gangsched-upstream", "coscheduling")
#: Schedulers that are a kube-scheduler (their queue is read from scheduler_pending_pods).
KUBE_SCHEDULERS = ("kube-scheduler", "coscheduling")
#: (d)'s floor, run before the schedulers of each round: a bare client listing the objects.
LIST_FLOOR = "list-floor"
WORKLOADS = ("a", "b", "c", "d", "t", "e", "x")


def titles(sizes: dict[str, Any]) -> dict[str, str]:
    """Row labels from the sizes actually run."""
    z = Sizes(**sizes)
    return {
        "a": f"(a) {z.a_gangs:,} gangs of {z.a_size}, {z.a_nodes:,} nodes",
        "b": f"(b) {z.b_gangs:,} gangs of {z.b_min}-{z.b_max}, {z.b_nodes:,} nodes",
        "c": f"(c) preemption: {z.c_gangs} gangs of {z.c_size} over {z.c_low:,} low pods",
        "d": f"(d) restart: {z.d_bound:,} bound pods, {z.d_nodes:,} nodes",
        "t": (
            f"(t) topology: {z.t_gangs} rack-constrained gangs of {z.t_min}-{z.t_max}, "
            f"{z.t_racks} racks x {z.t_rack_nodes} nodes"
        ),
        "e": f"(e) DRA: {z.e_gangs} gang(s) of {z.e_size}, {z.e_gpus} GPUs per pod, "
        f"{z.e_nodes:,} nodes x {z.e_gpus} GPUs",
        "x": f"(x) deadlock: {z.x_gangs} gangs of {z.x_size} x 1 CPU at once, "
        f"{z.x_nodes} nodes x 4 CPU (room for {deadlock_capacity(z)} gangs)",
        "ceiling": f"ceiling: bare binder, {z.ceiling_pods:,} pods",
    }


@dataclass(frozen=True)
class Sizes:
    a_nodes: int = 1000
    a_gangs: int = 1000
    a_size: int = 3
    b_nodes: int = 1000
    b_gangs: int = 100
    b_min: int = 8
    b_max: int = 24
    c_nodes: int = 100
    c_low: int = 1000
    c_all_share: float = 0.3
    c_gangs: int = 10
    c_size: int = 10
    d_nodes: int = 2000
    d_bound: int = 20000
    d_gangs: int = 100
    d_size: int = 4
    e_nodes: int = 500
    e_gangs: int = 1
    e_size: int = 32
    e_gpus: int = 8
    ceiling_pods: int = 3000
    t_racks: int = 20
    t_rack_nodes: int = 16
    t_gangs: int = 90
    t_min: int = 2
    t_max: int = 32
    t_high_share: float = 0.3
    t_wave: int = 10
    t_wave_s: float = 3.0
    #: A wave is created once the previous one has settled: no bind or deletion for this
    #: long and no preemption under way; 0: every t_wave_s seconds (bench/README.md, (t)).
    t_settle_s: float = 10.0
    #: 1: each wave's pods are created first and the wave starts when its PodGroups are
    #: (no gang can start without its PodGroup, in either scheduler), so the wave's time
    #: leaves out creating ~200 pods (bench/README.md, (t)).
    t_pods_first: int = 0
    #: Waves a gang runs before it finishes (0: never): before wave k is created, every
    #: gang of wave k - t_lifetime with all its members running is deleted, as a finished
    #: job, so the cluster drains as well as fills (racks left whole become measurable).
    t_lifetime: int = 0
    t_quiet_s: float = 45.0
    x_nodes: int = 10
    x_gangs: int = 20
    x_size: int = 8
    #: How long (x) watches: several of Coscheduling's 10 s permit waits.
    x_window_s: float = 60.0


def deadlock_capacity(sizes: Sizes) -> int:
    """(x): how many of its gangs the nodes hold at once (4 one-CPU pods per node)."""
    return sizes.x_nodes * 4 // sizes.x_size


SIZES = {
    "default": Sizes(),
    "small": Sizes(
        a_nodes=100,
        a_gangs=100,
        b_nodes=100,
        b_gangs=10,
        c_nodes=20,
        c_low=200,
        c_gangs=2,
        d_nodes=200,
        d_bound=2000,
        d_gangs=10,
        e_nodes=50,
        e_size=8,
        ceiling_pods=300,
    ),
}


# ------------------------------------------------------------------------------- objects
def pod_group(
    scheduler: str,
    name: str,
    min_count: int,
    *,
    priority_class: str = "",
    all_mode: bool = False,
    topology_key: str = "",
) -> dict[str, Any]:
    if scheduler == "gangsched":
        spec: dict[str, Any] = {"minMember": min_count}
        if priority_class:
            spec["priorityClassName"] = priority_class
        if all_mode:
            spec["disruptionMode"] = "All"
        if topology_key:
            spec["topology"] = {"required": topology_key}
        api_version = "scheduling.sigs.k8s.io/v1alpha1"
    elif scheduler == "coscheduling":
        # scheduler-plugins' PodGroup: a minimum and nothing else here (no priority or
        # disruption mode of its own; its pods' priority decides, as in kube-scheduler).
        spec = {"minMember": min_count}
        api_version = "scheduling.x-k8s.io/v1alpha1"
    else:
        spec = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
        if priority_class:
            # kube-scheduler refuses a gang unless every pod's priority equals the group's.
            spec["priorityClassName"] = priority_class
        if all_mode:
            spec["disruptionMode"] = {"all": {}}
        if topology_key:
            spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
        api_version = "scheduling.k8s.io/v1beta1"
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"bench": "gang"}},
        "spec": spec,
    }


def pod(
    scheduler: str,
    name: str,
    *,
    group: str = "",
    cpu: str = "1",
    memory: str = "1Gi",
    role: str = "gang",
    node: str = "",
    priority_class: str = "",
) -> dict[str, Any]:
    labels = {"bench": role}
    spec: dict[str, Any] = {
        "schedulerName": {"kube-scheduler": KS_NAME, "coscheduling": CO_NAME}.get(
            scheduler, "gangsched"
        ),
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "pause",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if group:
        if scheduler == "gangsched":
            labels["pod-group.scheduling.sigs.k8s.io"] = group
        elif scheduler == "coscheduling":
            labels["scheduling.x-k8s.io/pod-group"] = group
        else:
            spec["schedulingGroup"] = {"podGroupName": group}
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }


_PLURALS = {
    "Pod": "pods",
    "PodGroup": "podgroups",
    "ResourceClaim": "resourceclaims",
    "ResourceSlice": "resourceslices",
    "DeviceClass": "deviceclasses",
}
_CLUSTER_SCOPED = ("ResourceSlice", "DeviceClass")


def create_request(obj: dict[str, Any]) -> dict[str, Any]:
    api_version = obj["apiVersion"]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    kind = obj["kind"]
    scope = "" if kind in _CLUSTER_SCOPED else f"/namespaces/{NAMESPACE}"
    return {
        "key": f"{kind}/{obj['metadata']['name']}",
        "path": f"{base}{scope}/{_PLURALS[kind]}",
        "body": obj,
    }


# ------------------------------------------------------------------------------ (e) DRA
DRA_DRIVER = "gpu.example.com"
DRA_CLASS = "bench-gpu"


def dra_setup(sizes: Sizes) -> list[dict[str, Any]]:
    """A DeviceClass, one ResourceSlice per node (e_gpus 80 GiB GPUs in one NVLink domain, as
    an HGX node), and one ResourceClaim per gang member: e_gpus GPUs with at least 64 GiB in
    one NVLink domain. The claims are named by the pods (resourceClaimName), so neither run
    depends on kube-controller-manager's resourceclaim controller."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRA_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]},
        }
    ]
    for n in range(sizes.e_nodes):
        node = bench_node(n)
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpus"},
                "spec": {
                    "driver": DRA_DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{d}",
                            "attributes": {
                                "model": {"string": "H100"},
                                "nvlinkDomain": {"string": f"{node}-nvl0"},
                                "index": {"int": d},
                            },
                            "capacity": {"memory": {"value": "80Gi"}},
                        }
                        for d in range(sizes.e_gpus)
                    ],
                },
            }
        )
    selector = f'device.capacity["{DRA_DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'
    for g in range(sizes.e_gangs):
        for m in range(sizes.e_size):
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": f"{dra_gang(g)}-{m}-gpus", "namespace": NAMESPACE},
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpus",
                                    "exactly": {
                                        "deviceClassName": DRA_CLASS,
                                        "count": sizes.e_gpus,
                                        "selectors": [{"cel": {"expression": selector}}],
                                    },
                                }
                            ],
                            "constraints": [{"matchAttribute": f"{DRA_DRIVER}/nvlinkDomain"}],
                        }
                    },
                }
            )
    return objects


def dra_gang(g: int) -> str:
    return f"gpu-gang-{g:03d}"


def with_claim(p: dict[str, Any], claim: str) -> dict[str, Any]:
    p["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return p


@dataclass
class Workload:
    """What one run creates: objects bound before the scheduler runs (setup), the gangs it
    must schedule (each a PodGroup plus members) and what to wait for."""

    setup: list[dict[str, Any]] = field(default_factory=list)
    gangs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    node_cpu: str = "32"
    node_memory: str = "256Gi"
    nodes: int = 0
    low_pods: int = 0


def build_workload(name: str, scheduler: str, sizes: Sizes, seed: int) -> Workload:
    rng = random.Random(seed)  # the same gangs for every scheduler in a round
    w = Workload()
    if name == "a":
        w.nodes = sizes.a_nodes
        shapes = [sizes.a_size] * sizes.a_gangs
    elif name == "b":
        w.nodes = sizes.b_nodes
        mean = (sizes.b_min + sizes.b_max) // 2
        shapes = []
        for _ in range(sizes.b_gangs // 2):  # symmetric pairs: the mean is exactly `mean`
            k = rng.randint(sizes.b_min, sizes.b_max)
            shapes += [k, 2 * mean - k]
        shapes += [mean] * (sizes.b_gangs - len(shapes))
    elif name == "c":
        w.nodes, w.node_cpu, w.node_memory = sizes.c_nodes, "4", "16Gi"
        per_node = sizes.c_low // sizes.c_nodes
        all_pods = int(sizes.c_low * sizes.c_all_share) // 10 * 10
        # All-mode groups of 10, each spread over 10 nodes; the rest are single pods.
        for g in range(all_pods // 10):
            group = f"low-{g:03d}"
            w.setup.append(
                pod_group(scheduler, group, 10, priority_class="bench-low", all_mode=True)
            )
            for m in range(10):
                node = (g * 10 + m) % sizes.c_nodes
                w.setup.append(
                    pod(
                        scheduler,
                        f"{group}-{m}",
                        group=group,
                        cpu="400m",
                        memory="128Mi",
                        role="low",
                        node=bench_node(node),
                        priority_class="bench-low",
                    )
                )
        counts = Counter(p["spec"]["nodeName"] for p in w.setup if p["kind"] == "Pod")
        single = 0
        for n in range(sizes.c_nodes):
            for _ in range(per_node - counts[bench_node(n)]):
                w.setup.append(
                    pod(
                        scheduler,
                        f"low-single-{single:04d}",
                        cpu="400m",
                        memory="128Mi",
                        role="low",
                        node=bench_node(n),
                        priority_class="bench-low",
                    )
                )
                single += 1
        w.low_pods = sum(1 for o in w.setup if o["kind"] == "Pod")
        for g in range(sizes.c_gangs):
            group = f"high-{g:03d}"
            w.groups.append(pod_group(scheduler, group, sizes.c_size, priority_class="bench-high"))
            w.gangs[group] = [
                pod(
                    scheduler,
                    f"{group}-{m}",
                    group=group,
                    cpu="3970m",
                    memory="1Gi",
                    priority_class="bench-high",
                )
                for m in range(sizes.c_size)
            ]
        return w
    elif name == "d":
        w.nodes = sizes.d_nodes
        shapes = [sizes.d_size] * sizes.d_gangs
        # (the bound pods are created once per cluster: see bound_pods)
    elif name == "x":
        # Many gangs competing for too little room, all at once: a scheduler that reserves
        # members one by one (Coscheduling's Permit wait) can hold part of many gangs.
        w.nodes, w.node_cpu, w.node_memory = sizes.x_nodes, "4", "16Gi"
        shapes = [sizes.x_size] * sizes.x_gangs
    elif name == "e":
        w.nodes = sizes.e_nodes
        w.setup = dra_setup(sizes)
        for g in range(sizes.e_gangs):
            group = dra_gang(g)
            w.groups.append(pod_group(scheduler, group, sizes.e_size))
            w.gangs[group] = [
                with_claim(pod(scheduler, f"{group}-{m}", group=group), f"{group}-{m}-gpus")
                for m in range(sizes.e_size)
            ]
        return w
    else:
        raise ValueError(name)
    for g, size in enumerate(shapes):
        group = f"gang-{g:04d}"
        w.groups.append(pod_group(scheduler, group, size))
        w.gangs[group] = [pod(scheduler, f"{group}-{m}", group=group) for m in range(size)]
    return w


def bound_pods(sizes: Sizes) -> list[dict[str, Any]]:
    """(d): pods already running, spread evenly, owned by no scheduler we run."""
    out = []
    for i in range(sizes.d_bound):
        p = pod(
            "none",
            f"bound-{i:05d}",
            cpu="100m",
            memory="128Mi",
            role="bound",
            node=bench_node(i % sizes.d_nodes),
        )
        p["spec"]["schedulerName"] = "default-scheduler"
        out.append(p)
    return out


def bench_node(i: int) -> str:
    return f"bench-node-{i:05d}"  # harness.create_nodes' names
