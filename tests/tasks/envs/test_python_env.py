"""A Python project whose tests need a package from the package index runs through a prepared
virtualenv: built once (real uv, real index), reused, run by the real python-pytest toolchain in
the bwrap sandbox."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.envs import EnvProblem, EnvSettings, PreparedEnv, prepare_environment
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.envs_projects import py_words

pytestmark = pytest.mark.slow
PYTHON = get_toolchain("python-pytest").env_builder()


def _run(project: Path, env: PreparedEnv):  # type: ignore[no-untyped-def]
    tc = get_toolchain("python-pytest", python=env.interpreter, home=Path(env.path).parents[1])
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=120),
        project,
        toolchain_dirs=env.needs(project).dirs,
    )
    return tc.run_specs(project, ["tests/test_words.py"], "src/words/__init__.py", runner)


@pytest.mark.parametrize("source", ["uv.lock", "requirements.txt"])
def test_package_from_index_runs_through_env_built_once(tmp_path: Path, source: str) -> None:
    project = py_words(tmp_path)
    if source == "requirements.txt":
        (project / "uv.lock").unlink()
    home = tmp_path / "home"
    first = prepare_environment(project, PYTHON, home=home)
    assert isinstance(first, PreparedEnv), first
    assert first.built and first.interpreter is not None
    record = json.loads((Path(first.path) / ".autopilot" / "env.json").read_text())
    if source == "uv.lock":
        assert first.inputs == ["pyproject.toml", "uv.lock"]
        assert "sync --frozen --no-install-project" in record["commands"][0]
    else:
        assert first.inputs == ["pyproject.toml", "requirements.txt"]
        assert any("-r requirements.txt" in c for c in record["commands"])
    probe = subprocess.run(
        [
            first.interpreter,
            "-c",
            "import inflection, pytest, coverage; print(inflection.__file__)",
        ],
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0 and probe.stdout.startswith(first.path), probe.stderr
    # The project itself is not installed: the worktree's code is what the tests import.
    words = subprocess.run([first.interpreter, "-c", "import words"], capture_output=True)
    assert words.returncode != 0

    result = _run(project, first)
    assert result.loaded and result.passed, result.load_error
    assert result.coverage is not None and result.coverage.ratio == 1.0

    log_before = Path(first.log).read_bytes()
    second = prepare_environment(project, PYTHON, home=home)
    assert isinstance(second, PreparedEnv) and not second.built
    assert second.path == first.path and Path(second.log).read_bytes() == log_before


def test_unknown_package_offline_is_one_line(tmp_path: Path) -> None:
    project = py_words(tmp_path)
    (project / "uv.lock").unlink()
    (project / "requirements.txt").write_text("autopilot-surely-not-a-package==9.9.9\n")
    got = prepare_environment(
        project, PYTHON, home=tmp_path / "home", settings=EnvSettings(network=False)
    )
    assert isinstance(got, EnvProblem), got
    assert got.cause == "unknown_package", got.message
    assert "autopilot-surely-not-a-package" in got.message and "\n" not in got.one_line()


def test_requires_python_the_machine_cannot_meet(tmp_path: Path) -> None:
    project = py_words(tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(">=3.11", ">=3.99"))
    got = prepare_environment(project, PYTHON, home=tmp_path / "home")
    assert isinstance(got, EnvProblem), got
    assert got.cause in ("toolchain_mismatch", "lock_unresolvable"), got.message
