"""Jest's results as Autopilot reads them: the jest-junit XML report (the examples, parsed by
the same JUnit reader as the reports CI sends, so case ids match), Jest's own ``--json`` result
(which suites ran, which failed to run and why, test locations) and the process output.

A run that did not get to its tests is never a pass: a suite that failed to run (a syntax
error, a missing module, a TypeScript type error reported by ts-jest, an exception at import
time) makes the result not loaded, with Jest's real message per file; so does a run that wrote
no JSON result (a configuration error, a crash, a timeout), found no tests, was interrupted, or
reported fewer examples than Jest counted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tasks.core.errors import ReportError
from tasks.core.types import (
    CommandResult,
    SuiteProblem,
    TestCaseResult,
    TestStatus,
    ValidationResult,
)
from tasks.facts.reports.read import parse_report
from tasks.facts.stacktrace import locations_from_trace
from tasks.toolchains.diagnose import relative_to_repo
from tasks.toolchains.runs import join_messages, relative_path, shorten_middle, tail

#: The toolchain's name, as its results carry it.
TOOLCHAIN = "node-jest"
#: jest-junit's classname for a suite that failed to run (``reportTestSuiteErrors``).
SUITE_ERROR = "Test suite failed to run"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_JSON_STATUS: dict[str, TestStatus] = {
    "passed": "passed",
    "failed": "failed",
    "pending": "skipped",
    "skipped": "skipped",
    "todo": "skipped",
    "disabled": "skipped",
    "focused": "passed",
}


def strip_ansi(text: str) -> str:
    """`text` without terminal colour codes."""
    return _ANSI.sub("", text)


def node_validation(**fields: Any) -> ValidationResult:
    """A ValidationResult of the node-jest toolchain (every field validated)."""
    return ValidationResult.model_validate({**fields, "toolchain": TOOLCHAIN})


def read_jest_json(path: Path) -> dict[str, Any] | None:
    """Jest's ``--json`` result, or None when missing or not a JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def suite_errors(data: dict[str, Any], repo: Path) -> dict[str, str]:
    """Test file -> Jest's message, for every suite that failed to run."""
    errors: dict[str, str] = {}
    for suite in data.get("testResults") or []:
        if not isinstance(suite, dict):
            continue
        message = strip_ansi(str(suite.get("message") or ""))
        ran = [a for a in suite.get("assertionResults") or [] if isinstance(a, dict)]
        failed_to_run = SUITE_ERROR in message or (suite.get("status") == "failed" and not ran)
        if failed_to_run:
            name = relative_path(str(suite.get("name", "")), repo)
            text = message.replace(f"● {SUITE_ERROR}", "").strip() or "the suite failed to run"
            errors[name] = relative_to_repo(text, repo)
    return errors


def _json_cases(data: dict[str, Any], repo: Path) -> dict[tuple[str, str], tuple[int | None, str]]:
    """(file, full name) -> the line of each test (``--testLocationInResults``) and Jest's own
    status of it."""
    found: dict[tuple[str, str], tuple[int | None, str]] = {}
    for suite in data.get("testResults") or []:
        if not isinstance(suite, dict):
            continue
        file = relative_path(str(suite.get("name", "")), repo)
        for case in suite.get("assertionResults") or []:
            if not isinstance(case, dict):
                continue
            loc = case.get("location")
            line = loc.get("line") if isinstance(loc, dict) else None
            key = (file, str(case.get("fullName", "")).strip())
            found[key] = (line if isinstance(line, int) else None, str(case.get("status")))
    return found


def _from_json(data: dict[str, Any], repo: Path) -> list[TestCaseResult]:
    """Examples from Jest's JSON result (when the JUnit report is unusable)."""
    cases: list[TestCaseResult] = []
    for suite in data.get("testResults") or []:
        if not isinstance(suite, dict):
            continue
        file = relative_path(str(suite.get("name", "")), repo)
        for case in suite.get("assertionResults") or []:
            if not isinstance(case, dict):
                continue
            name = str(case.get("fullName") or case.get("title") or "")
            trace = strip_ansi("\n".join(map(str, case.get("failureMessages") or []))) or None
            loc = case.get("location")
            cases.append(
                TestCaseResult(
                    id=f"{file}::{name}",
                    name=name,
                    classname=name,
                    file=file,
                    line=loc.get("line") if isinstance(loc, dict) else None,
                    status=_JSON_STATUS.get(str(case.get("status")), "error"),
                    duration=float(case.get("duration") or 0) / 1000,
                    message=trace.splitlines()[0] if trace else None,
                    trace=trace,
                    locations=_repo_locations(trace, repo),
                )
            )
    return cases


def _repo_locations(trace: str | None, repo: Path) -> list[Any]:
    if not trace:
        return []
    return [loc for loc in locations_from_trace(trace, repo) if not loc.path.startswith("/")]


def examples(junit: Path, data: dict[str, Any] | None, repo: Path) -> list[TestCaseResult]:
    """The run's examples: jest-junit's cases (suites that failed to run left out, trace
    locations outside the repository dropped, lines from the JSON result), else the JSON's."""
    try:
        cases = parse_report(junit, repo)
    except ReportError:
        return _from_json(data, repo) if data is not None else []
    known = _json_cases(data, repo) if data is not None else {}
    kept: list[TestCaseResult] = []
    for case in cases:
        if case.classname == SUITE_ERROR:
            continue
        update: dict[str, Any] = {
            "locations": [loc for loc in case.locations if not loc.path.startswith("/")]
        }
        line, status = known.get((case.file or "", case.name.strip()), (None, ""))
        if case.line is None and case.file is not None:
            update["line"] = line
        if case.status == "passed" and _JSON_STATUS.get(status) == "skipped":
            # jest-junit writes a test.todo as a case with no result (a pass): Jest says todo.
            update["status"] = "skipped"
        if case.message:
            update["message"] = strip_ansi(case.message)
        if case.trace:
            update["trace"] = strip_ansi(case.trace)
        kept.append(case.model_copy(update=update))
    return kept


def parse_jest_run(
    repo: Path, run_dir: Path, cmd: CommandResult
) -> tuple[ValidationResult, dict[str, str]]:
    """One Jest command, its ``junit.xml`` and ``jest.json`` (in `run_dir`) -> the result,
    and each test file that failed to run with its message."""
    output = strip_ansi(f"{cmd.stdout}\n{cmd.stderr}")
    data = read_jest_json(run_dir / "jest.json")
    base: dict[str, Any] = {"loaded": False, "duration_s": cmd.duration_s, "reason": cmd.reason}
    if data is None:
        problem = diagnose_jest(output, cmd, repo)
        return node_validation(
            **base, load_error=f"{problem.one_line()}\n{problem.detail}", problem=problem
        ), {}
    found = examples(run_dir / "junit.xml", data, repo)
    errors = suite_errors(data, repo)
    if errors:
        file, first = next(iter(errors.items()))
        problem = load_problem_of(file, first, repo)
        text = join_messages([f"{f}: {m}" for f, m in errors.items()])
        return node_validation(**base, examples=found, load_error=text, problem=problem), errors
    stopped = _run_problem(data, found, cmd)
    if stopped is not None:
        load_error = f"{stopped.one_line()}\n{stopped.detail}".strip()
        return node_validation(**base, examples=found, load_error=load_error, problem=stopped), {}
    return node_validation(**{**base, "loaded": True}, examples=found), {}


def _run_problem(
    data: dict[str, Any], found: list[TestCaseResult], cmd: CommandResult
) -> SuiteProblem | None:
    """What Jest's JSON says went wrong in a run with no failed suite, or None. (The
    sandbox's `reason` stays on the result: a run that got to its tests but tripped a limit is
    loaded and never passes.)"""
    if data.get("wasInterrupted"):
        return SuiteProblem(tool="jest", cause="environment", message="the run was interrupted")
    total = data.get("numTotalTests")
    if not found and not data.get("numTotalTestSuites"):
        return SuiteProblem(
            tool="jest",
            cause="environment",
            message="jest found no tests",
            hint="the files match none of the project's testMatch/testRegex patterns",
            detail=tail(strip_ansi(cmd.stderr), 1500),
        )
    if isinstance(total, int) and len(found) < total:
        return SuiteProblem(
            tool="jest",
            cause="environment",
            message=f"jest counted {total} tests but reported {len(found)}",
            hint="a reporter or the configuration lost results",
        )
    return None


_TS_ERROR = re.compile(
    r"(?P<file>[\w./@-]+\.[cm]?[jt]sx?):(?P<line>\d+):\d+ - error (?P<code>TS\d+)"
)
_JS_ERROR = re.compile(
    r"^\s*(?P<type>SyntaxError|ReferenceError|TypeError|Error)\b:?\s*(?P<msg>.*)$", re.MULTILINE
)
_MISSING = re.compile(r"Cannot find module '(?P<name>[^']+)' from '(?P<from>[^']+)'")
_FRAME = re.compile(r"^\s*(?P<file>[\w./@-]+\.[cm]?[jt]sx?):(?P<line>\d+)", re.MULTILINE)


def load_problem_of(file: str, message: str, repo: Path) -> SuiteProblem:
    """A suite that failed to run: a project problem (its code does not load) unless a
    package is missing from node_modules (the environment)."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    first = lines[0] if lines else "the suite failed to run"
    ts = _TS_ERROR.search(message)
    missing = _MISSING.search(message)
    cause: Any = "project"
    hint = None
    error_type = None
    where_file, where_line = file, None
    if ts:
        error_type = ts.group("code")
        where_file, where_line = ts.group("file"), int(ts.group("line"))
        if _missing_types(message):
            cause = "environment"
            hint = (
                "the TypeScript compiler cannot find the project's dependencies or their types "
                "(@types/jest, a package): install the project's node_modules, or declare "
                "where they are"
            )
    elif missing:
        error_type = "ModuleNotFoundError"
        name = missing.group("name")
        first = missing.group(0)
        if not name.startswith((".", "/")):
            cause = "environment"
            package = "/".join(name.split("/")[:2]) if name.startswith("@") else name.split("/")[0]
            hint = (
                f"{package} is not installed: install the project's dependencies "
                "(node_modules), or declare where they are"
            )
    else:
        js = _JS_ERROR.search(message)
        error_type = js.group("type") if js else None
        frame = _FRAME.search(message)
        if frame:
            where_file, where_line = frame.group("file"), int(frame.group("line"))
    return SuiteProblem(
        tool="jest",
        cause=cause,
        message=_one_line(first if first.startswith(file) else f"{file}: {first}"),
        hint=hint,
        error_type=error_type,
        file=relative_path(where_file, repo),
        line=where_line,
        detail=shorten_middle(message, 3000),
    )


_TS_MISSING_GLOBAL = re.compile(
    r"error TS2582|error TS2688|error TS2304: Cannot find name '(?:describe|it|test|expect|jest)'"
)
_TS_MISSING_PACKAGE = re.compile(r"error TS2307: Cannot find module '(?P<name>[^'.][^']*)'")


def _missing_types(message: str) -> bool:
    """A TypeScript error that says a package or the test runner's types are not installed
    (never a relative import, which is the project's own code)."""
    return bool(_TS_MISSING_GLOBAL.search(message) or _TS_MISSING_PACKAGE.search(message))


def _one_line(text: str, limit: int = 400) -> str:
    one = re.sub(r"\s+", " ", text).strip()
    return one if len(one) <= limit else one[: limit - 3] + "..."


def diagnose_jest(output: str, cmd: CommandResult, repo: Path) -> SuiteProblem:
    """Why Jest wrote no result at all: its validation or configuration error, a missing
    preset or transformer, no tests found, a crash, or the sandbox stopping it."""
    text = relative_to_repo(output, repo)
    detail = shorten_middle(text.strip(), 3000)
    if cmd.reason:
        return SuiteProblem(
            tool="jest", cause="environment", message=f"stopped: {cmd.reason}", detail=detail
        )
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for marker in ("Validation Error", "Configuration error", "Error: Jest: Got error"):
        if any(marker in ln for ln in lines):
            index = next(i for i, ln in enumerate(lines) if marker in ln)
            message = " ".join(lines[index : index + 4])
            return SuiteProblem(
                tool="jest",
                cause="environment",
                message=_one_line(message),
                hint="the project's Jest configuration cannot be used as it is",
                detail=detail,
            )
    if any(ln.startswith("No tests found") for ln in lines):
        return SuiteProblem(
            tool="jest",
            cause="environment",
            message="jest found no tests",
            hint="the files match none of the project's testMatch/testRegex patterns",
            detail=detail,
        )
    missing = _MISSING.search(text)
    if missing:
        return SuiteProblem(
            tool="jest",
            cause="environment",
            message=_one_line(missing.group(0)),
            hint="a preset, transformer or environment the configuration names is not "
            "installed: install the project's node_modules",
            detail=detail,
        )
    last = lines[-1] if lines else ""
    return SuiteProblem(
        tool="jest",
        cause="environment",
        message=_one_line(f"jest exited {cmd.exit_code} without a result: {last}"),
        detail=detail,
    )
