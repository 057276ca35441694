"""Field shapes of real pytest projects (issue 24), reproduced with small repositories of our own
and the real tools (pytest, coverage.py, git, bubblewrap): tests inherited from another test
module, and the project's own coverage configuration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.audit.run import audit_repo
from tests.field_repos import make_repo

pytestmark = pytest.mark.slow

SHAPES = {
    "pyproject.toml": '[project]\nname = "shapes"\nversion = "1.0"\n',
    "src/shapes/__init__.py": "",
    "src/shapes/square.py": (
        "def area(side):\n    return side * side\n\n\ndef perimeter(side):\n    return 4 * side\n"
    ),
    "src/shapes/circle.py": "def area(r):\n    return 3 * r * r\n",
}


def test_tests_of_an_inherited_class_count_for_the_module_that_collects_them(
    tmp_path: Path,
) -> None:
    files = {
        **SHAPES,
        "tests/__init__.py": "",
        # The shared cases live in one module; the class pytest collects them through is
        # another module's, which is where they run, pass and fail.
        "tests/cases.py": (
            "class AreaCases:\n    area = None\n\n"
            "    def test_unit(self):\n        assert type(self).area(1) == 1\n\n"
            "    def test_two(self):\n        assert type(self).area(2) == 4\n"
        ),
        "tests/test_square.py": (
            "from shapes.square import area, perimeter\nfrom tests.cases import AreaCases\n\n\n"
            "class TestSquare(AreaCases):\n    area = staticmethod(area)\n\n"
            "    def test_perimeter(self):\n        assert perimeter(1) == 4\n"
        ),
        "tests/test_circle.py": (
            "from shapes.circle import area\nfrom tests.cases import AreaCases\n\n\n"
            "class TestCircle(AreaCases):\n    area = staticmethod(area)\n"
        ),
    }
    repo = make_repo(tmp_path / "shapes", files)
    report = audit_repo(repo)
    assert report.suite.ran, report.suite.problem
    by = {f.source: f for f in report.files}
    square, circle = by["src/shapes/square.py"], by["src/shapes/circle.py"]
    assert square.specs == ["tests/test_square.py"] and square.status == "tested"
    assert square.tests.model_dump(include={"tests", "passed", "failed"}) == {
        "tests": 3,
        "passed": 3,
        "failed": 0,
    }
    # Both inherited tests fail for the circle (3 * r * r): they are its tests, not tests of
    # the module that defines them.
    assert circle.status == "failing"
    assert circle.tests.model_dump(include={"tests", "passed", "failed"}) == {
        "tests": 2,
        "passed": 0,
        "failed": 2,
    }
    assert report.summary.tests.tests == 5 and report.summary.specs_failing == 1


def _own_coverage(repo: Path, tmp_path: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    """coverage.py's own per-file figures of the project's suite, run by hand."""
    data = tmp_path / "own.coverage"
    out = tmp_path / "own.json"
    env_cmd = [sys.executable, "-m", "coverage"]
    subprocess.run(
        [*env_cmd, "run", f"--data-file={data}", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        check=True,
        capture_output=True,
        env={"PYTHONPATH": str(repo / "src"), "PATH": "/usr/bin:/bin"},
    )
    subprocess.run(
        [*env_cmd, "json", f"--data-file={data}", "-o", str(out), "-q"],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    return json.loads(out.read_text())["files"]  # type: ignore[no-any-return]


def test_the_projects_coverage_configuration_decides_what_is_measured(tmp_path: Path) -> None:
    files = {
        "pyproject.toml": (
            '[project]\nname = "shapes"\nversion = "1.0"\n\n'
            '[tool.coverage.run]\nsource = ["shapes"]\nomit = ["shapes/_vendored/*"]\n'
        ),
        "shapes/__init__.py": "",
        "shapes/square.py": SHAPES["src/shapes/square.py"],
        "shapes/_vendored/__init__.py": "",
        "shapes/_vendored/sixish.py": "def text(x):\n    return str(x)\n\n\nX = text(1)\n",
        # A build helper at the top: outside the measured `source`, not a source to test.
        "make_tables.py": "def main():\n    return 0\n",
        "tests/test_square.py": (
            "from shapes.square import area\nfrom shapes._vendored.sixish import text\n\n\n"
            "def test_area():\n    assert text(area(2)) == '4'\n"
        ),
    }
    repo = make_repo(tmp_path / "shapes", files)
    report = audit_repo(repo)
    assert report.suite.ran, report.suite.problem
    own = _own_coverage(repo, tmp_path)
    # What coverage.py measures by the project's configuration, and nothing else.
    assert sorted(own) == ["shapes/__init__.py", "shapes/square.py"]
    assert sorted(f.source for f in report.files) == ["shapes/square.py"]
    (square,) = report.files
    assert square.coverage * 100 == pytest.approx(
        own["shapes/square.py"]["summary"]["percent_covered"], abs=0.01
    )
    assert square.uncovered_lines == own["shapes/square.py"]["missing_lines"]


def test_a_coverage_report_that_fails_is_an_error_not_zero_coverage(tmp_path: Path) -> None:
    # A test that removes a module it ran: coverage.py cannot report it afterwards.
    files = {
        **SHAPES,
        "src/shapes/scratch.py": "def made():\n    return 1\n",
        "tests/test_square.py": (
            "import os\n\nimport shapes.scratch\nfrom shapes.square import area\n\n\n"
            "def test_area():\n    assert area(2) == 4 and shapes.scratch.made() == 1\n"
            "    os.remove(shapes.scratch.__file__)\n"
        ),
    }
    repo = make_repo(tmp_path / "shapes", files)
    report = audit_repo(repo)
    assert report.suite.ran and report.summary.tests.passed == 1
    (error,) = report.errors
    assert error.startswith("coverage json: exit 1: No source for code:"), error
    assert "scratch.py" in error and report.exit_code() == 1


def test_a_subprocess_of_a_flat_layouts_test_imports_the_worktrees_code(tmp_path: Path) -> None:
    files = {
        "setup.py": "from setuptools import setup\nsetup(name='flat')\n",
        "flat/__init__.py": "NAME = 'the worktree'\n",
        "tools/show.py": "import flat\nprint(flat.NAME)\n",
        "tests/test_tool.py": (
            "import subprocess\nimport sys\n\n\ndef test_tool_runs():\n"
            "    done = subprocess.run([sys.executable, 'tools/show.py'], capture_output=True,"
            " text=True)\n    assert done.stdout == 'the worktree\\n', done.stderr\n"
        ),
    }
    repo = make_repo(tmp_path / "flat", files)
    report = audit_repo(repo)
    assert report.suite.ran, report.suite.problem
    assert report.summary.tests.passed == 1, report.summary.tests
