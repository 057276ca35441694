"""pytest's results as Autopilot reads them: the JUnit XML report (xunit1: file and line per
case) and the status Autopilot's pytest plugin writes (tests collected, pytest's exit status,
rootdir, where the project's packages were imported from).

A run that did not get to its tests is not loaded, with a :class:`~tasks.core.types.SuiteProblem`
(see :func:`parse_pytest_run`); per-file collection errors are returned beside the result so a
baseline can set those files aside.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError
from defusedxml.ElementTree import parse as parse_xml

from tasks.core.types import (
    CommandResult,
    SuiteProblem,
    TestCaseResult,
    TestStatus,
    ValidationResult,
)
from tasks.facts.stacktrace import locations_from_trace
from tasks.toolchains.python.diagnose import diagnose_pytest
from tasks.toolchains.runs import join_messages, relative_path, tail

#: pytest exit codes that mean the run never got to (all) the tests: interrupted by collection
#: errors, internal error, usage error.
NOT_LOADED_EXITS = (2, 3, 4)


def parse_pytest_run(
    repo: Path,
    xml_out: Path,
    cmd: CommandResult,
    *,
    status: dict[str, Any] | None = None,
    packages: list[str] | tuple[str, ...] = (),
    python: str = "python",
) -> ValidationResult:
    """Turn one pytest command, its JUnit XML and the plugin's status into a ValidationResult.

    Not loaded (with a ``problem``) when: collection errors (pytest writes them as a testcase
    with the message "collection failure"), exit codes 2-4, a missing report, fewer tests
    reported than collected (without a failure that stopped the run), or a project package
    imported from outside the worktree.
    """
    return parse_run(repo, xml_out, cmd, status=status, packages=packages, python=python)[0]


def parse_run(
    repo: Path,
    xml_out: Path,
    cmd: CommandResult,
    *,
    status: dict[str, Any] | None,
    packages: list[str] | tuple[str, ...],
    python: str,
) -> tuple[ValidationResult, dict[str, str]]:
    """:func:`parse_pytest_run`, plus each test file's collection error (file -> text)."""
    base = ValidationResult(
        toolchain="python-pytest", loaded=False, duration_s=cmd.duration_s, reason=cmd.reason
    )
    output = cmd.stdout + "\n" + cmd.stderr
    try:
        root = parse_xml(str(xml_out)).getroot()
    except (OSError, ParseError, DefusedXmlException) as exc:
        if cmd.reason:
            base.load_error = f"pytest exited {cmd.exit_code}: {cmd.reason}\n{tail(output)}".strip()
            base.problem = SuiteProblem(
                tool="pytest", cause="environment", message=f"stopped: {cmd.reason}"
            )
            return base, {}
        problem = diagnose_pytest(output, cmd.exit_code, repo, packages, python)
        if xml_out.exists() or (status is not None and cmd.exit_code not in NOT_LOADED_EXITS):
            problem.message = f"no usable JUnit XML report ({exc.__class__.__name__})"
        elif problem.message.startswith("pytest exited") and cmd.exit_code in (0, 1, 5):
            problem.message = (
                "pytest ended without its summary (the process exited early or was killed)"
            )
        base.problem = problem
        said = problem.message.startswith("pytest ")
        prefix = "" if said else f"pytest exited {cmd.exit_code}: "
        base.load_error = f"{prefix}{problem.message}\n{problem.detail}"
        return base, {}
    rootdir = Path(str(status["rootdir"])) if status and status.get("rootdir") else repo
    collection_errors: list[str] = []
    by_file: dict[str, str] = {}
    collected: dict[tuple[str, str | None], str | None] = {}
    for case in root.iter("testcase"):
        example, collection_error = _case(repo, case, rootdir, collected)
        if collection_error is not None:
            collection_errors.append(collection_error)
            if example.file:
                by_file[example.file] = collection_error
        else:
            base.examples.append(example)
    if collection_errors or cmd.exit_code in NOT_LOADED_EXITS:
        text = join_messages(collection_errors)
        base.problem = diagnose_pytest(
            f"{text}\n{output}" if text else output, cmd.exit_code, repo, packages, python
        )
        base.load_error = text or f"{base.problem.one_line()}\n{base.problem.detail}"
        return base, by_file
    found = _status_problem(repo, status, base.examples)
    if found is not None:
        base.problem = found
        base.load_error = found.one_line()
        return base, by_file
    base.loaded = True
    return base, by_file


def _status_problem(
    repo: Path, status: dict[str, Any] | None, examples: list[TestCaseResult]
) -> SuiteProblem | None:
    """What the plugin's status says went wrong in a run that wrote its report, or None."""
    if status is None:
        return None
    root = repo.resolve()
    imports = status.get("imports") if isinstance(status.get("imports"), dict) else {}
    for name, where in sorted((imports or {}).items()):
        if isinstance(where, str) and not Path(os.path.realpath(where)).is_relative_to(root):
            return SuiteProblem(
                tool="pytest",
                cause="environment",
                message=f"the tests imported {name} from {where}, not from the worktree",
                hint="an installed copy of the project shadows its code: remove it from the "
                "interpreter's environment or make it an editable install",
            )
    collected = status.get("collected")
    bad = any(e.status in ("failed", "error") for e in examples)
    short = isinstance(collected, int) and len(examples) < collected
    if short and not bad and not status.get("stopped"):
        return SuiteProblem(
            tool="pytest",
            cause="environment",
            message=f"pytest collected {collected} tests but reported {len(examples)}",
            hint="a plugin or the configuration stopped the run early",
        )
    return None


def _case(
    repo: Path, case: Any, rootdir: Path, memo: dict[tuple[str, str | None], str | None]
) -> tuple[TestCaseResult, str | None]:
    classname = case.get("classname", "")
    name = case.get("name", "")
    defined_in = case.get("file")
    if (classname, defined_in) not in memo:
        memo[classname, defined_in] = _collected_file(classname, defined_in, rootdir)
    collected = memo[classname, defined_in]
    file = _from_rootdir(collected or defined_in, rootdir, repo)
    # An inherited test's line is in the module that defines it, not in the one collected.
    line_attr = case.get("line") if collected is None else None
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
        text = f"ERROR collecting {file or name}\n{trace or ''}".strip()
        return _placeholder(name, file), text
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


def _collected_file(classname: str, defined_in: str | None, rootdir: Path) -> str | None:
    """The test file pytest collected a case from, when it is not the file defining the test.

    xunit1's ``file`` is where the test function is written; the ``classname`` comes from the
    node id (``tests.test_child.TestChild``), whose module is the file collected. They differ
    for a test class inherited by another test module: its tests run, pass and fail as the
    inheriting module's. None when they agree or the classname names no file of the rootdir.
    """
    parts = [p for p in classname.split(".") if p]
    if not defined_in or not parts or not all(p.isidentifier() for p in parts):
        return None
    while parts:
        candidate = "/".join(parts) + ".py"
        if (rootdir / candidate).is_file():
            return None if Path(candidate) == Path(defined_in) else candidate
        parts.pop()
    return None


def _from_rootdir(file: str | None, rootdir: Path, repo: Path) -> str | None:
    """A JUnit ``file`` (relative to pytest's rootdir) relative to the project instead."""
    if not file or rootdir.resolve() == repo.resolve():
        return file
    return relative_path(str((rootdir / file).resolve()), repo)


def _placeholder(name: str, file: str | None = None) -> TestCaseResult:
    return TestCaseResult(id=name, name=name, status="error", file=file)
