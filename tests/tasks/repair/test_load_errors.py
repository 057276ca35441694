"""The repair side of "the suite did not run": a merge that breaks loading is a failure group
whose signature is the load error (repaired like any other), and a suite that cannot start for
reasons of tooling or environment is handed to a person, never patched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.core.types import SuiteProblem, ValidationResult
from tasks.repair.scout import (
    LOAD_ERROR_CLASS,
    environment_group,
    group_failures,
    load_failure_cases,
)
from tasks.toolchains.base import SuiteResult
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import is_surgeon, run_flow

STOCK = "src/inventory/stock.py"
BROKEN_LINE = "    reorder_level: int = (0\n"
FIX = (
    "```diff\n"
    f"--- a/{STOCK}\n+++ b/{STOCK}\n"
    "@@ -15,4 +15,4 @@\n"
    "     name: str\n"
    "     unit_price_cents: int\n"
    "-    reorder_level: int = (0\n"
    "+    reorder_level: int = 0\n"
    " \n"
    "```\n"
)
MORE_STOCK = (
    "from inventory.stock import Item\n\n\ndef test_item():\n    assert Item('A', 'a', 1)\n"
)


def _diagnosis() -> str:
    return json.dumps(
        {
            "root_cause": "The merge left an unclosed parenthesis in stock.py: nothing imports it.",
            "affected_code_blocks": [
                {"file_path": STOCK, "start_line": 17, "end_line": 17, "description": "default"}
            ],
            "repair_strategy": "Close the expression: reorder_level defaults to 0.",
            "confidence": 0.9,
            "wrong_side": "code",
            "alternatives": [],
        }
    )


@pytest.mark.slow
def test_a_merge_that_breaks_loading_is_one_group_and_is_repaired(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    (repo / "tests/test_more_stock.py").write_text(MORE_STOCK)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more stock tests")
    source = (repo / STOCK).read_text()
    (repo / STOCK).write_text(source.replace("    reorder_level: int = 0\n", BROKEN_LINE))
    git(repo, "commit", "-qam", "Merge: reorder levels")
    mistral_server.add(Rule(name="diagnose", schema_name="diagnosis", replies=[_diagnosis()]))
    mistral_server.add(Rule(name="surgeon", when=is_surgeon, replies=[FIX]))

    result = run_flow(repo, None, tmp_path)

    # Two test files no longer load, for one cause: one group, repaired once.
    [group] = result["groups"]
    assert group["signature"].startswith("load error | SyntaxError | ")
    assert sorted(group["tests"]) == ["tests/test_more_stock.py", "tests/test_stock.py"]
    assert group["outcome"] == "fixed", group["reasons"]
    branch = result["branch"]
    assert "reorder_level: int = 0\n" in git(repo, "show", f"{branch}:{STOCK}")
    diagnose = next(r for r in mistral_server.requests if r.schema_name == "diagnosis")
    assert "SyntaxError" in diagnose.text and STOCK in diagnose.text


@pytest.mark.slow
def test_a_suite_that_cannot_start_for_its_environment_is_never_patched(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    pyproject = (repo / "pyproject.toml").read_text()
    (repo / "pyproject.toml").write_text(
        pyproject.replace(
            'testpaths = ["tests"]', 'testpaths = ["tests"]\naddopts = "--cov=inventory"'
        )
    )
    git(repo, "commit", "-qam", "Merge: coverage in CI")

    result = run_flow(repo, None, tmp_path)

    [group] = result["groups"]
    assert group["outcome"] == "needs_human" and group["attempts"] == 0
    assert group["patch"] is None
    (reason,) = group["reasons"]
    assert reason.startswith(
        "the test suite cannot start: pytest: unrecognized arguments: --cov=inventory"
    )
    assert mistral_server.requests == []  # no model was asked to patch the environment
    assert result["branch"] is None


def _problem(cause: str) -> SuiteProblem:
    return SuiteProblem(
        tool="pytest",
        cause=cause,  # type: ignore[arg-type]
        message="ImportError while loading conftest 'tests/conftest.py': ImportError: "
        "cannot import name 'Stock' from 'inventory.stock'",
        error_type="ImportError",
        detail='File "src/inventory/stock.py", line 3\nE   ImportError: cannot import name',
    )


def test_a_suite_that_does_not_load_because_of_the_project_is_a_group_over_every_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "src/inventory").mkdir(parents=True)
    (tmp_path / "src/inventory/stock.py").write_text("x\ny\nz\n")
    suite = SuiteResult(
        validation=ValidationResult(
            toolchain="python-pytest", loaded=False, problem=_problem("project")
        )
    )
    files = ["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"]
    cases, problem = load_failure_cases(suite, tmp_path, get_toolchain("python-pytest"), files)
    assert problem is None
    assert [c.id for c in cases] == files
    assert all(c.classname == LOAD_ERROR_CLASS and c.line is None for c in cases)
    assert cases[0].message == "ImportError: cannot import name 'Stock' from 'inventory.stock'"
    [group] = group_failures(cases, get_toolchain("python-pytest").file_rules(tmp_path))
    assert group.spec_files == files and group.source is None
    assert group.frame == "src/inventory/stock.py:3"


def test_an_environment_problem_is_returned_for_a_person_not_as_cases(tmp_path: Path) -> None:
    suite = SuiteResult(
        validation=ValidationResult(
            toolchain="python-pytest", loaded=False, problem=_problem("environment")
        )
    )
    cases, problem = load_failure_cases(
        suite, tmp_path, get_toolchain("python-pytest"), ["tests/test_a.py"]
    )
    assert cases == [] and problem is not None
    state = environment_group(problem)
    assert (state.outcome, state.step) == ("needs_human", "human")
    assert state.handoff_reasons == state.reasons
    assert state.reasons[0].startswith("the test suite cannot start: pytest: ImportError")
