"""Test contexts read from coverage.py's data file, checked against coverage.py's own reading
of the same file (line and branch mode)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.core.errors import CoverageError
from tasks.facts.coverage_data import load_data_contexts, numbits_to_lines
from tests.field_repos import write_tree

pytestmark = pytest.mark.slow  # real coverage.py runs

DRIVER = """\
import sys
import coverage
cov = coverage.Coverage(data_file=sys.argv[1], branch=sys.argv[2] == "branch")
cov.start()
import pkg.mod
for test in ("tests/test_a.py", "tests/test_b.py"):
    cov.switch_context(sys.argv[3] + "/" + test)
    pkg.mod.both()
    if test.endswith("a.py"):
        pkg.mod.only_a(True)
cov.switch_context("/elsewhere/test_x.py")
pkg.mod.both()
cov.stop()
cov.save()
"""
MOD = (
    "def both():\n    return 1\n\n\n"
    "def only_a(flag):\n    if flag:\n        return 2\n    return 3\n"
)
ORACLE = """\
import json, sys
import coverage
data = coverage.CoverageData(sys.argv[1])
data.read()
out = {}
for path in data.measured_files():
    for line, names in data.contexts_by_lineno(path).items():
        for name in names:
            out.setdefault(path, {}).setdefault(name, []).append(line)
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode", ["lines", "branch"])
def test_contexts_equal_coverage_pys_own_reading(tmp_path: Path, mode: str) -> None:
    repo = write_tree(tmp_path / "p", {"pkg/__init__.py": "", "pkg/mod.py": MOD})
    data = tmp_path / "cov.data"
    run = [sys.executable, "-c", DRIVER, str(data), mode, str(repo)]
    subprocess.run(run, cwd=repo, check=True, capture_output=True)
    got = load_data_contexts(data, repo)
    oracle = subprocess.run(
        [sys.executable, "-c", ORACLE, str(data)], check=True, capture_output=True, text=True
    )
    truth = {
        Path(path).relative_to(repo).as_posix(): {
            Path(name).relative_to(repo).as_posix(): set(lines)
            for name, lines in by.items()
            if name.startswith(str(repo))
        }
        for path, by in json.loads(oracle.stdout).items()
    }
    truth = {k: v for k, v in truth.items() if v}
    assert got == truth
    assert got["pkg/mod.py"] == {"tests/test_a.py": {2, 6, 7}, "tests/test_b.py": {2}}


def test_numbits_and_a_file_that_is_no_data(tmp_path: Path) -> None:
    assert numbits_to_lines(bytes([0b00000110, 0, 0b1])) == {1, 2, 16}
    bad = tmp_path / "x.data"
    bad.write_text("not sqlite")
    with pytest.raises(CoverageError, match=r"x\.data"):
        load_data_contexts(bad, tmp_path)
