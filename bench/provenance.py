"""Which code a result file's figures were measured on: every bench writes it the same way."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def git_commit(*, changes_in: tuple[str, ...] = ()) -> str:
    """The short hash of HEAD (empty outside a checkout), with "+changes" appended when any
    of the paths `changes_in` has uncommitted changes (the figures are then not HEAD's)."""
    commit = _git("rev-parse", "--short", "HEAD")
    if changes_in and _git("status", "--porcelain", "--", *changes_in):
        return commit + "+changes"
    return commit
