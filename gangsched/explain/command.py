"""`gangsched explain NAMESPACE/NAME`: the command (its arguments: explain/arguments.py).

Exit status: 0 explained; 1 not found, no access or the API server unreachable; 2 bad input
(target, files, configuration, kubeconfig). Every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from typing import Any

from gangsched.config import Config, ConfigError, load_config
from gangsched.core.cluster import ClusterState
from gangsched.edge import logs
from gangsched.explain.analysis import NotFound, explain
from gangsched.explain.arguments import add_parser
from gangsched.explain.render import render
from gangsched.explain.report import Explanation
from gangsched.explain.sources import (
    SourceError,
    connect,
    from_cluster,
    from_manifests,
    recent_events,
    status_of,
)
from gangsched.simulate.loader import ManifestError

__all__ = ["add_parser", "run"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
PROG = "gangsched explain"


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def _target(args: argparse.Namespace) -> tuple[str, str] | None:
    target: str = args.target
    if target.count("/") > 1:
        return None
    namespace, _, name = target.rpartition("/")
    if namespace and args.namespace and namespace != args.namespace:
        return None
    namespace = namespace or args.namespace or "default"
    if not name or not namespace:
        return None
    return namespace, name


def _strategy(config: Config, choice: str | None) -> str:
    return choice or (config.preemption.strategy if config.preemption.enabled else "off")


def run(args: argparse.Namespace) -> int:
    target = _target(args)
    if target is None:
        return _fail(
            f"bad target {args.target!r}: expected NAMESPACE/NAME or NAME (with -n NAMESPACE)",
            EXIT_USAGE,
        )
    namespace, name = target
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            print(f"{PROG}: {line}", file=sys.stderr)
        return EXIT_USAGE
    scheduler_name = args.scheduler_name or config.schedulerName
    strategy = _strategy(config, args.preemption)
    preemptor = config.preemptor(strategy=strategy, scheduler_name=scheduler_name, clock=time.time)
    if preemptor is None:
        strategy = ""
    scheduler_config = config.scheduler_config()
    scheduler_config.scheduler_name = scheduler_name

    def dry_run(cluster: ClusterState) -> Explanation:
        return explain(
            cluster,
            namespace,
            name,
            kind=args.kind,
            config=scheduler_config,
            preemptor=preemptor,
            strategy=strategy,
        )

    if args.file:
        try:
            cluster = from_manifests(args.file, scheduler_name=scheduler_name)
        except ManifestError as exc:
            for problem in exc.problems:
                print(f"{PROG}: {problem}", file=sys.stderr)
            return EXIT_USAGE
        try:
            explanation = dry_run(cluster)
        except NotFound as exc:
            return _fail(f"{exc} in {', '.join(args.file)}", EXIT_FAILURE)
    else:
        try:
            explanation = asyncio.run(_from_cluster(args, dry_run, scheduler_name))
        except NotFound as exc:
            return _fail(f"{exc} in the cluster", EXIT_FAILURE)
        except _Failed as exc:
            return _fail(str(exc), exc.code)
    sys.stdout.write(render(explanation, args.output))
    return EXIT_OK


class _Failed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


async def _from_cluster(args: argparse.Namespace, dry_run: Any, scheduler_name: str) -> Explanation:
    # The operator's modules log what a long-running scheduler should (e.g. a missing RBAC
    # permission); this command reports its one error itself, so they stay quiet.
    logs.configure("console", level=logging.CRITICAL)
    try:
        kube = await connect(args.kubeconfig)
    except SourceError as exc:
        raise _Failed(str(exc), exc.code) from None
    try:
        try:
            read = await from_cluster(kube, scheduler_name=scheduler_name)
        except SourceError as exc:
            raise _Failed(str(exc), exc.code) from None
        explanation: Explanation = dry_run(read.cluster)
        explanation.source = "cluster"
        ref = explanation.gang
        explanation.status = status_of(read, ref)
        for key, problem in sorted(read.problems.items()):
            kind, _, obj = key.partition("/")
            if obj == ref.key or obj in {m.pod for m in explanation.members}:
                explanation.notes.append(f"gangsched cannot read {kind} {obj}: {problem}")
        lone = ref.dialect.value == "pod"
        groups = {g.ref.name for g in explanation.groups if g.ref.namespace == ref.namespace}
        pods = {m.pod.split("/", 1)[1] for m in explanation.members}
        try:
            explanation.events = await recent_events(
                kube,
                ref.namespace,
                groups=set() if lone else groups,
                pods=pods | ({ref.name} if lone else set()),
            )
        except SourceError as exc:
            explanation.notes.append(f"events not shown: {exc}")
        return explanation
    finally:
        await kube.close()
