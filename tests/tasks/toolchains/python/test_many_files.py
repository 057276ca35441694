"""A long list of test files (the whole-branch proof names every file, in a varied order) runs
exactly those files, in that order, without pytest collecting their directory once per file:
real pytest, coverage.py and bwrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.sandbox.make import make_runner
from tasks.toolchains.python.run import MANY_FILES, select_files
from tasks.toolchains.registry import get_toolchain

TC = get_toolchain("python-pytest")
FILES = MANY_FILES + 5

PYPROJECT = """\
[project]
name = "many"
version = "0.1.0"

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
TEST = """\
def test_{n:02d}_first():
    assert True


def test_{n:02d}_second():
    assert {n} == {n}
"""
#: Not among the files asked for: collecting it would fail the run.
BROKEN = "import not_a_module_anywhere\n"


@pytest.fixture
def many(tmp_path: Path) -> Path:
    root = tmp_path / "many"
    (root / "src" / "many").mkdir(parents=True)
    (root / "tests" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / "src" / "many" / "__init__.py").write_text("", encoding="utf-8")
    for n in range(FILES):
        where = root / "tests" / ("deep" if n % 5 == 0 else "") / f"test_{n:02d}.py"
        where.write_text(TEST.format(n=n), encoding="utf-8")
    (root / "tests" / "test_broken.py").write_text(BROKEN, encoding="utf-8")
    return root


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.glob("tests/**/test_[0-9]*.py"))


@pytest.mark.parametrize("order", ["as listed", "reversed"])
def test_a_long_list_runs_those_files_in_that_order(many: Path, order: str) -> None:
    files = _files(many)
    if order == "reversed":
        files.reverse()
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=many)
    result = TC.run_specs(many, files, None, runner, coverage=False)
    assert result.loaded, result.load_error
    assert result.passed
    assert [e.status for e in result.examples] == ["passed"] * 2 * FILES
    ran = list(dict.fromkeys(e.file for e in result.examples))
    assert ran == files  # every file asked for, in that order; test_broken.py not collected
    first = [e.name for e in result.examples if e.file == files[0]]
    assert first == sorted(first)  # a file's own tests keep their order


def test_repeats_of_a_long_list_keep_the_selection(many: Path) -> None:
    files = list(reversed(_files(many)))
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=many)
    runs = TC.run_repeats(many, files, None, runner, runs=2)
    assert len(runs) == 2
    for run in runs:
        assert run.loaded, run.load_error
        assert list(dict.fromkeys(e.file for e in run.examples)) == files


def test_short_lists_and_test_ids_stay_as_given(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    names = [f"tests/test_{n:02d}.py" for n in range(MANY_FILES + 1)]
    for name in names:
        (tmp_path / name).write_text("", encoding="utf-8")
    assert select_files(tmp_path, tmp_path, names[:MANY_FILES]) == (names[:MANY_FILES], {})
    with_id = [*names[:-1], f"{names[-1]}::test_x"]
    assert select_files(tmp_path, tmp_path, with_id) == (with_id, {})
    outside = [*names[:-1], "../elsewhere/test_x.py"]
    assert select_files(tmp_path, tmp_path, outside) == (outside, {})
    # A listed link that leads out of the repository is not selected through a directory.
    outside_dir = tmp_path.parent / f"{tmp_path.name}-outside"
    outside_dir.mkdir()
    (outside_dir / "test_secret.py").write_text("", encoding="utf-8")
    (tmp_path / "tests" / "test_link.py").symlink_to(outside_dir / "test_secret.py")
    linked = [*names[:-1], "tests/test_link.py"]
    assert select_files(tmp_path, tmp_path, linked) == (linked, {})
    args, env = select_files(tmp_path, tmp_path, names)
    assert args == ["tests"]
    listed = Path(env["AUTOPILOT_SELECT"]).read_text(encoding="utf-8").splitlines()
    assert listed == [str((tmp_path / n).resolve()) for n in names]


def test_every_second_run_goes_in_reverse_in_one_process(many: Path) -> None:
    """The whole-branch proof's two runs: the second runs every test in the reverse order."""
    files = _files(many)
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=many)
    first, second = TC.run_repeats(many, files, None, runner, runs=2, reverse_alternate=True)
    ids = [e.id for e in first.examples]
    assert len(ids) == 2 * FILES and [e.status for e in second.examples] == ["passed"] * 2 * FILES
    assert [e.id for e in second.examples] == list(reversed(ids))
