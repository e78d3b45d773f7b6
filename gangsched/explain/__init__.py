"""`gangsched explain`: why a PodGroup or pod is not running, from the scheduler's own core
run in a dry run on a private copy of the cluster (live, or offline on manifests).

The names below are loaded when first used: `gangsched run` builds the command line parser,
which needs only `add_parser`, and must not pay for importing the core first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gangsched.explain.arguments import add_parser

if TYPE_CHECKING:
    from gangsched.explain.analysis import NotFound, explain, resolve
    from gangsched.explain.command import run
    from gangsched.explain.render import render
    from gangsched.explain.report import NOTHING_PENDING, Explanation

_HOMES = {
    "NotFound": "analysis",
    "explain": "analysis",
    "resolve": "analysis",
    "run": "command",
    "render": "render",
    "NOTHING_PENDING": "report",
    "Explanation": "report",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
