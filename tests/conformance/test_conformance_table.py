"""docs/conformance.md's table matches the suite's markers."""

from __future__ import annotations

from tests.conformance.table import BEGIN, DOC, END, render


def test_docs_table_matches_the_markers() -> None:
    text = DOC.read_text()
    assert BEGIN in text and END in text, "docs/conformance.md has no conformance table"
    current = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert current == render(), (
        "docs/conformance.md's conformance table is stale; "
        "regenerate it with `.venv/bin/python -m tests.conformance.table --write`"
    )
