"""Semantic Versioning 2.0.0 as DRA reads it: a device's `version` attribute and CEL's
`semver(text)` / `semver(text, true)`.

Kept apart from the object readers (parse_slices.py) and the CEL library (cel_library.py),
which both need it, so neither depends on the other for what is only a text format.
"""

from __future__ import annotations

import re

from gangsched.core.dra.model import Semver

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


def parse_semver(text: str) -> Semver | None:
    """Semantic Versioning 2.0.0 (what blang/semver accepts); None if malformed."""
    match = _SEMVER.match(text)
    if match is None:
        return None
    pre: tuple[int | str, ...] = ()
    if match[4]:
        pre = tuple(int(p) if p.isdigit() else p for p in match[4].split("."))
    return Semver(int(match[1]), int(match[2]), int(match[3]), pre)


def normalize_semver(text: str) -> str:
    """semver(s, true): a leading "v", missing minor/patch and leading zeros are tolerated."""
    text = text.removeprefix("v")
    core, sep, rest = text.partition("-") if "-" in text else text.partition("+")
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [str(int(p)) if p.isdigit() else p for p in parts]
    return ".".join(parts) + (sep + rest if sep else "")
