"""python-pytest toolchain against the real example package: pytest, coverage.py, ruff in bwrap."""

from __future__ import annotations

import sys
from pathlib import Path

import coverage
import pytest

from tasks.core.config import SandboxSettings
from tasks.core.errors import ConfigError
from tasks.core.types import CommandResult
from tasks.sandbox.make import make_runner
from tasks.toolchains.base import CommandRunner, ToolchainError
from tasks.toolchains.python.lint import parse_ruff_json
from tasks.toolchains.python.results import parse_pytest_run
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git, make_example_repo

TC = get_toolchain("python-pytest")


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    return make_example_repo("py_inventory", tmp_path / "inv")


def runner_for(repo: Path) -> CommandRunner:
    return make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=repo)


def write(repo: Path, rel: str, text: str) -> None:
    (repo / rel).write_text(text, encoding="utf-8")


@pytest.mark.slow
def test_tests_pass_with_target_coverage_equal_to_coverage_py(
    inv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = tmp_path / "reports"
    result = TC.run_specs(
        inv, ["tests/test_stock.py"], "src/inventory/stock.py", runner_for(inv), reports_dir=reports
    )
    assert result.loaded and result.passed
    assert [e.id for e in result.examples] == [
        "tests/test_stock.py::test_add_increases_level",
        "tests/test_stock.py::test_remove_too_much",
        "tests/test_stock.py::test_needs_reorder",
    ]
    assert result.examples[0].line == 14
    assert result.coverage is not None
    # coverage.py's own analysis of the same data file.
    monkeypatch.chdir(inv)
    cov = coverage.Coverage(data_file=str(reports / ".coverage"))
    cov.load()
    _, statements, _, missing, _ = cov.analysis2(str(inv / "src/inventory/stock.py"))
    assert result.coverage.executable_lines == len(statements)
    assert result.coverage.covered_lines == len(statements) - len(missing)
    assert result.coverage.uncovered_lines == sorted(missing)
    assert git(inv, "status", "--porcelain") == ""


@pytest.mark.slow
def test_weak_test_still_passes(inv: Path) -> None:
    result = TC.run_specs(
        inv, ["tests/test_pricing.py"], "src/inventory/pricing.py", runner_for(inv)
    )
    assert result.passed
    assert len(result.examples) == 4
    assert result.coverage is not None and result.coverage.ratio < 1.0


@pytest.mark.slow
def test_a_run_without_coverage_reports_the_same_tests_and_no_coverage(inv: Path) -> None:
    runner = runner_for(inv)
    result = TC.run_specs(
        inv, ["tests/test_pricing.py"], "src/inventory/pricing.py", runner, coverage=False
    )
    assert result.passed and len(result.examples) == 4
    assert result.coverage is None
    assert not any(".coverage" in p.name for p in inv.rglob(".coverage*"))


@pytest.mark.slow
def test_syntax_error_means_not_loaded(inv: Path) -> None:
    write(inv, "tests/test_reports.py", "from inventory import reports\n\ndef test_x(:\n    pass\n")
    result = TC.run_specs(
        inv, ["tests/test_reports.py"], "src/inventory/reports.py", runner_for(inv)
    )
    assert result.loaded is False
    assert result.passed is False
    assert result.examples == []
    assert result.load_error is not None
    assert result.load_error.startswith("ERROR collecting tests/test_reports.py")
    assert "SyntaxError: invalid syntax" in result.load_error


def test_long_collection_traceback_keeps_its_first_line_and_the_error(inv: Path) -> None:
    # The error is the last line of a collection traceback: a deep one, or one under a long
    # install path, must not lose it to the length limit.
    write(
        inv,
        "tests/test_reports.py",
        "def dive(n):\n"
        "    if n == 0:\n"
        "        raise ValueError('the real cause is here')\n"
        "    return dive(n - 1)\n\n"
        "dive(60)\n\n"
        "def test_x():\n    pass\n",
    )
    result = TC.run_specs(
        inv, ["tests/test_reports.py"], "src/inventory/reports.py", runner_for(inv)
    )
    assert result.loaded is False
    assert result.load_error is not None
    assert result.load_error.startswith("ERROR collecting tests/test_reports.py")
    assert "ValueError: the real cause is here" in result.load_error
    assert len(result.load_error) <= 1500


@pytest.mark.slow
def test_import_error_means_not_loaded(inv: Path) -> None:
    write(
        inv,
        "tests/test_reports.py",
        "from inventory.reports import nope\n\ndef test_x():\n    pass\n",
    )
    result = TC.run_specs(inv, ["tests/test_reports.py"], None, runner_for(inv))
    assert result.loaded is False
    assert result.load_error is not None
    assert "cannot import name 'nope'" in result.load_error


@pytest.mark.slow
def test_failure_message_and_location_captured(inv: Path) -> None:
    write(
        inv,
        "tests/test_reports.py",
        "from inventory.reports import stock_value_cents\n"
        "from inventory.stock import Item, Stock\n\n\n"
        "def test_value():\n"
        "    s = Stock()\n"
        '    s.register(Item("A", "Apple", 50), 3)\n'
        "    assert stock_value_cents(s) == 151\n\n\n"
        "def test_unknown():\n"
        '    Stock().quantity("X")\n',
    )
    result = TC.run_specs(
        inv, ["tests/test_reports.py"], "src/inventory/reports.py", runner_for(inv)
    )
    assert result.loaded is True and result.passed is False
    value, unknown = result.examples
    assert value.status == "failed"
    assert value.message is not None and value.message.startswith(
        "AssertionError: assert 150 == 151"
    )
    assert (value.locations[-1].path, value.locations[-1].line) == ("tests/test_reports.py", 8)
    assert unknown.status == "failed"
    assert unknown.message == "inventory.errors.UnknownItemError: unknown item 'X'"
    assert unknown.locations[-1].path == "src/inventory/stock.py"
    assert result.coverage is not None and result.coverage.covered_lines > 0


@pytest.mark.slow
def test_run_suite_reports_every_module(inv: Path) -> None:
    suite = TC.run_suite(inv, runner_for(inv))
    assert suite.validation.passed
    assert len(suite.validation.examples) == 11
    assert set(suite.files) == {
        f"src/inventory/{m}.py"
        for m in ("__init__", "csv_import", "errors", "pricing", "reports", "stock", "units")
    }
    assert suite.files["src/inventory/csv_import.py"].covered_lines == 0
    assert suite.files["src/inventory/csv_import.py"].executable_lines > 0


@pytest.mark.slow
def test_a_run_for_a_target_reports_the_target_alone(
    inv: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file job's run reads its target's coverage only: the others are not reported (each
    would be parsed for nothing); the target's figures are coverage.py's own."""
    runner, reports = runner_for(inv), tmp_path / "reports"
    target = "src/inventory/pricing.py"
    suite = TC.run_tests(
        inv, ["tests/test_stock.py"], target, runner, timeout_s=None, reports_dir=reports
    )
    assert set(suite.files) == {target}
    got = suite.validation.coverage
    monkeypatch.chdir(inv)
    cov = coverage.Coverage(data_file=str(reports / ".coverage"))
    cov.load()
    _, statements, _, missing, _ = cov.analysis2(str(inv / target))
    assert got is not None and got.executable_lines == len(statements)
    assert got.uncovered_lines == sorted(missing)
    # A target the run did not measure at all: no coverage, and nothing to warn about.
    with caplog.at_level("WARNING"):
        none = TC.run_tests(
            inv,
            ["tests/test_stock.py"],
            "src/inventory/absent.py",
            runner,
            timeout_s=None,
            reports_dir=None,
        )
    assert none.validation.passed and none.validation.coverage is None and none.files == {}
    assert not [r for r in caplog.records if "coverage" in r.getMessage()]


@pytest.mark.slow
def test_ruff_offences_parsed_and_fixed(inv: Path) -> None:
    write(
        inv,
        "src/inventory/extra.py",
        "import os\nimport sys\n\n\ndef f(x):\n    unused = 1\n    return sys.argv == x\n",
    )
    runner = runner_for(inv)
    offences = TC.lint(inv, ["src/inventory/extra.py"], False, runner)
    assert sorted((o.rule, o.line, o.correctable) for o in offences) == [
        ("F401", 1, True),
        ("F841", 6, True),
    ]
    assert all(o.path == "src/inventory/extra.py" for o in offences)
    # F841's fix is unsafe, so `--fix` removes only the unused import.
    remaining = TC.lint(inv, ["src/inventory/extra.py"], True, runner)
    assert [(o.rule, o.line) for o in remaining] == [("F841", 5)]
    assert "import os" not in (inv / "src/inventory/extra.py").read_text()


@pytest.mark.slow
def test_shipped_package_is_ruff_clean(inv: Path) -> None:
    files = [p.relative_to(inv).as_posix() for p in (inv / "src").rglob("*.py")]
    assert TC.lint(inv, files, False, runner_for(inv)) == []


def test_missing_junit_is_not_loaded(tmp_path: Path) -> None:
    cmd = CommandResult(argv=["pytest"], exit_code=-9, reason="timeout after 5s", timed_out=True)
    result = parse_pytest_run(tmp_path, tmp_path / "none.xml", cmd)
    assert result.loaded is False
    assert result.reason == "timeout after 5s"
    assert result.load_error == "pytest exited -9: timeout after 5s"


def test_hostile_junit_is_refused_cleanly(tmp_path: Path) -> None:
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaa">]><testsuite>&a;</testsuite>',
        encoding="utf-8",
    )
    result = parse_pytest_run(tmp_path, xml, CommandResult(argv=["pytest"], exit_code=0))
    assert result.loaded is False
    assert result.load_error is not None
    assert result.load_error.startswith("pytest exited 0: no usable JUnit XML report")


def test_ruff_garbage_raises(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="ruff printed no JSON report"):
        parse_ruff_json("error: unexpected argument", tmp_path)


def test_get_toolchain_names() -> None:
    assert get_toolchain("python-pytest").name == "python-pytest"
    assert get_toolchain("ruby-rspec").name == "ruby-rspec"
    with pytest.raises(ConfigError, match="unknown toolchain 'maven'"):
        get_toolchain("maven")


@pytest.mark.slow
def test_suite_with_a_broken_file_and_without_it(inv: Path) -> None:
    write(inv, "tests/test_reports.py", "def test_x(:\n")
    runner = runner_for(inv)
    broken = TC.run_suite(inv, runner)
    assert broken.validation.loaded is False
    assert broken.validation.load_error is not None
    assert "ERROR collecting tests/test_reports.py" in broken.validation.load_error
    rest = TC.run_suite(inv, runner, exclude=["tests/test_reports.py"])
    assert rest.validation.passed
    assert len(rest.validation.examples) == 11


def _project_interpreter(tmp_path: Path) -> Path:
    """An interpreter with a package of its own (`extdep`), as a project's virtualenv has: a
    wrapper around this one that adds a site directory (under /tmp, which the sandbox hides
    unless the program run lives there)."""
    site = tmp_path / "project-site"
    (site / "extdep").mkdir(parents=True)
    (site / "extdep" / "__init__.py").write_text("ANSWER = 42\n")
    python = tmp_path / "venv-bin" / "python"
    python.parent.mkdir()
    # Like a virtualenv, it keeps what PYTHONPATH says and adds its own site directory.
    path = f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}"'
    python.write_text(f'#!/bin/sh\n{path} exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python


def test_tests_run_with_the_configured_interpreter(inv: Path, tmp_path: Path) -> None:
    write(
        inv,
        "tests/test_reports.py",
        "import extdep\n\n\ndef test_dependency_of_the_project():\n"
        "    assert extdep.ANSWER == 42\n",
    )
    specs, target = ["tests/test_reports.py"], "src/inventory/reports.py"
    # Autopilot's own interpreter lacks the project's dependency: the spec does not load.
    default = TC.run_specs(inv, specs, target, runner_for(inv))
    assert default.loaded is False and "No module named 'extdep'" in (default.load_error or "")
    python = _project_interpreter(tmp_path)
    chain = get_toolchain("python-pytest", python=str(python))
    result = chain.run_specs(inv, specs, target, runner_for(inv))
    assert result.passed, result.load_error
    assert [e.status for e in result.examples] == ["passed"]
    assert result.coverage is not None  # coverage ran under it too
    # Another interpreter is another validation: the outcome cache must not mix them.
    assert chain.config_digest(inv) != TC.config_digest(inv)


@pytest.mark.slow
def test_branch_coverage_is_measured_and_partial_lines_named(inv: Path) -> None:
    # load_csv with valid text: `if missing:` (line 19) never takes its true branch.
    write(
        inv,
        "tests/test_csv_branches.py",
        "from inventory.csv_import import load_csv\n\n\n"
        "def test_loads_one_row():\n"
        '    stock = load_csv("sku,name,price_cents,quantity\\nA1,Apple,150,3\\n")\n'
        '    assert stock.levels == {"A1": 3}\n',
    )
    result = TC.run_specs(
        inv, ["tests/test_csv_branches.py"], "src/inventory/csv_import.py", runner_for(inv)
    )
    assert result.passed, result
    cov = result.coverage
    assert cov is not None and cov.branches is not None and cov.covered_branches is not None
    assert 0 < cov.covered_branches < cov.branches
    assert 19 in cov.partial_lines
    assert not set(cov.partial_lines) & set(cov.uncovered_lines)
