"""The README's conformance table matches the suite's markers."""

from __future__ import annotations

from tests.conformance.table import BEGIN, END, README, render


def test_readme_table_matches_the_markers() -> None:
    text = README.read_text()
    assert BEGIN in text and END in text, "README.md has no conformance table"
    current = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert current == render(), (
        "README.md's conformance table is stale; "
        "regenerate it with `.venv/bin/python -m tests.conformance.table --write`"
    )
