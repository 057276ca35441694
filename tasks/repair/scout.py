"""The scout: failures from reports or raw logs, grouped by signature so one cause is repaired
once.

Plain parsing is :mod:`tasks.facts.reports.read` (:func:`read_reports`); a log no parser
understands goes to the scout model (:func:`scout_log`). :func:`group_failures` builds the
groups: error type, message shape, innermost project frame (outside the test tree, as the
toolchain's file rules say), and the source file the failing spec is mapped to.

A suite run (no reports given) that did not load is a failure too: :func:`load_failure_cases`
turns each test file that does not load into a file-level case carrying its load error, and a
suite that does not start at all because of the project's code (a syntax or import error the
merge introduced) into one such case per test file, so one group holds the cause and its re-run
is the whole suite. Those cases are grouped by the load error alone. A suite that cannot start
for reasons of tooling or environment is not a failure to patch: it is returned as the problem
a person must fix (:func:`environment_group`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

from tasks.audit.baseline import run_baseline
from tasks.core.errors import AutopilotError, BadInputError, NotAReportError, ReportError
from tasks.core.secrets import redact
from tasks.core.types import Mapping, SuiteProblem, TestCaseResult
from tasks.facts.reports.read import parse_reports
from tasks.facts.reports.stream import iter_records
from tasks.facts.stacktrace import locations_from_trace
from tasks.model.client import ModelClient
from tasks.model.prompts import render
from tasks.model.replies import ScoutReport, schema_text
from tasks.repair.state import FailureGroup, GroupState
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain
from tasks.toolchains.files import FileRules
from tasks.toolchains.mapping import list_specs

log = logging.getLogger(__name__)

#: The end of a raw log is sent to the scout: runners print their failure summary last.
MAX_LOG_CHARS = 40_000
#: Said of a file that holds no report when no model is configured.
RAW_LOG_HINT = "; a raw log is read only by a model (none is configured)"
#: The classname of a case that stands for a test file that does not load.
LOAD_ERROR_CLASS = "autopilot.load-error"
_HEADERS = ("ERROR collecting ", "An error occurred while loading ", "ImportError while loading")
_TRAILING_TYPE = re.compile(r":\s*([A-Z][\w.:]*(?:Error|Exception|Failure|Mismatch|NotMet)\w*)\s*$")


def error_type_of(case: TestCaseResult) -> str:
    """The error class; pytest's JUnit output leaves it out, its trace ends with it."""
    if case.error_type:
        return case.error_type
    last = (case.trace or "").strip().rsplit("\n", 1)[-1]
    m = _TRAILING_TYPE.search(last)
    return m.group(1) if m else "(unknown)"


def message_shape(message: str | None) -> str:
    """A message with its varying parts (numbers, quoted text, ids, addresses) blanked out."""
    text = (message or "").strip().split("\n", 1)[0]
    text = re.sub(r"0x[0-9a-fA-F]+", "<hex>", text)
    text = re.sub(r"\"[^\"]*\"|'[^']*'", "<str>", text)
    text = re.sub(r"#<[^>]*>", "<obj>", text)
    text = re.sub(r"\d+(?:\.\d+)?", "<n>", text)
    return re.sub(r"\s+", " ", text)[:160]


def innermost_project_frame(case: TestCaseResult, rules: FileRules) -> str:
    """The innermost repository frame outside the test tree, as path:line, or ''."""
    for loc in reversed(case.locations):
        if not loc.path.startswith("/") and not rules.is_test_side(loc.path):
            return f"{loc.path}:{loc.line}"
    return ""


def _safe_relpath(path: str | None) -> str | None:
    """A model-given test path only when it is a plain relative path (no '..', not absolute)."""
    if not path:
        return None
    path = path.removeprefix("./")
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..", ".git") for p in parts):
        return None
    return path


def scout_log(client: ModelClient, log_path: Path, repo: Path) -> list[TestCaseResult]:
    """Failures from a raw test log that no parser understands, read by the scout model.

    The reply is untrusted: test paths that are not plain relative paths are dropped, and
    locations come from parsing the copied stack traces, not from the model.

    Raises:
        ModelError: the call failed, or the reply stayed malformed after re-asks.
        OSError: the log cannot be read.
    """
    data = log_path.read_bytes()
    text = redact(data[-MAX_LOG_CHARS:].decode("utf-8", errors="replace"))
    about = str(log_path)
    prompt = render("scout", path=about, log=text, reply_schema=schema_text(ScoutReport))
    report, _ = client.structured(
        "scout",
        prompt.messages(),
        ScoutReport,
        schema_name="scout_failures",
        prompt=prompt.meta,
        about=about,
    )
    cases: list[TestCaseResult] = []
    for f in report.failures:
        locations = [
            loc for loc in locations_from_trace(f.trace, repo) if not loc.path.startswith("/")
        ]
        cases.append(
            TestCaseResult(
                id=f.test_id,
                name=f.name,
                classname=f.classname,
                file=_safe_relpath(f.file),
                line=f.line,
                status=f.status,
                message=f.message,
                error_type=f.error_type,
                trace=f.trace or None,
                locations=locations,
            )
        )
    return cases


def read_reports(
    reports: list[Path], repo: Path, client: ModelClient | None
) -> tuple[list[TestCaseResult], list[str]]:
    """The cases of the reports, and one error line per file that stayed unusable.

    Plain parsing first; a file that holds no report at all (a raw log) goes to the scout model
    when one is configured.

    Raises:
        BadInputError: no file could be used (every file's error, in one line).
    """
    run = parse_reports(reports, repo=repo)
    cases, errors = list(run.cases), []
    for e in run.errors:
        if client is None or not e.not_a_report:
            hint = RAW_LOG_HINT if e.not_a_report else ""
            errors.append(f"{e.file}: {e.error}{hint}")
            continue
        try:
            cases.extend(scout_log(client, Path(e.file), repo))
        except (AutopilotError, OSError) as exc:
            errors.append(f"{e.file}: {e.error}; the scout model could not read it: {exc}")
    if errors and len(errors) == len(reports):
        raise BadInputError(no_usable_report(errors))
    return cases, errors


def no_usable_report(errors: list[str]) -> str:
    """The one line for reports none of which can be used, naming each."""
    return "no usable report: " + ("; ".join(errors) or "none given")


def check_reports(reports: list[Path], repo: Path, model_configured: bool) -> list[str]:
    """One line per report that cannot be used (only its first case is read): missing,
    unreadable, broken. A file that holds no report counts as usable when a model is
    configured: the scout model reads raw logs."""
    bad: list[str] = []
    for report in reports:
        try:
            next(iter_records(report, repo), None)
        except NotAReportError as exc:
            if not model_configured:
                bad.append(f"{exc}{RAW_LOG_HINT}")
        except ReportError as exc:
            bad.append(str(exc))
    return bad


def failures_from_suite(
    project: Path, chain: Toolchain, runner: CommandRunner, spec_timeout_s: float
) -> tuple[list[TestCaseResult], SuiteProblem | None]:
    """The cases of a sandboxed suite run (no reports given): its failing examples, and the
    test files that do not load (the project's code broke them: repairable); or the problem
    that keeps the suite from starting at all for reasons of tooling or environment (a person
    fixes it, never a patch)."""
    suite = run_baseline(project, chain, runner, spec_timeout_s=spec_timeout_s, contexts=False)
    loads, problem = load_failure_cases(suite, project, chain, list_specs(project, chain.name))
    if problem is not None:
        log.warning("the test suite cannot start: %s", problem.one_line())
    return [*suite.validation.examples, *loads], problem


def _sources_of(mapping: Mapping | None) -> dict[str, str]:
    owners: dict[str, str] = {}
    for f in mapping.files if mapping else []:
        for spec in f.specs:
            owners.setdefault(spec, f.source)
    return owners


def group_failures(
    cases: list[TestCaseResult], rules: FileRules, mapping: Mapping | None = None
) -> list[FailureGroup]:
    """Group failing and erroring cases by signature, so one cause is repaired once.

    The signature: error type, message shape, innermost project frame, and the source file the
    failing spec is mapped to. Passing and skipped cases are ignored.

    Args:
        cases: Cases from the reports (any status).
        rules: The toolchain's file rules (which frames are the tests' own).
        mapping: The repository's source -> spec mapping, for the source part.

    Returns:
        Groups in the order their first failure appears.
    """
    owners = _sources_of(mapping)
    groups: dict[str, FailureGroup] = {}
    for case in cases:
        if case.status not in ("failed", "error"):
            continue
        etype = error_type_of(case)
        shape = message_shape(case.message)
        frame = innermost_project_frame(case, rules)
        if case.classname == LOAD_ERROR_CLASS:
            # One load error breaks every file that imports the code: one cause, one group.
            source = None
            signature = f"load error | {etype} | {shape} | {frame or '-'}"
        else:
            source = owners.get(case.file or "")
            signature = f"{etype} | {shape} | {frame or '-'} | {source or '-'}"
        if signature in groups:
            groups[signature].tests.append(case)
            continue
        gid = "g-" + hashlib.sha256(signature.encode()).hexdigest()[:10]
        groups[signature] = FailureGroup(
            id=gid,
            signature=signature,
            error_type=etype,
            message_shape=shape,
            frame=frame,
            source=source,
            tests=[case],
        )
    return list(groups.values())


def fill_test_files(
    cases: list[TestCaseResult], project: Path, chain: Toolchain
) -> list[TestCaseResult]:
    """Cases whose report named no test file get one, so they can be re-run and matched.

    pytest's default JUnit XML has no ``file`` attribute: the file comes from the trace's
    frames in the test tree, else from the classname (as the toolchain reads it). Cases that
    already name a file, or whose file cannot be found in `project`, are returned unchanged.
    """
    rules = chain.file_rules(project)
    out: list[TestCaseResult] = []
    for case in cases:
        if case.file or case.status not in ("failed", "error"):
            out.append(case)
            continue
        found = next(
            (
                loc.path
                for loc in case.locations
                if rules.is_test_side(loc.path)
                and _safe_relpath(loc.path)
                and (project / loc.path).is_file()
            ),
            None,
        ) or chain.file_of_case(case.classname, project)
        out.append(case.model_copy(update={"file": found}) if found else case)
    return out


def bare_message(problem: SuiteProblem) -> str:
    """The error of a load problem without the tool's "while loading <file>" header, so the
    same error in several files reads the same."""
    message = problem.message
    for header in _HEADERS:
        if message.startswith(header) and ": " in message:
            return message.split(": ", 1)[1]
    return message


def _load_case(file: str, problem: SuiteProblem, trace: str, project: Path) -> TestCaseResult:
    found = locations_from_trace(trace, project)
    locations = [loc for loc in found if not loc.path.startswith("/")]
    return TestCaseResult(
        id=file,
        name=f"{file} does not load",
        classname=LOAD_ERROR_CLASS,
        file=file,
        status="error",
        message=bare_message(problem),
        error_type=problem.error_type or "LoadError",
        trace=redact(trace),
        locations=locations,
    )


def load_failure_cases(
    suite: SuiteResult, project: Path, chain: Toolchain, test_files: list[str]
) -> tuple[list[TestCaseResult], SuiteProblem | None]:
    """File-level cases for what did not load, and the environment problem (if any) that kept
    the whole suite from starting.

    Args:
        suite: the sandboxed baseline run (tasks/audit/baseline.py).
        project: the project directory.
        chain: the toolchain (it reads its runner's load errors).
        test_files: every test file of the project.

    Returns:
        (cases, problem): one case per test file set aside for its own load error; when the
        suite did not start because of the project's code, one case per remaining test file
        with that error; `problem` is set instead when the cause is tooling or environment.
    """
    cases: list[TestCaseResult] = []
    for file in suite.broken:
        text = suite.load_errors.get(file) or suite.broken[file]
        cases.append(_load_case(file, chain.load_problem(text, project), text, project))
    problem = suite.validation.problem
    if suite.ran or problem is None:
        return cases, None
    if problem.cause == "environment":
        return cases, problem
    trace = problem.detail or suite.validation.load_error or problem.message
    cases += [
        _load_case(file, problem, trace, project) for file in test_files if file not in suite.broken
    ]
    return cases, None


def environment_group(problem: SuiteProblem) -> GroupState:
    """The suite cannot start for a reason no patch may fix (tooling, options, a missing
    plugin or gem): a group handed to a person as it is, never to the surgeon."""
    line = problem.one_line()
    case = TestCaseResult(
        id="(suite)",
        name="the test suite",
        classname=LOAD_ERROR_CLASS,
        status="error",
        message=line,
        error_type=problem.error_type or problem.tool,
        trace=problem.detail or None,
    )
    signature = f"suite cannot start | {problem.tool} | {message_shape(problem.message)}"
    group = FailureGroup(
        id="g-" + hashlib.sha256(signature.encode()).hexdigest()[:10],
        signature=signature,
        error_type=case.error_type or problem.tool,
        message_shape=message_shape(problem.message),
        frame="",
        tests=[case],
    )
    why = f"the test suite cannot start: {line}; a person must fix the environment, not the code"
    return GroupState(
        group=group,
        step="human",
        outcome="needs_human",
        category="environment-dependency",
        reasons=[why],
        handoff_reasons=[why],
    )
