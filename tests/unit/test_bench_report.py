"""bench/report.py: bench/README.md is what the script renders from the template and
bench/results/*.json, and every result file is rendered or listed (issue 31)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import report


@pytest.fixture(scope="module")
def results() -> report.Results:
    return report.load()


@pytest.fixture(scope="module")
def template() -> str:
    return report.TEMPLATE.read_text()


def test_the_committed_readme_is_what_the_script_renders() -> None:
    problems = report.check()
    assert not problems, "\n".join(["run `python -m bench.report`:", *problems])
    assert report.main(["--check"]) == 0


def test_every_result_file_is_rendered_or_listed(template: str) -> None:
    names = report.placeholders(template)
    rendered = {f for name in names if name in report.TABLES for f in report.TABLES[name].files}
    files = report.result_files()
    assert files, "no bench/results/*.json"
    unaccounted = [f for f in files if f not in rendered and f not in report.OTHER]
    assert not unaccounted
    assert not rendered & set(report.OTHER)
    assert report.coverage(template, files) == []


@pytest.mark.parametrize("name", sorted(report.TABLES))
def test_each_table_renders_the_files_it_reads(name: str, results: report.Results) -> None:
    table = report.TABLES[name]
    lines = report.render_table(name, results)
    if all(f in results for f in table.files):
        assert lines[0].startswith("From ")
        for f in table.files:
            assert f"results/{f}" in lines[0]
        assert any(line.startswith("|") for line in lines), lines
    else:
        assert table.optional and lines == [table.absent]
    # A table row has as many cells as its header.
    for block in _tables(lines):
        assert len({row.count(" | ") for row in block if not row.startswith("|---")}) == 1, block


def test_each_earlier_file_has_a_line(results: report.Results) -> None:
    lines = report.other_table(results)
    assert len(lines) == 2 + len(report.OTHER)
    for name in report.OTHER:
        assert sum(f"[`{name}`]" in line for line in lines) == 1


def test_every_target_is_measured(results: report.Results) -> None:
    lines = report.targets_table(results)
    assert len(lines) == 2 + len(report.TARGETS)
    for line in lines[2:]:
        met = line.split(" | ")[2]
        assert met in ("yes", "no") or met.endswith(" seeds"), line


def test_a_new_result_file_fails_the_check(tmp_path: Path) -> None:
    for path in report.RESULTS.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    assert report.check(results_dir=tmp_path) == []
    (tmp_path / "new-bench.json").write_text('{"figure": 1}\n')
    problems = report.check(results_dir=tmp_path)
    assert any("new-bench.json is neither rendered nor listed" in p for p in problems), problems


def test_a_stale_readme_fails_the_check(tmp_path: Path) -> None:
    stale = tmp_path / "README.md"
    stale.write_text(report.README.read_text().replace("| yes |", "| no |", 1))
    problems = report.check(readme=stale)
    assert problems and "is not what" in problems[0]


def test_an_unknown_placeholder_or_a_dropped_table_is_an_error(template: str) -> None:
    files = report.result_files()
    assert any("{{nothing}}" in p for p in report.coverage(template + "\n{{nothing}}\n", files))
    without = template.replace("{{volumes}}\n", "")
    problems = report.coverage(without, files)
    assert any("'volumes' is not in the template" in p for p in problems)
    assert any("volumes.json is neither rendered nor listed" in p for p in problems)


def _composite(zoned: bool) -> dict[str, Any]:
    """What `python -m bench.composite_bench` prints (no such file is committed yet)."""
    return {
        "nodes": 1000,
        "zoned": zoned,
        "trees": 10,
        "flat_gangs": 10,
        "failures": 0,
        "tree_8x8": {"mean_ms": 2.0, "median_ms": 2.0, "max_ms": 3.0},
        "flat_64": {"mean_ms": 2.0, "median_ms": 2.0, "max_ms": 3.0},
        "ratio_median": 1.0,
        "strategies": {"tree": ["greedy"], "flat": ["greedy"]},
    }


def test_a_composite_result_renders_when_present() -> None:
    runs = [_composite(False), _composite(True)]
    lines = report.TABLES["composite"].render({"composite.json": runs})
    assert len(lines) == 4 and "unconstrained" in lines[2] and "`--zoned`" in lines[3]
    assert len(report.TABLES["composite"].render({"composite.json": runs[0]})) == 3


def _tables(lines: list[str]) -> list[list[str]]:
    blocks: list[list[str]] = []
    previous = False
    for line in lines:
        is_row = line.startswith("|")
        if is_row and not previous:
            blocks.append([])
        if is_row:
            blocks[-1].append(line)
        previous = is_row
    return blocks
