"""pytest runs with coverage: faithful to the project, measured by coverage.py, read back.

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
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from tasks.core.errors import CoverageError
from tasks.facts.coverage import parse_coverage
from tasks.facts.coverage_data import load_data_contexts
from tasks.facts.evidence import body_lines_run
from tasks.toolchains.base import (
    LINT_TIMEOUT_S,
    CommandRunner,
    SuiteResult,
    Toolchain,
    ToolchainError,
)
from tasks.toolchains.python.coverage_config import coverage_config
from tasks.toolchains.python.env import isolated_python
from tasks.toolchains.python.project import package_roots, project_packages, write_version_files
from tasks.toolchains.python.results import parse_run
from tasks.toolchains.runs import (
    copy_resource,
    keep_reports,
    not_run,
    remove_scratch,
    scratch_dir,
    tail,
)

log = logging.getLogger(__name__)

#: Never measured: tests, virtualenvs and our own scratch space.
OMIT = "tests/*,*/tests/*,test_*.py,*_test.py,conftest.py,*/conftest.py,.venv/*,.autopilot-tmp/*"
PLUGIN = "autopilot_pytest_plugin.py"
#: No bytecode in the worktree; a fixed hash seed so re-runs compare.
ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


def source_root(repo: Path) -> str:
    """What coverage measures: ``src`` for a src layout, else the repository root."""
    return "src" if (repo / "src").is_dir() else "."


def measured_files(repo: Path) -> list[str]:
    """``coverage run``'s options for what it measures, the project's configuration first:
    its ``source``/``source_pkgs`` (a package of the worktree given as its directory, so an
    unimported one is measured at 0 %), nothing when it measures by ``include``, else the
    source root; and ``--omit`` with the project's ``[run] omit`` kept (an option replaces
    the configuration's value; ours only adds tests and scratch)."""
    config = coverage_config(repo)
    source: list[str] = []
    if config.source or config.source_pkgs:
        source = [f"--source={','.join(config.source_dirs(repo))}"]
    elif not config.include:
        source = [f"--source={source_root(repo)}"]
    return [*source, f"--omit={','.join((*config.run_omit, OMIT))}"]


def default_home() -> Path:
    """``$AUTOPILOT_HOME`` (``~/.autopilot``): where the isolated test environment lives."""
    from tasks.core.config import load_settings

    return load_settings().home


def run_tests(
    chain: Toolchain,
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
        copy_resource(chain.resource(PLUGIN), run_dir)
        status_file = run_dir / "status.json"
        env = environment(repo, run_dir, roots, packages, status_file, own=own)
        if contexts and coverage:
            env["AUTOPILOT_CONTEXTS"] = "1"
        try:
            prepared += chain.prepare_worktree(repo, runner, env)
        except ToolchainError as exc:
            done = not_run(chain.name, specs, target, "prepare", str(exc))
            done.prepared = prepared
            return done
        xml_out = run_dir / "junit.xml"
        args, selected = select_files(repo, run_dir, specs)
        env |= selected
        argv = pytest_argv(repo, py, run_dir, xml_out, args, exclude, coverage=coverage)
        cmd = runner.run(argv, cwd=repo, env=env, timeout_s=timeout_s)
        status = read_status(status_file)
        label = py if not own else "Autopilot's isolated interpreter (no project dependencies)"
        result, load_errors = parse_run(
            repo, xml_out, cmd, status=status, packages=packages, python=label
        )
        result.specs = list(specs)
        result.target = target
        suite = SuiteResult(validation=result, prepared=prepared, load_errors=load_errors)
        if coverage and (result.loaded or result.examples):
            # The run's own limit (None: the sandbox's), never less than a linter's.
            report_s = None if timeout_s is None else max(LINT_TIMEOUT_S, timeout_s)
            measure(
                chain,
                repo,
                runner,
                py,
                env,
                run_dir,
                suite,
                contexts=contexts,
                target=target,
                timeout_s=report_s,
            )
        if target is not None:
            result.coverage = suite.files.get(target)
        if reports_dir is not None:
            keep_reports(run_dir, reports_dir, {*chain.resources, *chain.cache_dirs})
        return suite
    finally:
        remove_scratch(run_dir)


def environment(
    repo: Path,
    run_dir: Path,
    roots: list[Path],
    packages: list[str],
    status_file: Path,
    *,
    own: bool,
) -> dict[str, str]:
    """The run's environment: the worktree's package roots first on the import path, and what
    Autopilot's plugin needs to check where the project's packages come from."""
    env = {
        **ENV,
        # A flat layout's root too: a test's own subprocess imports the worktree's code, as
        # it would through an editable install.
        "PYTHONPATH": os.pathsep.join([str(run_dir), *map(str, roots or [repo])]),
        "AUTOPILOT_STATUS": str(status_file),
        "AUTOPILOT_ROOTS": json.dumps([str(r) for r in [*roots, repo]]),
        "AUTOPILOT_PACKAGES": json.dumps(packages),
    }
    if own:
        # The isolated interpreter has no plugins to load, and the project's own (which its
        # configuration may name) are not there: a usage error says so.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


#: More test files than this are given to pytest as their directories, the plugin selecting
#: the files and keeping their order (pytest collects a directory once per file argument).
MANY_FILES = 20


def select_files(repo: Path, run_dir: Path, specs: list[str]) -> tuple[list[str], dict[str, str]]:
    """The specs as pytest's arguments and the environment that goes with them: a long list of
    plain test files becomes their top directories plus ``AUTOPILOT_SELECT`` (the plugin then
    collects only those files and runs them in the given order); anything else stays as is."""
    if len(specs) <= MANY_FILES or any("::" in s for s in specs):
        return specs, {}
    # As pytest names them (from the working directory, links not resolved); inside the repo.
    paths = [Path(os.path.normpath(repo / s)) for s in specs]
    if not all(p.is_file() and p.resolve().is_relative_to(repo.resolve()) for p in paths):
        return specs, {}
    listing = run_dir / "selection.txt"
    listing.write_text("".join(f"{p}\n" for p in paths), encoding="utf-8")
    dirs: list[Path] = []
    for parent in dict.fromkeys(p.parent for p in paths):
        if not any(parent.is_relative_to(d) for d in dirs):
            dirs = [d for d in dirs if not d.is_relative_to(parent)] + [parent]
    return [str(d.relative_to(repo)) or "." for d in dirs], {"AUTOPILOT_SELECT": str(listing)}


def pytest_argv(
    repo: Path,
    py: str,
    run_dir: Path,
    xml_out: Path | None,
    specs: list[str],
    exclude: list[str] | None,
    *,
    coverage: bool,
    module: str = "pytest",
) -> list[str]:
    """pytest (under ``coverage run`` when measuring) with our plugin and a JUnit XML report
    (`xml_out`; None when `module`, a runner of several sessions, names one per session)."""
    measure = [
        py,
        "-m",
        "coverage",
        "run",
        "--branch",
        f"--data-file={run_dir / '.coverage'}",
        *measured_files(repo),
    ]
    return [
        *(measure if coverage else [py]),
        "-m",
        module,
        "-p",
        PLUGIN.removesuffix(".py"),
        *([f"--junitxml={xml_out}"] if xml_out is not None else []),
        # xunit1 keeps the file and line attributes on each testcase.
        "-o",
        "junit_family=xunit1",
        "-o",
        f"cache_dir={run_dir / '.pytest_cache'}",
        "-q",
        *[f"--ignore={path}" for path in exclude or []],
        *specs,
    ]


def read_status(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def measure(
    chain: Toolchain,
    repo: Path,
    runner: CommandRunner,
    py: str,
    env: dict[str, str],
    run_dir: Path,
    suite: SuiteResult,
    *,
    contexts: bool,
    target: str | None = None,
    timeout_s: float | None = LINT_TIMEOUT_S,
) -> None:
    """The coverage JSON of the run (combined first when the project's configuration made
    coverage write parallel data files) into `suite`: of `target` alone when one is given
    (without `contexts`), else of every measured file (unimported ones at 0 %). A report that
    could not be made is one line in ``suite.errors`` (a large suite's report with contexts
    takes as long as a run may: `timeout_s`), never coverage read as 0 %."""
    data_file = run_dir / ".coverage"
    parallel = sorted(run_dir.glob(".coverage.*"))
    cov = [py, "-m", "coverage"]
    if parallel and not data_file.is_file():
        runner.run(
            [*cov, "combine", f"--data-file={data_file}", "-q", *map(str, parallel)],
            cwd=repo,
            env=env,
            timeout_s=timeout_s,
        )
    if not data_file.is_file():
        return
    json_out = run_dir / "coverage.json"
    argv = [*cov, "json", f"--data-file={data_file}", "-o", str(json_out), "-q"]
    # Reporting every file of the source root parses each of them, for every file job's run:
    # only the target's coverage is read then (a name with glob characters is not a filter).
    alone = not contexts and target is not None and not any(c in target for c in "*?[]")
    if alone:
        argv.append(f"--include={repo / str(target)}")
    report = runner.run(argv, cwd=repo, env=env, timeout_s=timeout_s)
    suite.validation.duration_s += report.duration_s
    if not json_out.is_file() and "No data to report" in report.stdout + report.stderr:
        suite.files = {}  # nothing was measured (the target not at all): no coverage
        return
    try:
        if report.reason or not json_out.is_file():
            said = tail(report.stderr or report.stdout).strip().replace("\n", " ")
            raise CoverageError(report.reason or f"exit {report.exit_code}: {said}")
        suite.files = parse_coverage(json_out, repo)
    except CoverageError as exc:
        log.warning("%s: coverage json failed: %s", repo, exc)
        suite.errors.append(f"coverage json: {exc}")
        return
    if contexts:
        # From the data file: the JSON report of every line's contexts can outgrow any limit.
        try:
            found = load_data_contexts(data_file, repo)
            suite.set_evidence(body_lines_run(found, repo, chain.body_lines))
        except CoverageError as exc:
            log.warning("test contexts of %s unusable: %s", repo, exc)
