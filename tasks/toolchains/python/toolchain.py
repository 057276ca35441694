"""The python-pytest toolchain: pytest (JUnit XML), coverage.py (JSON report) and ruff.

A run is faithful to the project:

- **Its interpreter.** The ``python`` setting names the project's own (e.g. its virtualenv):
  pytest's plugins autoload and the project's ``pytest.ini``/``pyproject``/``setup.cfg``/
  ``tox.ini`` options apply, as when its maintainers run it. Without one, the tests run with an
  isolated interpreter that has pytest and coverage and nothing else of Autopilot's environment
  (:mod:`tasks.toolchains.python.env`), plugins off.
- **Its worktree's code.** The worktree's package roots (``src/``, the build configuration's
  package directories) come first on the import path, so an editable install of the user's
  checkout never wins; the plugin Autopilot loads (``resources/autopilot_pytest_plugin.py``)
  re-asserts that order at start-up and reports where the project's packages were imported
  from: a package imported from outside the worktree means the suite did not test the worktree.
- **Its generated files.** Version files that setuptools-scm or hatch-vcs write at install time
  are written into the worktree when missing; ``prepare`` commands run once per worktree.
- **Coverage that coexists with theirs.** ``coverage run`` wraps the session (coverage.py's own
  numbers, the project's coverage configuration for exclusions); a project's pytest-cov steps
  aside as with ``--no-cov`` (its ``--cov`` options stay valid) and pytest-xdist runs in-process.

A run that never got to its tests (usage, internal or collection errors, a conftest that does not
import, a process that ended without pytest's summary, fewer tests reported than collected) is
not loaded, with a :class:`~tasks.core.types.SuiteProblem` naming the real cause.
ruff always runs from the Autopilot venv: it needs no project code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from tasks.core.errors import CoverageError
from tasks.core.types import (
    CommandResult,
    FileCoverage,
    LintOffense,
)
from tasks.facts.coverage import load_coverage_contexts, parse_coverage
from tasks.facts.evidence import exercised_by
from tasks.toolchains.base import (
    LINT_TIMEOUT_S,
    CommandRunner,
    SuiteResult,
    Toolchain,
    ToolchainError,
    copy_resource,
    keep_reports,
    not_run,
    relative_path,
    remove_scratch,
    scratch_dir,
    tail,
)
from tasks.toolchains.diagnose import relative_to_repo
from tasks.toolchains.python.env import isolated_python
from tasks.toolchains.python.layout import package_roots, project_packages, write_version_files
from tasks.toolchains.python.results import parse_pytest_run, parse_run

__all__ = ["PythonPytestToolchain", "lint", "parse_pytest_run", "parse_ruff_json", "run_tests"]

log = logging.getLogger(__name__)

#: Never measured: tests, virtualenvs and our own scratch space.
OMIT = "tests/*,*/tests/*,test_*.py,*_test.py,conftest.py,*/conftest.py,.venv/*,.autopilot-tmp/*"
PLUGIN = "autopilot_pytest_plugin.py"
#: No bytecode in the worktree; a fixed hash seed so re-runs compare.
_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


def source_root(repo: Path) -> str:
    """What coverage measures: ``src`` for a src layout, else the repository root."""
    return "src" if (repo / "src").is_dir() else "."


def default_home() -> Path:
    """``$AUTOPILOT_HOME`` (``~/.autopilot``): where the isolated test environment lives."""
    from tasks.core.config import load_settings

    return load_settings().home


def run_tests(
    repo: Path,
    specs: list[str],
    target: str | None,
    runner: CommandRunner,
    *,
    timeout_s: float | None,
    reports_dir: Path | None,
    exclude: list[str] | None = None,
    coverage: bool = True,
    contexts: bool = False,
    python: str | None = None,
    home: Path | None = None,
    chain: Toolchain | None = None,
) -> SuiteResult:
    """Run test files (or the suite) under coverage.py with a JUnit XML report.

    Collection errors make the result not loaded; the coverage JSON gives every measured file
    (unimported ones at 0 %). `python` is the project's interpreter (None: the isolated one
    built under `home`); `chain` brings the toolchain's ``prepare`` commands. See
    :meth:`Toolchain.run_specs` for the other arguments.
    """
    repo = repo.resolve()
    own = python is None
    py = str(isolated_python(home or default_home())) if own else str(python)
    prepared = write_version_files(repo)
    roots = package_roots(repo)
    packages = project_packages(repo, roots)
    run_dir = scratch_dir(repo)
    try:
        copy_resource(PLUGIN, run_dir)
        status_file = run_dir / "status.json"
        env = {
            **_ENV,
            "PYTHONPATH": os.pathsep.join([str(run_dir), *map(str, roots)]),
            "AUTOPILOT_STATUS": str(status_file),
            "AUTOPILOT_ROOTS": json.dumps([str(r) for r in [*roots, repo]]),
            "AUTOPILOT_PACKAGES": json.dumps(packages),
        }
        if own:
            # The isolated interpreter has no plugins to load, and the project's own (which
            # its configuration may name) are not there: a usage error says so.
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if contexts and coverage:
            env["AUTOPILOT_CONTEXTS"] = "1"
        if chain is not None:
            try:
                prepared += chain.prepare_worktree(repo, runner, env)
            except ToolchainError as exc:
                done = not_run("python-pytest", specs, target, "prepare", str(exc))
                done.prepared = prepared
                return done
        data_file = run_dir / ".coverage"
        xml_out = run_dir / "junit.xml"
        measure = [
            py,
            "-m",
            "coverage",
            "run",
            f"--data-file={data_file}",
            f"--source={source_root(repo)}",
            f"--omit={OMIT}",
        ]
        argv = [
            *(measure if coverage else [py]),
            "-m",
            "pytest",
            "-p",
            PLUGIN.removesuffix(".py"),
            f"--junitxml={xml_out}",
            # xunit1 keeps the file and line attributes on each testcase.
            "-o",
            "junit_family=xunit1",
            "-o",
            f"cache_dir={run_dir / '.pytest_cache'}",
            "-q",
            *[f"--ignore={path}" for path in exclude or []],
            *specs,
        ]
        cmd = runner.run(argv, cwd=repo, env=env, timeout_s=timeout_s)
        status = _read_status(status_file)
        label = py if not own else "Autopilot's isolated interpreter (no project dependencies)"
        result, load_errors = parse_run(
            repo, xml_out, cmd, status=status, packages=packages, python=label
        )
        result.specs = list(specs)
        result.target = target
        suite = SuiteResult(validation=result, prepared=prepared, load_errors=load_errors)
        if coverage and (result.loaded or result.examples):
            _measure(repo, runner, py, env, run_dir, suite, contexts=contexts)
        if target is not None:
            result.coverage = suite.files.get(target)
        if reports_dir is not None:
            keep_reports(run_dir, reports_dir)
        return suite
    finally:
        remove_scratch(run_dir)


def _read_status(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _measure(
    repo: Path,
    runner: CommandRunner,
    py: str,
    env: dict[str, str],
    run_dir: Path,
    suite: SuiteResult,
    *,
    contexts: bool,
) -> None:
    """The coverage JSON of the run (combined first when the project's configuration made
    coverage write parallel data files) into `suite`."""
    data_file = run_dir / ".coverage"
    parallel = sorted(run_dir.glob(".coverage.*"))
    cov = [py, "-m", "coverage"]
    if parallel and not data_file.is_file():
        runner.run(
            [*cov, "combine", f"--data-file={data_file}", "-q", *map(str, parallel)],
            cwd=repo,
            env=env,
            timeout_s=LINT_TIMEOUT_S,
        )
    if not data_file.is_file():
        return
    json_out = run_dir / "coverage.json"
    argv = [*cov, "json", f"--data-file={data_file}", "-o", str(json_out), "-q"]
    if contexts:
        argv.append("--show-contexts")
    report = runner.run(argv, cwd=repo, env=env, timeout_s=LINT_TIMEOUT_S)
    suite.validation.duration_s += report.duration_s
    suite.files = _coverage(repo, json_out, report)
    if contexts and json_out.is_file():
        try:
            suite.tested_by = exercised_by(load_coverage_contexts(json_out, repo), repo)
        except CoverageError as exc:
            log.warning("test contexts of %s unusable: %s", repo, exc)


def _coverage(repo: Path, json_out: Path, cmd: CommandResult) -> dict[str, FileCoverage]:
    if not json_out.is_file():
        log.warning("%s: coverage json failed (exit %s): %s", repo, cmd.exit_code, tail(cmd.stderr))
        return {}
    try:
        return parse_coverage(json_out, repo)
    except CoverageError as exc:
        log.warning("coverage of %s unusable: %s", repo, exc)
        return {}


def lint(
    repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
) -> list[LintOffense]:
    """ruff check the given files (``--fix`` when asked); returns the remaining offences.

    Raises:
        ToolchainError: ruff failed (exit 2: bad configuration, missing file) or printed no JSON.
    """
    if not files:
        return []
    argv = [sys.executable, "-m", "ruff", "check", "--output-format", "json", "--no-cache"]
    if autocorrect:
        argv.append("--fix")
    cmd = runner.run([*argv, "--", *files], cwd=repo, env=_ENV, timeout_s=LINT_TIMEOUT_S)
    if cmd.reason or cmd.exit_code not in (0, 1):
        why = (
            cmd.reason or ruff_error(relative_to_repo(cmd.stderr, repo)) or f"exit {cmd.exit_code}"
        )
        raise ToolchainError(
            f"ruff: {why} (ruff follows the project's ruff configuration: fix it, or lint "
            "with a ruff that reads it)"
        )
    return parse_ruff_json(cmd.stdout, repo)


def ruff_error(stderr: str) -> str:
    """ruff's own account of a failure, in one line: its ``Cause:`` lines (the last is the
    most specific) or its first line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    causes = [ln.removeprefix("Cause:").strip() for ln in lines if ln.startswith("Cause:")]
    if causes:
        detail = next((ln for ln in lines if not re.match(r"(Cause:|\||\d+ \||ruff )", ln)), "")
        parts = [causes[0], causes[-1], detail] if len(causes) > 1 else [causes[0], detail]
        return ": ".join(p for p in dict.fromkeys(parts) if p)
    return lines[0] if lines else ""


def parse_ruff_json(text: str, repo: Path) -> list[LintOffense]:
    """Offences from ``ruff check --output-format json`` output."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, list):
        raise ToolchainError(f"ruff printed no JSON report: {tail(text, 300)!r}")
    offenses: list[LintOffense] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        loc = item.get("location") or {}
        offenses.append(
            LintOffense(
                path=relative_path(str(item.get("filename", "")), repo),
                line=int(loc.get("row") or 0),
                column=int(loc.get("column") or 0),
                rule=str(item.get("code") or "syntax-error"),
                message=str(item.get("message", "")),
                correctable=item.get("fix") is not None,
            )
        )
    return offenses


class PythonPytestToolchain(Toolchain):
    """python-pytest: pytest + coverage.py + ruff."""

    name = "python-pytest"
    config_files = (
        "pyproject.toml",
        "setup.cfg",
        "pytest.ini",
        "tox.ini",
        "ruff.toml",
        ".ruff.toml",
        ".coveragerc",
    )
    resources = (PLUGIN,)
    lint = staticmethod(lint)

    def __init__(
        self, python: str | None = None, prepare: tuple[str, ...] = (), home: Path | None = None
    ) -> None:
        self.configured = python
        self.python = python
        self.prepare = tuple(prepare)
        self.home = home

    def run_tests(self, *args: Any, **kwargs: Any) -> SuiteResult:
        """:func:`run_tests` with this toolchain's interpreter and prepare commands."""
        return run_tests(*args, python=self.python, home=self.home, chain=self, **kwargs)

    def config_digest(self, repo: Path) -> str:
        # Another interpreter is another set of installed packages: another validation. The
        # default is named as such, not by its path, so the key holds wherever Autopilot lives.
        python = self.configured or "(autopilot's own, isolated)"
        return hashlib.sha256(f"{super().config_digest(repo)}\0{python}".encode()).hexdigest()
