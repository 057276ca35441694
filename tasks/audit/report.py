"""The audit: a trustworthy picture of a codebase's tests, measured without any model.

Plain functions over what the toolchain measured; tasks/audit/run.py runs them in a worktree
(flows/audit.py as Prefect tasks). A suite that did not run is reported as such (``suite.ran``
false, with the problem that stopped it), never as passing; per-test counts stand beside the
per-file figures; a source is tested by the specs its name maps to and by the test files that
ran its function bodies (``covered_by``, the evidence). Every failing test is named
(``failing_tests``), and a source is failing only through the failing tests given to it by
tasks/audit/failing.py's rules, never because a failing test merely ran a line of it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tasks.audit.failing import FailingTest, failing_tests
from tasks.core.types import (
    FileCoverage,
    Finding,
    LintOffense,
    Mapping,
    RunSummary,
    SourceKind,
    StaticVerdict,
    SuiteProblem,
    TestCaseResult,
    ToolchainName,
    ValidationResult,
)
from tasks.toolchains.base import SuiteResult
from tasks.toolchains.runs import relative_path

__all__ = [
    "AuditFile",
    "AuditReport",
    "AuditSummary",
    "FailingTest",
    "SuiteStatus",
    "build_report",
    "failing_lines",
    "markdown_summary",
    "spec_outcomes",
    "suite_report",
    "table_rows",
]

FileStatus = Literal["tested", "untested", "failing"]
#: Failing tests listed in a table or a summary; the rest are counted (all are in the JSON).
FAILING_SHOWN = 20


class AuditFile(BaseModel):
    source: str
    kind: SourceKind
    specs: list[str]
    status: FileStatus
    coverage: float = Field(ge=0, le=1)
    uncovered_lines: list[int] = Field(default_factory=list)
    static_score: float | None = None
    findings: list[Finding] = Field(default_factory=list)
    lint_offenses: int = 0
    reason: str | None = Field(
        None, description="Why a spec of this file failed outright (did not load, timeout, limit)"
    )
    covered_by: list[str] = Field(
        default_factory=list,
        description="Other test files that ran this file's function bodies (evidence)",
    )
    tests: RunSummary = Field(default_factory=RunSummary, description="Tests of its specs")
    failing_tests: list[str] = Field(
        default_factory=list,
        description="The ids of the failing tests that make it failing (see `failing_tests`)",
    )


class AuditSummary(BaseModel):
    files: int
    untested: int
    line_coverage: float
    specs_passing: int
    specs_failing: int
    specs_not_run: int = Field(0, description="Test files from which no test ran")
    tests: RunSummary = Field(
        default_factory=RunSummary, description="Tests by outcome (as `autopilot parse` counts)"
    )


class SuiteStatus(BaseModel):
    """Whether the suite ran, and if not, why (never a pass)."""

    ran: bool
    problem: SuiteProblem | None = None
    set_aside: dict[str, str] = Field(
        default_factory=dict, description="Test files that could not run, with the reason"
    )


class AuditReport(BaseModel):
    """The `autopilot audit --json` document."""

    repo: str
    commit: str
    toolchain: ToolchainName
    summary: AuditSummary
    files: list[AuditFile]
    suite: SuiteStatus = Field(default_factory=lambda: SuiteStatus(ran=True))
    prepared: list[str] = Field(
        default_factory=list, description="Files or commands produced in the worktree first"
    )
    errors: list[str] = Field(
        default_factory=list, description="Tools that failed (lint, ...), one line each"
    )
    warnings: list[str] = Field(default_factory=list)
    failing_tests: list[FailingTest] = Field(
        default_factory=list,
        description="Every failed or erroring test: id, message head, location, the sources "
        "it makes failing",
    )

    def exit_code(self) -> int:
        """0 when the suite ran and every tool worked; 1 otherwise."""
        return 0 if self.suite.ran and not self.errors else 1

    def problems(self) -> list[str]:
        """The failures, one line each: the suite that did not run, the tools that failed."""
        lines = []
        if not self.suite.ran:
            why = self.suite.problem.one_line() if self.suite.problem else "unknown cause"
            lines.append(f"suite did not run: {why}")
        return lines + [f"error: {e}" for e in self.errors]


def spec_outcomes(
    result: ValidationResult, broken: Iterable[str], repo: Path | None = None
) -> dict[str, bool]:
    """Spec file -> passed, from one suite run; `broken` specs did not load at all.

    Paths are relative to `repo` (a report may name a file by its absolute path). A spec file
    fails when any of its tests failed or errored and passes when at least one passed and none
    failed; one whose tests were all skipped, or that ran none, is absent: no test ran.
    """
    outcome: dict[str, bool] = {path: False for path in broken}
    for ex in result.examples:
        if not ex.file or ex.status == "skipped":
            continue
        path = _key(ex.file, repo)
        outcome[path] = outcome.get(path, True) and ex.status == "passed"
    return outcome


def _key(path: str, repo: Path | None) -> str:
    path = path.removeprefix("./")
    return relative_path(path, repo) if repo is not None else path


def _status(
    specs: list[str],
    evidence: list[str],
    outcomes: dict[str, bool],
    broken: dict[str, str],
    failures: list[str],
) -> tuple[FileStatus, list[str]]:
    """A source's status and the reasons behind a spec that failed outright or never ran.

    Failing: a failing test is given to it (`failures`) or one of its specs could not run.
    Tested: else a test of its specs, or of a test file that ran its function bodies, ran.
    """
    if failures or any(s in broken for s in specs):
        status: FileStatus = "failing"
    elif any(s in outcomes for s in [*specs, *evidence]):
        status = "tested"
    else:
        status = "untested"
    reasons = [f"{s}: {broken[s]}" for s in specs if s in broken]
    if not reasons and specs and status == "untested":
        reasons = [f"{s}: no test ran" for s in specs]
    return status, reasons


def _by_test_file(
    examples: list[TestCaseResult], project: Path | None
) -> tuple[dict[str, str], dict[str, list[TestCaseResult]]]:
    """(a case's reported file -> its project-relative test file, test file -> its cases)."""
    keys = {ex.file: _key(ex.file, project) for ex in examples if ex.file}
    by_spec: dict[str, list[TestCaseResult]] = defaultdict(list)
    for ex in examples:
        if ex.file:
            by_spec[keys[ex.file]].append(ex)
    return keys, by_spec


def build_report(
    *,
    repo: str,
    commit: str,
    mapping: Mapping,
    suite: ValidationResult,
    coverage: dict[str, FileCoverage],
    broken_specs: dict[str, str],
    lint: list[LintOffense],
    static: dict[str, StaticVerdict],
    tested_by: dict[str, list[str]] | None = None,
    project: Path | None = None,
    body_lines_run: dict[str, dict[str, int]] | None = None,
) -> AuditReport:
    """Combine the measurements into per-file results and the summary.

    Args:
        repo: how the repository is named in the report.
        commit: the audited commit.
        mapping: source -> spec mapping.
        suite: the suite run (without the specs that failed to load).
        coverage: per-file coverage from that run.
        broken_specs: spec files that could not run at all, with the reason.
        lint: lint offences in spec files.
        static: static-rubric verdict per spec file.
        tested_by: source -> test files that ran its function bodies (evidence).
        project: the project directory, to make absolute test paths relative.
        body_lines_run: source -> test file -> function-body lines it ran (which source a
            failing test of an unmapped test file belongs to).
    """
    ran = suite.loaded and suite.reason is None
    why = None if ran else (suite.problem.one_line() if suite.problem else "it did not run")
    outcomes = spec_outcomes(suite, broken_specs, project)
    keys, by_spec = _by_test_file(suite.examples, project)
    failing = failing_tests(suite.examples, mapping, keys, body_lines_run or {})
    failures: dict[str, list[str]] = defaultdict(list)
    for ft in failing:
        for source in ft.sources:
            failures[source].append(ft.id)
    lint_by_path = Counter(off.path for off in lint)
    files: list[AuditFile] = []
    for mf in mapping.files:
        cov = coverage.get(mf.source)
        evidence = [t for t in (tested_by or {}).get(mf.source, []) if t not in mf.specs]
        verdicts = [static[s] for s in mf.specs if s in static]
        given = failures.get(mf.source, [])
        status, reasons = _status(mf.specs, evidence, outcomes, broken_specs, given)
        if why is not None and mf.specs:
            status, reasons = "failing", [f"the suite did not run: {why}"]
        files.append(
            AuditFile(
                source=mf.source,
                kind=mf.kind,
                specs=mf.specs,
                status=status,
                coverage=round(cov.ratio, 4) if cov is not None else 0.0,
                uncovered_lines=cov.uncovered_lines if cov is not None else [],
                static_score=min(v.score for v in verdicts) if verdicts else None,
                findings=[f for v in verdicts for f in v.findings],
                lint_offenses=sum(lint_by_path[s] for s in mf.specs),
                reason="; ".join(reasons) or None,
                covered_by=evidence,
                tests=RunSummary.of([ex for s in mf.specs for ex in by_spec.get(s, [])]),
                failing_tests=given,
            )
        )
    all_specs = set(outcomes) | {s for mf in mapping.files for s in mf.specs}
    measured = [coverage[mf.source] for mf in mapping.files if mf.source in coverage]
    covered = sum(c.covered_lines for c in measured)
    executable = sum(c.executable_lines for c in measured)
    return AuditReport(
        repo=repo,
        commit=commit,
        toolchain=mapping.toolchain,
        summary=AuditSummary(
            files=len(files),
            untested=sum(1 for f in files if f.status == "untested"),
            line_coverage=round(covered / executable, 4) if executable else 0.0,
            specs_passing=sum(1 for s in all_specs if outcomes.get(s) is True),
            specs_failing=sum(1 for s in all_specs if outcomes.get(s) is False),
            specs_not_run=sum(1 for s in all_specs if s not in outcomes),
            tests=RunSummary.of(suite.examples),
        ),
        files=files,
        suite=SuiteStatus(
            ran=ran, problem=None if ran else suite.problem, set_aside=dict(broken_specs)
        ),
        warnings=list(mapping.warnings),
        failing_tests=failing,
    )


def suite_report(
    *,
    repo: str,
    commit: str,
    mapping: Mapping,
    suite: SuiteResult,
    project: Path,
    lint: list[LintOffense],
    static: dict[str, StaticVerdict],
    errors: Iterable[str] = (),
) -> AuditReport:
    """:func:`build_report` from a baseline run (tasks/audit/baseline.py), with what the run
    prepared in the worktree and the tools that failed."""
    report = build_report(
        repo=repo,
        commit=commit,
        mapping=mapping,
        suite=suite.validation,
        coverage=suite.files,
        broken_specs=suite.broken,
        lint=lint,
        static=static,
        tested_by=suite.tested_by,
        project=project,
        body_lines_run=suite.body_lines_run,
    )
    report.prepared = list(suite.prepared)
    report.errors = list(errors)
    return report


def table_rows(report: AuditReport) -> list[dict[str, object]]:
    """Rows for the Prefect table artifact and the CLI table."""
    return [
        {
            "file": f.source,
            "kind": f.kind,
            "status": f.status,
            "coverage": f"{f.coverage:.0%}",
            "static": "-" if f.static_score is None else f"{f.static_score:.2f}",
            "findings": len(f.findings),
            "lint": f.lint_offenses,
            "specs": ", ".join(f.specs),
            "tests": f"{f.tests.passed}/{f.tests.tests}",
            "covered_by": ", ".join(f.covered_by),
            "failing_tests": ", ".join(f.failing_tests),
        }
        for f in report.files
    ]


def failing_lines(report: AuditReport, limit: int = FAILING_SHOWN) -> list[str]:
    """The first `limit` failing tests, one line each (id, location, message, sources), and
    a line counting the rest."""
    lines = [
        f"{t.id} at {t.location or '?'}: {t.message or 'no message'}"
        + (f" (source: {', '.join(t.sources)})" if t.sources else "")
        for t in report.failing_tests[:limit]
    ]
    if len(report.failing_tests) > limit:
        lines.append(f"... and {len(report.failing_tests) - limit} more failing tests")
    return lines


def markdown_summary(report: AuditReport) -> str:
    """A short markdown summary for the Prefect UI."""
    s = report.summary
    worst = sorted((f for f in report.files if f.status != "untested"), key=lambda f: f.coverage)[
        :5
    ]
    t = s.tests
    lines = [
        f"# Audit of {report.repo} at {report.commit[:12]}",
        "",
        f"- toolchain: **{report.toolchain}**",
        f"- source files: **{s.files}**, untested: **{s.untested}**",
        f"- line coverage: **{s.line_coverage:.1%}**",
        f"- spec files passing: **{s.specs_passing}**, failing: **{s.specs_failing}**, "
        f"no test ran: **{s.specs_not_run}**",
        f"- tests: **{t.tests}** ({t.passed} passed, {t.failed} failed, {t.errors} errors, "
        f"{t.skipped} skipped)",
    ]
    if not report.suite.ran:
        problem = report.suite.problem
        cause = problem.one_line() if problem else "unknown cause"
        lines[2:2] = [f"**The suite did not run**: {cause}", ""]
    for title, items in (
        ("Tool errors", report.errors),
        ("Prepared in the worktree", report.prepared),
        ("Warnings", report.warnings),
    ):
        if items:
            lines += ["", f"## {title}", *(f"- {item}" for item in items)]
    if report.failing_tests:
        lines += ["", "## Failing tests", *(f"- {line}" for line in failing_lines(report))]
    untested = [f.source for f in report.files if f.status == "untested"]
    if untested:
        lines += ["", "## Untested", *(f"- `{u}`" for u in untested)]
    if worst:
        lines += ["", "## Lowest coverage among tested files"]
        lines += [f"- `{f.source}`: {f.coverage:.0%}" for f in worst]
    return "\n".join(lines) + "\n"
