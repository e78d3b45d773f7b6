"""`gangsched explain`: why a PodGroup or pod is not running, from the scheduler's own core
run in a dry run on a private copy of the cluster (live, or offline on manifests)."""

from __future__ import annotations

from gangsched.explain.analysis import NotFound, explain, resolve
from gangsched.explain.command import add_parser, run
from gangsched.explain.render import render
from gangsched.explain.report import NOTHING_PENDING, Explanation

__all__ = [
    "NOTHING_PENDING",
    "Explanation",
    "NotFound",
    "add_parser",
    "explain",
    "render",
    "resolve",
    "run",
]
