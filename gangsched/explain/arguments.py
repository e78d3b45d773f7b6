"""The arguments of `gangsched explain`, apart from the command: every `gangsched` command
builds the whole parser, and `gangsched run` should not import the explain machinery (the
core, the config) before its first request goes out (gangsched.edge.early_lists)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `explain` on the `gangsched` subcommands (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "explain",
        help="why a PodGroup or pod is not running: the scheduler's answer, in a dry run",
        description=(
            "Explain a PodGroup (any dialect) or a pod: members present against minMember, "
            "for each member that fits nowhere the per-reason node counts, whether preemption "
            "would help and which victims it would choose, nominations and victims still "
            "terminating, and (against a cluster) the group's status and recent events. "
            "Runs the real scheduler core on a private copy of the state: nothing is written."
        ),
    )
    parser.add_argument("target", metavar="[NAMESPACE/]NAME", help="the PodGroup or pod")
    parser.add_argument(
        "-n", "--namespace", help="namespace when TARGET has none (default: default)"
    )
    parser.add_argument(
        "--kind",
        choices=["podgroup", "pod"],
        help="look only for a PodGroup or only for a pod (default: PodGroup first, then pod)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "-f",
        "--file",
        action="append",
        metavar="FILE",
        help="explain offline on manifests (repeatable) instead of a cluster",
    )
    source.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument("--config", metavar="FILE", help="scheduler configuration (YAML)")
    parser.add_argument("--scheduler-name", help="schedulerName whose pods are gangsched's")
    parser.add_argument(
        "--preemption",
        choices=["mincost", "kep", "off"],
        help="preemption strategy (default: from config, else mincost)",
    )
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    return parser
