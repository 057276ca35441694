"""pytest's repeats in one Python process (real pytest, coverage.py and bwrap): one session and
one result per run, a failure or a collection error in any run reported as that run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.sandbox.make import make_runner
from tasks.toolchains.base import CommandRunner, Toolchain
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo

TC = get_toolchain("python-pytest")

PYPROJECT = """\
[project]
name = "tiny"
version = "0.1.0"

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
CALC = """\
def double(x):
    return x * 2


def half(x):
    return x / 2
"""
PASSING = """\
from tiny.calc import double


def test_doubles():
    assert double(2) == 4


def test_doubles_zero():
    assert double(0) == 0
"""
#: Passes in a fresh process, fails when the same process runs it a second time.
LEAKS_STATE = """\
SEEN = []


def test_seen_once():
    SEEN.append(1)
    assert len(SEEN) == 1
"""
#: A conftest that does not import in the second session of a process (pytest imports a
#: conftest outside a package again for each session; the environment is the process's).
COLLECTS_ONCE = """\
import os

SESSIONS = int(os.environ.get("TINY_SESSIONS", "0")) + 1
os.environ["TINY_SESSIONS"] = str(SESSIONS)
if SESSIONS > 1:
    raise ImportError("collected twice")
"""
ONCE = """\
import pytest

SESSIONS = []


def pytest_sessionstart(session):
    SESSIONS.append(1)


@pytest.fixture(autouse=True)
def _marker():
    yield


def pytest_collect_file(file_path, parent):
    if len(SESSIONS) > 1 and file_path.name == "test_once.py":
        raise ImportError("collected twice")
"""
ONCE = """\
def test_once():
    assert True
"""
#: Fails in the second process that runs it (a counter file in the project).
SECOND_PROCESS_FAILS = """\
from pathlib import Path


def test_fails_on_the_second_run():
    path = Path(__file__).with_name("count.txt")
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    assert n != 2
"""


def runner_for(repo: Path) -> CommandRunner:
    return make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=repo)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    (root / "src" / "tiny").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / "src" / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    (root / "src" / "tiny" / "calc.py").write_text(CALC, encoding="utf-8")
    for name, text in {
        "test_calc.py": PASSING,
        "test_leaks.py": LEAKS_STATE,
        "test_second_process.py": SECOND_PROCESS_FAILS,
    }.items():
        (root / "tests" / name).write_text(text, encoding="utf-8")
    return root


def test_every_run_reports_the_same_tests_and_the_first_carries_coverage(tiny: Path) -> None:
    results = TC.run_repeats(
        tiny, ["tests/test_calc.py"], "src/tiny/calc.py", runner_for(tiny), runs=3, coverage=True
    )
    assert len(results) == 3 and all(r.loaded and r.passed for r in results)
    assert [[e.id for e in r.examples] for r in results] == [
        ["tests/test_calc.py::test_doubles", "tests/test_calc.py::test_doubles_zero"]
    ] * 3
    first = results[0].coverage
    assert first is not None and first.uncovered_lines == [6]  # half() never ran
    assert all(r.coverage is None for r in results[1:])


def test_a_run_that_fails_is_reported_as_that_run_and_ends_the_runs(tiny: Path) -> None:
    results = TC.run_repeats(tiny, ["tests/test_leaks.py"], None, runner_for(tiny), runs=3)
    # One process: the module is imported once, its list survives into the second session.
    assert [r.passed for r in results] == [True, False]
    failed = results[1].examples[0]
    assert failed.status == "failed" and "assert 2 == 1" in (failed.message or "")


def test_a_collection_error_of_a_later_run_is_that_runs_load_error(tiny: Path) -> None:
    (tiny / "tests" / "conftest.py").write_text(COLLECTS_ONCE, encoding="utf-8")
    (tiny / "tests" / "test_once.py").write_text(ONCE, encoding="utf-8")
    results = TC.run_repeats(tiny, ["tests/test_once.py"], None, runner_for(tiny), runs=3)
    assert results[0].loaded and results[0].passed
    assert len(results) == 2 and not results[1].loaded
    assert "collected twice" in (results[1].load_error or "")


def test_the_default_runs_one_process_per_run(tiny: Path) -> None:
    spec = ["tests/test_second_process.py"]
    results = Toolchain.run_repeats(TC, tiny, spec, None, runner_for(tiny), runs=3)
    assert [r.passed for r in results] == [True, False]
    again = TC.run_repeats(tiny, spec, None, runner_for(tiny), runs=2)
    assert [r.passed for r in again] == [True, True]  # 3 and 4: the count goes on


@pytest.mark.slow
def test_the_example_package_repeats_with_the_coverage_of_a_separate_run(tmp_path: Path) -> None:
    inv = make_example_repo("py_inventory", tmp_path / "inv")
    spec, target = ["tests/test_stock.py"], "src/inventory/stock.py"
    alone = TC.run_specs(inv, spec, target, runner_for(inv))
    results = TC.run_repeats(inv, spec, target, runner_for(inv), runs=4, coverage=True)
    assert len(results) == 4 and all(r.passed for r in results)
    assert [e.id for e in results[3].examples] == [e.id for e in alone.examples]
    assert results[0].coverage == alone.coverage
