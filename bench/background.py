"""The cluster the core benchmarks schedule their gangs into: nodes of one size and the pods
already running on them, built the same way by bench/core_bench.py, bench/volumes_bench.py
and bench/dra_bench.py so that their figures stand on the same ground.

By default a node has 32 CPUs, 128 GiB and room for 110 pods, a hostname label and a zone
label (4 zones, round robin); 10 running pods per node of 250m to 2 CPUs (4 MiB of memory per
millicore), placed by another scheduler, labelled with one of 50 services.
"""

from __future__ import annotations

from gangsched.core.model import Node, Pod

GIB = 1024**3
HOSTNAME = "kubernetes.io/hostname"
#: CPU (millicores) of the running pods, in turn.
RUNNING_CPU = (250, 500, 1000, 2000)


def nodes(
    count: int,
    *,
    cpu: int = 32_000,
    memory: int = 128 * GIB,
    pods: int = 110,
    zone_label: str | None = "zone",
    zones: int = 4,
) -> list[Node]:
    """`count` identical nodes named node-00000...; `zone_label` None: no zones."""
    out = []
    for i in range(count):
        name = f"node-{i:05d}"
        labels = {HOSTNAME: name}
        if zone_label is not None:
            labels[zone_label] = f"zone-{i % zones}"
        out.append(
            Node(
                name=name,
                labels=labels,
                allocatable={"cpu": cpu, "memory": memory, "pods": pods},
            )
        )
    return out


def running_pods(node_count: int, *, per_node: int = 10) -> list[Pod]:
    """`per_node` running pods on each of the first `node_count` nodes (of `nodes`)."""
    out = []
    for i in range(node_count * per_node):
        cpu = RUNNING_CPU[i % len(RUNNING_CPU)]
        out.append(
            Pod(
                namespace="running",
                name=f"run-{i}",
                uid=f"r{i}",
                scheduler_name="default-scheduler",
                node_name=f"node-{i % node_count:05d}",
                phase="Running",
                requests={"cpu": cpu, "memory": cpu * 4 * 1024 * 1024},
                labels={"app": f"svc-{i % 50}"},
            )
        )
    return out
