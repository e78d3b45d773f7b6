"""The `gangsched` command.

Errors in what the user gave us (manifests, config, arguments) are one line per problem on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gangsched import __version__
from gangsched.edge import slim_client

if TYPE_CHECKING:
    from gangsched.config import Config

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: numpy's OpenBLAS starts a thread per core when numpy is imported. gangsched does no linear
#: algebra (its arrays are compared and summed, never multiplied), and the threads' start cost
#: every start 0.09 CPU s of numpy's 0.25 on 2 cores (`import numpy`, 4 runs each, issue 30):
#: one thread unless the environment says otherwise.
BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gangsched",
        description="Gang scheduler for Kubernetes: PodGroups run whole or not at all.",
    )
    parser.add_argument("--version", action="version", version=f"gangsched {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sim = commands.add_parser(
        "simulate",
        help="run the scheduler offline on manifests and print what it would do",
        description=(
            "Schedule the pending pods in FILE... (Nodes, Pods, PodGroups of any dialect, "
            "PriorityClasses, PodDisruptionBudgets) with the real queue, cycle and "
            "preemption, until nothing changes. Preemption victims are removed at once."
        ),
    )
    sim.add_argument(
        "files", nargs="+", metavar="FILE", help="YAML or JSON manifests ('-' = stdin)"
    )
    sim.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
    sim.add_argument("--config", metavar="FILE", help="scheduler configuration (YAML)")
    sim.add_argument("--scheduler-name", help="schedulerName whose pods are ours")
    sim.add_argument(
        "--preemption",
        choices=["mincost", "kep", "off"],
        help="preemption strategy (default: from config, else mincost)",
    )
    run = commands.add_parser(
        "run",
        help="schedule a live cluster",
        description=(
            "Watch Pods, Nodes, PodGroups (every dialect the cluster serves), PriorityClasses "
            "and PodDisruptionBudgets; schedule pods whose schedulerName is ours, gang by gang; "
            "write bindings, status, nominations, evictions and events back."
        ),
    )
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, else $KUBECONFIG)")
    run.add_argument("--config", metavar="FILE", help="scheduler configuration (YAML)")
    run.add_argument("--identity", help="this replica's name (default: $POD_NAME or host-pid)")
    from gangsched import explain

    explain.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault(BLAS_THREADS, "1")  # before anything imports numpy
    args = _parser().parse_args(argv)
    collecting = gc.isenabled()
    if args.command == "run":
        gc.disable()  # until the caches have synced: `_run` says why
    try:
        if args.command in ("run", "explain"):
            # The commands that reach a cluster load kubernetes-asyncio without its generated
            # API and model modules, before anything imports it (kopf does): the image does
            # not ship them (hack/image-prune.txt).
            slim_client.install()
            slim_client.leave_out_dev_only()
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "run":
            return _run(args)
        if args.command == "explain":
            from gangsched import explain

            return explain.run(args)
        return EXIT_USAGE  # pragma: no cover - argparse rejects unknown commands
    finally:
        if collecting:
            gc.enable()


def _simulate(args: argparse.Namespace) -> int:
    from gangsched.config import ConfigError, load_config
    from gangsched.simulate.loader import ManifestError, load_cluster
    from gangsched.simulate.output import render
    from gangsched.simulate.runner import SimulationError, VirtualClock, simulate

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    scheduler_name = args.scheduler_name or config.schedulerName
    try:
        cluster = load_cluster(args.files, scheduler_name=scheduler_name)
    except ManifestError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    clock = VirtualClock()
    preemptor = config.preemptor(
        strategy=args.preemption, scheduler_name=scheduler_name, clock=clock
    )
    scheduler_config = config.scheduler_config()
    scheduler_config.scheduler_name = scheduler_name
    try:
        result = simulate(cluster, scheduler_config, preemptor=preemptor, clock=clock)
    except SimulationError as exc:
        print(f"gangsched simulate: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    sys.stdout.write(render(result, args.output))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    """Runs without cyclic garbage collection (`main`) until the caches have synced (the
    operator turns it on again then, gangsched.edge.app at the latest once the first binds
    have settled): the start-up imports the client, the core, pydantic and numpy and then
    models every pod and node, and the collections that all these allocations set off find
    nothing to free. 191 of them took 0.065-0.09 s of the imports' 0.85-1.15 s of CPU
    (gc.callbacks, load 5), 0.02 s of it before the pod and node lists could go out, all of
    it before the first bind (issue 30). What start-up allocates lives as long as the
    process.

    The event loop is uvloop's (libuv, its TLS in C), not asyncio's own: every bind, watch
    line and list page passes through the loop's transports, and asyncio's pure-Python TLS
    layer and selector loop were a fifth of gangsched's CPU while it bound a precreated (b).
    Side by side, 3 rounds alternating, uvloop bound 4-7% more pods a second with less CPU
    (issue 30, bench/README.md)."""
    import uvloop

    try:
        return uvloop.run(_run_async(args))
    except KeyboardInterrupt:
        return EXIT_OK


async def _run_async(args: argparse.Namespace) -> int:
    """The pod and node lists go out first; the core and the config are loaded in a worker
    thread meanwhile (gangsched.edge.early_lists says why), kopf once the operator's caches
    have synced (gangsched.edge.app)."""
    import asyncio

    from gangsched.edge.early_lists import EarlyLists
    from gangsched.edge.reqwest_transport import setting as transport_setting

    try:
        transport_setting()
    except ValueError as exc:
        print(f"gangsched run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    early = await EarlyLists.start(args.kubeconfig)
    try:
        config, problem = await asyncio.to_thread(_load_for_run, args.config)
    except BaseException:
        await early.close()
        raise
    if config is None:
        await early.close()
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    from gangsched.edge import app, logs

    logs.configure(config.logFormat)
    logs.quiet_transport_errors(asyncio.get_running_loop())
    return await app.run(
        config=config, kubeconfig=args.kubeconfig, identity=args.identity, early=early
    )


def _load_for_run(path: str | None) -> tuple[Config | None, str]:
    """The config, or why not (in a worker thread: with it, the import of the core, which
    takes longer than the config itself)."""
    from gangsched.config import ConfigError, load_config
    from gangsched.edge import app, logs  # noqa: F401  (imported here, off the event loop)

    try:
        return load_config(path), ""
    except ConfigError as exc:
        return None, str(exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
