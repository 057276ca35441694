"""Coverage parsing checked against what the real tools (SimpleCov, coverage.py) report."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tasks.core.errors import CoverageError
from tasks.core.types import FileCoverage
from tasks.facts.coverage import detect_format, load_simplecov, merge_coverage, parse_coverage
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "coverage"


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    assert proc.returncode == 0, f"{argv} failed:\n{proc.stdout}\n{proc.stderr}"


# --- coverage.py --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def py_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real coverage.py run over a src-layout package, reported in all three formats.

    Report names carry no format hint: detection must come from the content.
    """
    proj = tmp_path_factory.mktemp("pyproj") / "proj"
    shutil.copytree(FIXTURES / "py", proj)
    cov = [sys.executable, "-m", "coverage"]
    _run([*cov, "run", "driver.py"], proj)
    _run([*cov, "json", "-o", "report-a"], proj)
    _run([*cov, "xml", "-o", "report-b"], proj)
    _run([*cov, "lcov", "-o", "report-c"], proj)
    return {
        "repo": proj,
        "json": proj / "report-a",
        "cobertura": proj / "report-b",
        "lcov": proj / "report-c",
    }


def _coverage_py_truth(report: Path) -> dict[str, dict[str, Any]]:
    return json.loads(report.read_text())["files"]  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "cobertura", "lcov"])
def test_coverage_py_formats_equal_coverage_py_own_numbers(
    py_reports: dict[str, Path], fmt: str
) -> None:
    truth = _coverage_py_truth(py_reports["json"])
    got = parse_coverage(py_reports[fmt], py_reports["repo"])

    assert set(got) == set(truth) == {"src/shop/__init__.py", "src/shop/cart.py", "src/shop/tax.py"}
    for path, entry in truth.items():
        summary = entry["summary"]
        assert got[path].path == path
        assert got[path].executable_lines == summary["num_statements"]
        assert got[path].covered_lines == summary["covered_lines"]
        assert got[path].uncovered_lines == entry["missing_lines"]
        assert math.isclose(got[path].ratio * 100, summary["percent_covered"])


@pytest.mark.slow
def test_coverage_py_known_gaps_and_excluded_lines(py_reports: dict[str, Path]) -> None:
    got = parse_coverage(py_reports["json"], py_reports["repo"])
    cart = got["src/shop/cart.py"]
    # The discount branch (line 9) and the non-empty description (line 16) never ran; the
    # `pragma: no cover` function (lines 19-20) is excluded, not uncovered.
    assert cart.uncovered_lines == [9, 16]
    assert 19 not in cart.uncovered_lines and 20 not in cart.uncovered_lines
    assert got["src/shop/tax.py"].uncovered_lines == [7, 11]
    # An empty module has nothing to run: fully covered, not a division by zero.
    assert got["src/shop/__init__.py"].ratio == 1.0


@pytest.mark.slow
def test_formats_detected_by_content(py_reports: dict[str, Path]) -> None:
    assert detect_format(py_reports["json"]) == "coverage-json"
    assert detect_format(py_reports["cobertura"]) == "cobertura"
    assert detect_format(py_reports["lcov"]) == "lcov"


@pytest.mark.slow
def test_cobertura_filenames_resolved_against_source_element(py_reports: dict[str, Path]) -> None:
    # .coveragerc sets source = src, so coverage.py writes <source>.../src</source> and
    # filename="shop/cart.py"; the key must still be the repository path.
    xml = py_reports["cobertura"].read_text()
    assert 'filename="shop/cart.py"' in xml
    assert "src/shop/cart.py" in parse_coverage(py_reports["cobertura"], py_reports["repo"])


# --- SimpleCov ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rb_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain-Ruby project whose two spec files ran as two SimpleCov commands."""
    proj = tmp_path_factory.mktemp("rbproj") / "proj"
    shutil.copytree(FIXTURES / "rb", proj)
    _run(["rspec", "spec/calc_spec.rb"], proj, {"SC_COMMAND": "calc"})
    # Keep the single-command resultset for the comparison with the merged one.
    shutil.copy(proj / "coverage/.resultset.json", proj / "calc-only.json")
    shutil.copy(proj / "coverage/.last_run.json", proj / "calc-only-last-run.json")
    # The second command records branches too: the new per-file {"lines", "branches"} format.
    _run(["rspec", "spec/square_spec.rb"], proj, {"SC_COMMAND": "square", "SC_BRANCH": "1"})
    return proj


def _simplecov_truth(resultset: Path, root: Path) -> dict[str, dict[str, Any]]:
    proc = subprocess.run(
        ["ruby", str(FIXTURES / "simplecov_oracle.rb"), str(resultset), str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {str(Path(k).relative_to(root)): v for k, v in json.loads(proc.stdout).items()}


def _last_run_percent(path: Path) -> float:
    return float(json.loads(path.read_text())["result"]["line"])


def _total_percent(cov: dict[str, FileCoverage]) -> float:
    covered = sum(c.covered_lines for c in cov.values())
    executable = sum(c.executable_lines for c in cov.values())
    return 100.0 * covered / executable


@pytest.mark.slow
def test_simplecov_merged_commands_equal_simplecov_own_result(rb_project: Path) -> None:
    resultset = rb_project / "coverage/.resultset.json"
    assert set(json.loads(resultset.read_text())) == {"calc", "square"}
    got = parse_coverage(resultset, rb_project)
    truth = _simplecov_truth(resultset, rb_project.resolve())

    assert set(got) == set(truth) == {"lib/calc.rb", "lib/shapes/square.rb"}
    for path, t in truth.items():
        assert got[path].executable_lines == t["relevant"]
        assert got[path].covered_lines == t["covered"]
        assert got[path].uncovered_lines == t["missed"]
        assert math.isclose(got[path].ratio * 100, t["percent"])
    # Each command alone left lines uncovered in calc.rb; merged, it is fully covered.
    assert got["lib/calc.rb"].uncovered_lines == []
    assert got["lib/shapes/square.rb"].uncovered_lines == [17]  # perimeter never called
    # SimpleCov's .last_run.json is the merged total, floored to two decimals.
    assert _last_run_percent(rb_project / "coverage/.last_run.json") == pytest.approx(
        _total_percent(got), abs=0.01
    )


@pytest.mark.slow
def test_simplecov_single_command(rb_project: Path) -> None:
    got = load_simplecov(rb_project / "calc-only.json", rb_project)
    truth = _simplecov_truth(rb_project / "calc-only.json", rb_project.resolve())
    for path, t in truth.items():
        assert got[path].uncovered_lines == t["missed"]
    assert got["lib/calc.rb"].uncovered_lines == [12, 19]  # a / b and the :positive branch
    assert _last_run_percent(rb_project / "calc-only-last-run.json") == pytest.approx(
        _total_percent(got), abs=0.01
    )


@pytest.mark.slow
def test_simplecov_old_array_format_reads_the_same(rb_project: Path, tmp_path: Path) -> None:
    new = json.loads((rb_project / "coverage/.resultset.json").read_text())
    old = {
        cmd: {"coverage": {f: e["lines"] for f, e in data["coverage"].items()}}
        for cmd, data in new.items()
    }
    old_file = tmp_path / "old.json"
    old_file.write_text(json.dumps(old))
    assert detect_format(old_file) == "simplecov"
    # The old format has lines only: the same line figures, no branches (issue 15).
    branch_fields = {"branches", "covered_branches", "partial_lines"}
    lines_old = {k: v.model_dump() for k, v in parse_coverage(old_file, rb_project).items()}
    new_cov = parse_coverage(rb_project / "coverage/.resultset.json", rb_project)
    lines_new = {k: v.model_dump(exclude=branch_fields) for k, v in new_cov.items()}
    assert {k: {f: v[f] for f in lines_new[k]} for k, v in lines_old.items()} == lines_new
    assert all(v["branches"] is None for v in lines_old.values())
    assert any(v.branches for v in new_cov.values())  # the new format carries them


@pytest.mark.slow
def test_reports_written_elsewhere_map_through_aliases(
    rb_project: Path, py_reports: dict[str, Path], tmp_path: Path
) -> None:
    # As when a report was written inside a container where the worktree had another path.
    for original, report, found_without_alias in (
        # SimpleCov writes absolute paths: outside the repository, so dropped without an alias.
        (rb_project, rb_project / "coverage/.resultset.json", False),
        # Cobertura names are relative to <source>.../src</source>: recognised as the repo's src/.
        (py_reports["repo"], py_reports["cobertura"], True),
    ):
        moved = tmp_path / original.parent.name
        shutil.copytree(original, moved)
        expected = parse_coverage(report, original)
        assert expected
        assert parse_coverage(report, moved) == (expected if found_without_alias else {})
        assert parse_coverage(report, moved, aliases=[original]) == expected


# --- path policy, merging and broken input (small hand-written reports) ----------------------


def test_paths_outside_repo_dropped_and_relative_paths_kept(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    report = tmp_path / "lcov.info"
    report.write_text(
        f"TN:\nSF:{repo}/lib/a.rb\nDA:1,1\nDA:2,0\nend_of_record\n"
        "SF:/usr/lib/ruby/3.1.0/set.rb\nDA:1,5\nend_of_record\n"
        "SF:lib/b.rb\nDA:3,2\nend_of_record\n"
        "SF:../elsewhere/c.rb\nDA:1,1\nend_of_record\n"
        # A second record for a.rb (another test) covers line 2.
        f"SF:{repo}/lib/a.rb\nDA:2,4\nDA:5,0\nend_of_record\n"
    )
    got = parse_coverage(report, repo)
    assert set(got) == {"lib/a.rb", "lib/b.rb"}
    assert got["lib/a.rb"] == FileCoverage(
        path="lib/a.rb",
        executable_lines=3,
        covered_lines=2,
        uncovered_lines=[5],
        executed_lines=[1, 2],
    )


def test_an_older_coverage_pys_non_statement_lines_are_not_counted(tmp_path: Path) -> None:
    # What coverage.py 7.2.7 writes for a class whose docstring runs (line 2): the docstring is
    # in `executed_lines` but not a statement; its own report says 5 of 6 statements (83 %).
    entry = {
        "executed_lines": [1, 2, 5, 7, 9, 12],
        "summary": {
            "covered_lines": 5,
            "num_statements": 6,
            "percent_covered": 83.33333333333333,
            "percent_covered_display": "83",
            "missing_lines": 1,
            "excluded_lines": 0,
            "num_branches": 0,
            "num_partial_branches": 0,
            "covered_branches": 0,
            "missing_branches": 0,
        },
        "missing_lines": [13],
        "excluded_lines": [],
        "executed_branches": [],
        "missing_branches": [],
    }
    meta = {"version": "7.2.7", "branch_coverage": True, "show_contexts": False}
    report = tmp_path / "coverage.json"
    report.write_text(json.dumps({"meta": meta, "files": {"m.py": entry}}))
    got = parse_coverage(report, tmp_path)["m.py"]
    assert (got.executable_lines, got.covered_lines, got.uncovered_lines) == (6, 5, [13])
    assert math.isclose(got.ratio * 100, entry["summary"]["percent_covered"])  # type: ignore[index]


def test_merge_coverage_covered_in_any(tmp_path: Path) -> None:
    a = {
        "x.py": FileCoverage(
            path="x.py", executable_lines=4, covered_lines=2, uncovered_lines=[2, 3]
        )
    }
    b = {
        "x.py": FileCoverage(path="x.py", executable_lines=4, covered_lines=3, uncovered_lines=[3])
    }
    merged = merge_coverage(a, b)
    assert merged["x.py"].uncovered_lines == [3]
    assert merged["x.py"].covered_lines == 3


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "empty coverage report"),
        ("{not json", "malformed JSON"),
        ('{"rspec": {"timestamp": 1}}', "has no 'coverage' object"),
        ('{"rspec": {"coverage": {"/r/a.rb": {"lines": [1, "x"]}}}}', "bad hit count"),
        ('{"meta": {}, "files": {"a.py": {"executed_lines": [1]}}}', "missing or bad"),
        ("<coverage><packages><class name='x'/></packages></coverage>", "without a filename"),
        ("<coverage><packages>", "malformed XML"),
        ("<testsuites><testsuite/></testsuites>", "not a Cobertura report"),
        (
            '<?xml version="1.0"?><!DOCTYPE c [<!ENTITY x "boom">]><coverage>&x;</coverage>',
            "refused XML construct",
        ),
        ("SF:a.rb\nDA:1,1\n", "no end_of_record"),
        ("SF:a.rb\nDA:one,1\nend_of_record\n", "bad DA record"),
        ("hello world\n", "unknown coverage format"),
    ],
)
def test_broken_reports_raise_one_line_naming_the_file(
    tmp_path: Path, content: str, reason: str
) -> None:
    report = tmp_path / "broken.report"
    report.write_text(content)
    with pytest.raises(CoverageError) as info:
        parse_coverage(report, tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(report))
    assert reason in message


def test_missing_report_is_a_coverage_error(tmp_path: Path) -> None:
    with pytest.raises(CoverageError, match="cannot read"):
        parse_coverage(tmp_path / "nope.json", tmp_path)
