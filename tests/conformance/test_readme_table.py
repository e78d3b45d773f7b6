"""The README's conformance table matches the suite's markers."""

from __future__ import annotations

from pathlib import Path

from tests.conformance.table import BEGIN, END, render

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_table_matches_the_markers() -> None:
    text = README.read_text()
    assert BEGIN in text and END in text, "README.md has no conformance table"
    current = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert current == render(), (
        "README.md's conformance table is stale; "
        "replace it with the output of `.venv/bin/python -m tests.conformance.table`"
    )
