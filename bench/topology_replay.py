"""Workload (t) replayed in the pure core (not a test): what the preemption choices alone give.

The same trace as `bench.compare` workload t (seed = round number: 20 racks x 16 nodes of
8 CPU, 90 gangs of 2-32 pods of 2 CPU, each constrained to one rack, 30% high priority),
waves of 10 gangs, each scheduled to quiescence before the next arrives (the settled waves
of the live run), every decision carried out at once (victims vanish). No API server, no
timing: the figures differ from the live run only by what the live run's timing changes.

`--upstream` replaces the domain choice by upstream's (k/k#140683: every lower-priority pod
removed, the best-scored rack, the KEP reprieve there) to compare the choices themselves;
`--once` creates every gang at once (what a scheduler far behind the arrivals sees: its
priority queue admits the high gangs first and nothing is preempted).

    .venv/bin/python -m bench.topology_replay [--seeds 1,2,3] [--upstream] [--once]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from collections.abc import Sequence

from gangsched.core.cluster import ClusterState
from gangsched.core.decisions import Bind, Evict, Nominate
from gangsched.core.model import Dialect, GroupRef, Node, Pod, PodGroup
from gangsched.core.preemption import KEP, MINCOST, build_preemptor
from gangsched.core.preemption import domains as topology_preemption
from gangsched.core.scheduler import Scheduler, SchedulerConfig
from gangsched.core.topology.domains import Domain
from gangsched.core.topology.request import TopologyRequest

RACK = "bench.example.com/rack"
GIB = 1024**3
RACKS, RACK_NODES, GANGS, WAVE = 20, 16, 90, 10


def trace(seed: int, count: int = GANGS) -> list[tuple[str, int, bool]]:
    """(name, size, high) per gang, drawn as bench/compare/topology_run.build_gangs does."""
    rng = random.Random(seed)
    gangs = []
    for g in range(count):
        size = rng.randint(2, 32)
        gangs.append((f"tgang-{g:03d}", size, rng.random() < 0.3))
    return gangs


def upstream_domains_only() -> None:
    """Search only the domain upstream's TAS preemption picks (see module doc)."""

    def order(
        *,
        gang: object,
        domains: Sequence[Domain],
        base: object,
        snap: object,
        cls: object,
        key: str,
        bounds: object,
    ) -> list[Domain]:
        placer = base.placer.group  # type: ignore[attr-defined]
        chosen = topology_preemption._upstream_choice(gang, cls, base, snap, domains, placer=placer)  # type: ignore[arg-type]
        return [chosen] if chosen is not None else []

    topology_preemption._order = order


def replay(seed: int, *, strategy: str, once: bool, gangs_count: int = GANGS) -> dict[str, object]:
    nodes = [
        Node(
            name=f"n{i:03d}",
            labels={RACK: f"rack-{i // RACK_NODES:02d}", "kubernetes.io/hostname": f"n{i:03d}"},
            allocatable={"cpu": 8000, "memory": 64 * GIB, "pods": 110},
        )
        for i in range(RACKS * RACK_NODES)
    ]
    gangs = trace(seed, gangs_count)
    state = ClusterState.build(scheduler_name="gangsched", nodes=nodes, pods=[])
    sched = Scheduler(state, SchedulerConfig(), preemptor=build_preemptor(strategy=strategy))
    victims: set[str] = set()
    now = 0.0
    cpu = time.process_time()
    waves = [gangs] if once else [gangs[i : i + WAVE] for i in range(0, len(gangs), WAVE)]
    for wave in waves:
        for name, size, wanted_high in wave:
            ref = GroupRef(Dialect.SIGS, "bench", name)
            priority = 1000 if wanted_high else 10
            state.upsert_group(
                PodGroup(
                    ref=ref,
                    min_member=size,
                    priority=priority,
                    priority_class_name="bench-high" if wanted_high else "bench-low",
                    topology=TopologyRequest(required=RACK),
                    created=now,
                )
            )
            for m in range(size):
                state.upsert_pod(
                    Pod(
                        namespace="bench",
                        name=f"{name}-{m:02d}",
                        uid=f"{name}-{m}",
                        scheduler_name="gangsched",
                        requests={"cpu": 2000, "memory": GIB},
                        priority=priority,
                        # A GroupRef of its own, as every pod read from the API server has.
                        group=GroupRef(Dialect.SIGS, "bench", name),
                        created=now + m * 1e-3,
                    )
                )
        now += 3.0
        sched.queue.cluster_changed(now)
        sched.enqueue_pending(now)
        while (report := sched.step(now)) is not None:
            changed = False
            for decision in report.decisions:
                if isinstance(decision, Evict):
                    state.delete_pod(decision.pod)
                    victims.add(decision.pod)
                    changed = True
                elif isinstance(decision, Bind):
                    changed = True
                elif isinstance(decision, Nominate):
                    pod = state.pods.get(decision.pod)
                    if pod is not None:
                        state.nominate(pod, decision.node)
            if changed:  # every backoff has expired by the time the cluster changed
                now += sched.config.max_backoff + 1.0
                sched.queue.cluster_changed(now)
                sched.enqueue_pending(now)
    admitted = high = broken = 0
    used: dict[str, int] = defaultdict(int)
    for name, size, is_high in gangs:
        placed = [state.pods.get(f"bench/{name}-{m:02d}") for m in range(size)]
        nodes_of = [p.node_name for p in placed if p is not None and p.node_name]
        if len(nodes_of) == size:
            admitted += 1
            high += is_high
        elif nodes_of:
            broken += 1
        for node_name in nodes_of:
            used[node_name] += 2
    room: dict[str, int] = defaultdict(int)
    for node in nodes:
        room[node.labels[RACK]] += (8 - used.get(node.name, 0)) // 2
    return {
        "seed": seed,
        "gangs_admitted": admitted,
        "high_gangs_admitted": high,
        "gangs_broken": broken,
        "victims": len(victims),
        "racks_fully_free": sum(1 for r in room.values() if r == RACK_NODES * 4),
        "largest_placeable_gang": max(room.values()),
        "cpu_s": round(time.process_time() - cpu, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--strategy", choices=[MINCOST, KEP], default=MINCOST)
    parser.add_argument("--upstream", action="store_true", help="upstream's domain choice")
    parser.add_argument("--once", action="store_true", help="every gang created at once")
    parser.add_argument(
        "--gangs", type=int, default=GANGS, help="gangs in the trace (t_gangs; 50: below capacity)"
    )
    args = parser.parse_args()
    if args.upstream:
        upstream_domains_only()
        args.strategy = KEP
    for seed in (int(s) for s in args.seeds.split(",")):
        result = replay(seed, strategy=args.strategy, once=args.once, gangs_count=args.gangs)
        print(json.dumps(result))


if __name__ == "__main__":
    main()
