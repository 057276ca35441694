"""The audit: a trustworthy picture of a codebase's tests, measured without any model.

Plain functions over what the toolchain measured; flows/audit.py orchestrates them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, Field

from tasks.types import (
    FileCoverage,
    Finding,
    LintOffense,
    Mapping,
    SourceKind,
    StaticVerdict,
    ToolchainName,
    ValidationResult,
)

FileStatus = Literal["tested", "untested", "failing"]
# RSpec: "An error occurred while loading ./spec/models/x_spec.rb." ; pytest: "ERROR tests/x.py"
_LOAD_ERROR_FILE = re.compile(
    r"(?:while loading|ERROR collecting|ImportError while importing test module)\s+'?"
    r"(?:\./)?(?P<path>[\w./-]+?_spec\.rb|[\w./-]*test_[\w]+\.py|[\w./-]+_test\.py)"
)


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


class AuditSummary(BaseModel):
    files: int
    untested: int
    line_coverage: float
    specs_passing: int
    specs_failing: int


class AuditReport(BaseModel):
    """The `autopilot audit --json` document."""

    repo: str
    commit: str
    toolchain: ToolchainName
    summary: AuditSummary
    files: list[AuditFile]


def specs_failing_to_load(result: ValidationResult) -> list[str]:
    """Spec files named in a load error (the ones to set aside before running the rest)."""
    if result.loaded or not result.load_error:
        return []
    seen: dict[str, None] = {}
    for m in _LOAD_ERROR_FILE.finditer(result.load_error):
        seen[m.group("path")] = None
    return list(seen)


def isolate_culprits(
    run_one: Callable[[str], ValidationResult], specs: list[str]
) -> dict[str, str]:
    """Run each spec file alone and name the ones that cannot run: spec -> reason.

    Used when a whole-suite run was stopped (timeout, memory or process limit): one hostile or
    hanging spec must not hide every other file's results.
    """
    culprits: dict[str, str] = {}
    for spec in specs:
        result = run_one(spec)
        if result.reason:
            culprits[spec] = result.reason
        elif not result.loaded:
            culprits[spec] = "did not load"
    return culprits


def spec_outcomes(result: ValidationResult, broken: Iterable[str]) -> dict[str, bool]:
    """Spec file -> passed, from one suite run; `broken` specs did not load at all."""
    outcome: dict[str, bool] = {path: False for path in broken}
    for ex in result.examples:
        if not ex.file:
            continue
        path = ex.file.removeprefix("./")
        ok = ex.status in ("passed", "skipped")
        outcome[path] = outcome.get(path, True) and ok
    return outcome


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
    """
    outcomes = spec_outcomes(suite, broken_specs)
    lint_by_path: dict[str, int] = defaultdict(int)
    for off in lint:
        lint_by_path[off.path] += 1
    files: list[AuditFile] = []
    covered = executable = 0
    for mf in mapping.files:
        cov = coverage.get(mf.source)
        if cov is not None:
            covered += cov.covered_lines
            executable += cov.executable_lines
        verdicts = [static[s] for s in mf.specs if s in static]
        if not mf.specs:
            status: FileStatus = "untested"
        elif any(not outcomes.get(s, True) for s in mf.specs):
            status = "failing"
        else:
            status = "tested"
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
                reason="; ".join(f"{s}: {broken_specs[s]}" for s in mf.specs if s in broken_specs)
                or None,
            )
        )
    all_specs = set(outcomes) | {s for mf in mapping.files for s in mf.specs}
    failing = sum(1 for s in all_specs if not outcomes.get(s, True))
    return AuditReport(
        repo=repo,
        commit=commit,
        toolchain=mapping.toolchain,
        summary=AuditSummary(
            files=len(files),
            untested=sum(1 for f in files if f.status == "untested"),
            line_coverage=round(covered / executable, 4) if executable else 0.0,
            specs_passing=len(all_specs) - failing,
            specs_failing=failing,
        ),
        files=files,
    )


def table_rows(report: AuditReport) -> list[dict[str, object]]:
    """Rows for the Prefect table artifact and the CLI table."""
    return [
        {
            "file": f.source,
            "kind": f.kind.value,
            "status": f.status,
            "coverage": f"{f.coverage:.0%}",
            "static": "-" if f.static_score is None else f"{f.static_score:.2f}",
            "findings": len(f.findings),
            "lint": f.lint_offenses,
            "specs": ", ".join(f.specs),
        }
        for f in report.files
    ]


def markdown_summary(report: AuditReport) -> str:
    """A short markdown summary for the Prefect UI."""
    s = report.summary
    worst = sorted((f for f in report.files if f.status != "untested"), key=lambda f: f.coverage)[
        :5
    ]
    lines = [
        f"# Audit of {report.repo} at {report.commit[:12]}",
        "",
        f"- toolchain: **{report.toolchain}**",
        f"- source files: **{s.files}**, untested: **{s.untested}**",
        f"- line coverage: **{s.line_coverage:.1%}**",
        f"- spec files passing: **{s.specs_passing}**, failing: **{s.specs_failing}**",
    ]
    untested = [f.source for f in report.files if f.status == "untested"]
    if untested:
        lines += ["", "## Untested", *(f"- `{u}`" for u in untested)]
    if worst:
        lines += ["", "## Lowest coverage among tested files"]
        lines += [f"- `{f.source}`: {f.coverage:.0%}" for f in worst]
    return "\n".join(lines) + "\n"
