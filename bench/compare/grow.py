"""Grow a kept (d) cluster's bound pods (issue 17: memory at 150,000 pods).

Creating the pods of a (d) cluster from nothing takes most of an hour at these sizes; a
cluster kept at 50,000 (`bench.compare --keep`) is grown instead: the pods `bound-N` that are
missing up to the new count are created (spread over the nodes as `workloads.bound_pods`
spreads them) and kwok is waited for, so that `--attach DIR --set d_bound=<new count>` then
runs on it.

    python -m bench.compare.grow --attach DIR --set d_nodes=5000 --set d_bound=50000 --to 150000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import replace
from pathlib import Path

from bench.compare.cluster import loadgen_binary
from bench.compare.measure import wait_running
from bench.compare.runs import attach_d_cluster
from bench.compare.workloads import SIZES, bound_pods, create_request


async def grow(directory: Path, sizes_from: dict[str, int], to: int) -> None:
    sizes = replace(SIZES["default"], **sizes_from)
    if to <= sizes.d_bound:
        raise SystemExit(f"--to {to}: the cluster already holds {sizes.d_bound} bound pods")
    env, kube = await attach_d_cluster(directory, loadgen_binary(), sizes)
    try:
        wanted = bound_pods(replace(sizes, d_bound=to))[sizes.d_bound :]
        started = time.monotonic()
        # Batches, so that kwok's status writes keep up and a failure loses one batch only.
        for first in range(0, len(wanted), 10_000):
            batch = wanted[first : first + 10_000]
            await env.post_all([create_request(p) for p in batch])
            print(
                f"[grow] {sizes.d_bound + first + len(batch):,} bound pods created "
                f"({time.monotonic() - started:.0f} s)",
                flush=True,
            )
        await wait_running(kube, timeout=3600)
        print(f"[grow] all Running after {time.monotonic() - started:.0f} s", flush=True)
    finally:
        await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attach", type=Path, required=True, help="a cluster kept by --keep")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--to", type=int, required=True, help="bound pods wanted in all")
    args = parser.parse_args()
    fields = dict(item.split("=", 1) for item in args.set)
    asyncio.run(grow(args.attach, {k: int(v) for k, v in fields.items()}, args.to))


if __name__ == "__main__":
    main()
