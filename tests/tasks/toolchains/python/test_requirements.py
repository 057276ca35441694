"""What a project says its tests need: the test groups (include-group followed), the test
requirements files rather than the development ones that bring docs and typing."""

from __future__ import annotations

from pathlib import Path

from tasks.toolchains.python import requirements as reqs
from tests.field_repos import write_tree

GROUPS = (
    '[project]\nname = "x"\nversion = "0"\n'
    "[dependency-groups]\n"
    'linting = ["ruff"]\n'
    'testing = ["pytest-mock", {include-group = "asyncio"}]\n'
    'asyncio = ["pytest-asyncio>=0.24", {include-group = "testing"}]\n'
    'dev = [{include-group = "testing"}, {include-group = "docs"}, "ipdb"]\n'
    'docs = ["mkdocs"]\n'
    'Unit_Tests = ["pytest"]\n'
)


def test_groups_named_for_tests_and_what_they_include(tmp_path: Path) -> None:
    """Projects keep pytest plugins in groups named for tests (found on a real project whose
    `testing` group holds pytest-examples and pytest-mock); `dev` brings docs too."""
    write_tree(tmp_path, {"pyproject.toml": GROUPS})
    assert reqs.test_groups(tmp_path) == ["testing", "unit-tests"]
    # include-group followed (a cycle contributes each group once), names normalised.
    assert reqs.group_requirements(tmp_path, ["testing", "unit-tests"]) == [
        "pytest-mock",
        "pytest-asyncio>=0.24",
        "pytest",
    ]
    (tmp_path / "pyproject.toml").write_text('[dependency-groups]\ndev = ["pytest"]\n')
    assert reqs.test_groups(tmp_path) == ["dev"]  # no group named for tests: dev
    (tmp_path / "pyproject.toml").write_text("not toml [")
    assert reqs.test_groups(tmp_path) == []


def test_test_requirements_files_win_over_development_ones(tmp_path: Path) -> None:
    files = {
        "requirements.txt": "attrs\n",
        "requirements/dev.txt": "-r test.txt\n-r docs.txt\nmypy\n",
        "requirements/docs.txt": "sphinx\n",
        "requirements/test.txt": "pytest\n",
    }
    write_tree(tmp_path, files)
    got = [p.relative_to(tmp_path).as_posix() for p in reqs.requirement_files(tmp_path)]
    assert got == ["requirements/test.txt", "requirements.txt"]
    (tmp_path / "requirements/test.txt").unlink()
    got = [p.relative_to(tmp_path).as_posix() for p in reqs.requirement_files(tmp_path)]
    assert got == ["requirements/dev.txt", "requirements.txt"]
