"""The python-pytest toolchain: pytest (JUnit XML), coverage.py (JSON report) and ruff.

The tests run with the interpreter the settings name (``python``, e.g. the project's own
virtualenv, which must have pytest and coverage: a project with its own dependencies needs
that), by default with this project's (``sys.executable``, the Autopilot venv, which ships
pytest and coverage). Either way the target is not installed into it: it must find its own
package through its pytest configuration (``pythonpath = ["src"]``) or a conftest.py, as the
example project does. ruff always runs from the Autopilot venv: it needs no project code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError
from defusedxml.ElementTree import parse as parse_xml

from tasks.coverage import parse_coverage
from tasks.errors import CoverageError
from tasks.stacktrace import locations_from_trace
from tasks.toolchains.base import (
    LINT_TIMEOUT_S,
    CommandRunner,
    Toolchain,
    ToolchainError,
    join_messages,
    keep_reports,
    relative_path,
    remove_scratch,
    scratch_dir,
    tail,
)
from tasks.types import (
    CommandResult,
    FileCoverage,
    LintOffense,
    TestCaseResult,
    TestStatus,
    ValidationResult,
)

log = logging.getLogger(__name__)

#: Never measured: tests, virtualenvs and our own scratch space.
OMIT = "tests/*,*/tests/*,test_*.py,*_test.py,conftest.py,*/conftest.py,.venv/*,.autopilot-tmp/*"
#: pytest exit codes that mean the run never got to (all) the tests: interrupted by collection
#: errors, internal error, usage error.
_NOT_LOADED_EXITS = (2, 3, 4)
# No bytecode in the worktree; no pytest plugins of the Autopilot venv (pytest-timeout, anyio)
# loaded into the target: they are ours, not the project's, and cost a second per run.
_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
}


def source_root(repo: Path) -> str:
    """What coverage measures: ``src`` for a src layout, else the repository root."""
    return "src" if (repo / "src").is_dir() else "."


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
    python: str | None = None,
) -> tuple[ValidationResult, dict[str, FileCoverage]]:
    """Run test files (or the suite) under coverage.py with a JUnit XML report.

    Collection errors make the result not loaded; the coverage JSON gives every measured file
    (unimported ones at 0 %). `python` is the interpreter (default: this one). See
    :meth:`Toolchain.run_specs` for the other arguments.
    """
    repo = repo.resolve()
    run_dir = scratch_dir(repo)
    try:
        data_file = run_dir / ".coverage"
        xml_out = run_dir / "junit.xml"
        json_out = run_dir / "coverage.json"
        py = python or sys.executable
        cov = [py, "-m", "coverage"]
        measure = [
            *cov,
            "run",
            f"--data-file={data_file}",
            f"--source={source_root(repo)}",
            f"--omit={OMIT}",
        ]
        argv = [
            *(measure if coverage else [py]),
            "-m",
            "pytest",
            f"--junitxml={xml_out}",
            # xunit1 keeps the file and line attributes on each testcase.
            "-o",
            "junit_family=xunit1",
            "-p",
            "no:cacheprovider",
            "-q",
            *[f"--ignore={path}" for path in exclude or []],
            *specs,
        ]
        cmd = runner.run(argv, cwd=repo, env=_ENV, timeout_s=timeout_s)
        result = parse_pytest_run(repo, xml_out, cmd)
        result.specs = list(specs)
        result.target = target
        files: dict[str, FileCoverage] = {}
        if data_file.is_file():
            report = runner.run(
                [*cov, "json", f"--data-file={data_file}", "-o", str(json_out), "-q"],
                cwd=repo,
                env=_ENV,
                timeout_s=LINT_TIMEOUT_S,
            )
            result.duration_s += report.duration_s
            files = _coverage(repo, json_out, report)
        if target is not None:
            result.coverage = files.get(target)
        if reports_dir is not None:
            keep_reports(run_dir, reports_dir)
        return result, files
    finally:
        remove_scratch(run_dir)


def _coverage(repo: Path, json_out: Path, cmd: CommandResult) -> dict[str, FileCoverage]:
    if not json_out.is_file():
        log.warning("%s: coverage json failed (exit %s): %s", repo, cmd.exit_code, tail(cmd.stderr))
        return {}
    try:
        return parse_coverage(json_out, repo)
    except CoverageError as exc:
        log.warning("coverage of %s unusable: %s", repo, exc)
        return {}


def parse_pytest_run(repo: Path, xml_out: Path, cmd: CommandResult) -> ValidationResult:
    """Turn one pytest command and its JUnit XML into a ValidationResult.

    Collection errors (pytest writes them as a testcase with the message "collection
    failure"), exit codes 2-4, or a missing report mean the tests did not load.
    """
    base = ValidationResult(
        toolchain="python-pytest", loaded=False, duration_s=cmd.duration_s, reason=cmd.reason
    )
    output = tail(cmd.stdout + "\n" + cmd.stderr)
    try:
        root = parse_xml(str(xml_out)).getroot()
    except (OSError, ParseError, DefusedXmlException) as exc:
        why = cmd.reason or f"no usable JUnit XML report ({exc.__class__.__name__})"
        base.load_error = f"pytest exited {cmd.exit_code}: {why}\n{output}".strip()
        return base
    collection_errors: list[str] = []
    for case in root.iter("testcase"):
        example, collection_error = _case(repo, case)
        if collection_error is not None:
            collection_errors.append(collection_error)
        else:
            base.examples.append(example)
    if collection_errors or cmd.exit_code in _NOT_LOADED_EXITS:
        base.load_error = join_messages(collection_errors) or output
        return base
    base.loaded = True
    return base


def _case(repo: Path, case: Any) -> tuple[TestCaseResult, str | None]:
    classname = case.get("classname", "")
    name = case.get("name", "")
    file = case.get("file")
    line_attr = case.get("line")
    status: TestStatus = "passed"
    message = error_type = trace = None
    for tag, mapped in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        node = case.find(tag)
        if node is not None:
            status = mapped  # type: ignore[assignment]
            message = node.get("message")
            error_type = node.get("type")
            trace = node.text
            break
    if status == "error" and not classname and message == "collection failure":
        # pytest's own wording, so readers that look for "ERROR collecting <file>" find it.
        return _placeholder(name), f"ERROR collecting {file or name}\n{trace or ''}".strip()
    locations = (
        [loc for loc in locations_from_trace(trace, repo) if not loc.path.startswith("/")]
        if trace
        else []
    )
    try:
        duration = float(case.get("time") or 0.0)
    except ValueError:
        duration = 0.0
    # pytest's xunit1 line is 0-based (it is the `def` line minus one).
    line = int(line_attr) + 1 if line_attr and line_attr.isdigit() else None
    return (
        TestCaseResult(
            id=f"{file}::{name}" if file else f"{classname}::{name}",
            name=name,
            classname=classname,
            file=file,
            line=line,
            status=status,
            duration=duration,
            message=message,
            error_type=error_type,
            trace=trace,
            locations=locations,
        ),
        None,
    )


def _placeholder(name: str) -> TestCaseResult:
    return TestCaseResult(id=name, name=name, status="error")


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
        why = cmd.reason or f"exit {cmd.exit_code}"
        raise ToolchainError(f"ruff on {', '.join(files)}: {why}: {tail(cmd.stderr, 500)}")
    return parse_ruff_json(cmd.stdout, repo)


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
    lint = staticmethod(lint)

    def __init__(self, python: str | None = None) -> None:
        self.configured = python
        self.python = python or sys.executable

    def run_tests(
        self, *args: Any, **kwargs: Any
    ) -> tuple[ValidationResult, dict[str, FileCoverage]]:
        """:func:`run_tests` with this toolchain's interpreter."""
        return run_tests(*args, python=self.python, **kwargs)

    def config_digest(self, repo: Path) -> str:
        # Another interpreter is another set of installed packages: another validation. The
        # default is named as such, not by its path, so the key holds wherever Autopilot lives.
        python = self.configured or "(autopilot's own)"
        return hashlib.sha256(f"{super().config_digest(repo)}\0{python}".encode()).hexdigest()
