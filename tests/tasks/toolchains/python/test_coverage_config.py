"""The project's coverage configuration as coverage.py reads it: which file, which settings, and
which project files it measures (checked against coverage.py's own choice)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.toolchains.python.coverage_config import coverage_config
from tasks.toolchains.python.run import OMIT, measured_files
from tests.field_repos import write_tree

pytestmark = pytest.mark.slow  # real coverage.py runs

TREE = {
    "pkg/__init__.py": "",
    "pkg/core.py": "X = 1\n",
    "pkg/_vendor/__init__.py": "",
    "pkg/_vendor/lib.py": "Y = 2\n",
    "pkg/sub/gen_tables.py": "Z = 3\n",
    "tools/build.py": "W = 4\n",
    "driver.py": (
        "import pkg.core, pkg._vendor.lib, pkg.sub.gen_tables\n"
        "import runpy\nrunpy.run_path('tools/build.py')\n"
    ),
}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (".coveragerc", "[run]\nsource = pkg\nomit =\n    pkg/_vendor/*\n    */gen_*.py\n"),
        ("setup.cfg", "[coverage:run]\nsource = pkg\nomit = pkg/_vendor/*, */gen_*.py\n"),
        ("tox.ini", "[coverage:run]\nsource = pkg\nomit = pkg/_vendor/*,*/gen_*.py\n"),
        (
            "pyproject.toml",
            '[tool.coverage.run]\nsource = ["pkg"]\nomit = ["pkg/_vendor/*", "*/gen_*.py"]\n',
        ),
    ],
)
def test_measured_files_are_the_ones_coverage_py_measures(
    tmp_path: Path, name: str, text: str
) -> None:
    repo = write_tree(tmp_path / "p", {**TREE, name: text})
    config = coverage_config(repo)
    assert config.file == name and config.source == ("pkg",) and config.chooses_sources
    cov = [sys.executable, "-m", "coverage"]
    subprocess.run([*cov, "run", "driver.py"], cwd=repo, check=True, capture_output=True)
    subprocess.run([*cov, "json", "-o", "c.json"], cwd=repo, check=True, capture_output=True)
    theirs = set(json.loads((repo / "c.json").read_text())["files"])
    ours = {f for f in TREE if config.measures(repo, f)}
    assert ours == theirs == {"pkg/__init__.py", "pkg/core.py"}
    # The run measures the project's source and keeps its omit beside ours.
    omit = f"--omit={','.join((*config.run_omit, OMIT))}"
    assert measured_files(repo) == ["--source=pkg", omit]


def test_a_source_package_is_given_as_its_directory(tmp_path: Path) -> None:
    # A package the tests never import is found only through its directory.
    files = {"src/pkg/__init__.py": "", "src/pkg/sub/__init__.py": "", "src/pkg/sub/m.py": ""}
    text = '[tool.coverage.run]\nsource_pkgs = ["pkg.sub", "elsewhere"]\n'
    repo = write_tree(tmp_path / "p", {**files, "pyproject.toml": text})
    assert measured_files(repo)[0] == "--source=src/pkg/sub,elsewhere"
    assert coverage_config(repo).measures(repo, "src/pkg/sub/m.py")
    assert not coverage_config(repo).measures(repo, "src/pkg/__init__.py")


def test_without_configuration_everything_is_measured_and_our_source_is_given(
    tmp_path: Path,
) -> None:
    # A setup.cfg without coverage sections is not coverage's configuration.
    repo = write_tree(tmp_path / "p", {**TREE, "setup.cfg": "[metadata]\nname = pkg\n"})
    config = coverage_config(repo)
    assert config.file is None and not config.chooses_sources
    assert all(config.measures(repo, f) for f in TREE)
    assert measured_files(repo) == ["--source=.", f"--omit={OMIT}"]


def test_include_patterns_and_report_omit(tmp_path: Path) -> None:
    text = "[run]\ninclude = pkg/*\n[report]\nomit = **/lib.py\n"
    repo = write_tree(tmp_path / "p", {**TREE, ".coveragerc": text})
    config = coverage_config(repo)
    got = sorted(f for f in TREE if config.measures(repo, f))
    assert got == [
        "pkg/__init__.py",
        "pkg/_vendor/__init__.py",
        "pkg/core.py",
        "pkg/sub/gen_tables.py",
    ]
    assert measured_files(repo) == [f"--omit={OMIT}"]
