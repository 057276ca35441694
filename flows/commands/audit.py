"""`autopilot audit --repo PATH [--ref REF] [--json]`: coverage, lint, static rubric, pass/fail.

No model is involved. Inputs are checked before the audit starts, so a bad repository or ref is
one line on stderr (exit 2), never a flow-run traceback. With a Prefect server configured
(``PREFECT_API_URL``) the audit is a flow run on it, visible in the UI; without one it runs
in-process with no Prefect at all (an ephemeral server would cost ~10 s per audit). A suite that
did not run, or a tool that failed, is one line each on stderr and exit 1. The table of files is
followed by the failing tests (the first :data:`FAILING_SHOWN`, then a count of the rest) and
the test files set aside.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from flows.commands.render import Column, print_lines, print_table
from tasks.audit.report import FAILING_SHOWN, AuditReport, table_rows
from tasks.audit.run import check_inputs
from tasks.core.errors import AutopilotError


def _print_table(report: AuditReport) -> None:
    columns = [
        Column("file", path=True),
        Column("kind"),
        Column("status", style={"tested": "green", "untested": "yellow", "failing": "red"}),
        Column("cov", justify="right"),
        Column("static", justify="right"),
        Column("finds", justify="right"),
        Column("lint", justify="right"),
    ]
    keys = ("file", "kind", "status", "coverage", "static", "findings", "lint")
    rows = [[row[k] for k in keys] for row in table_rows(report)]
    print_table(
        f"Audit of {report.repo} at {report.commit[:12]} ({report.toolchain})", columns, rows
    )
    _print_failing(report)
    s, t = report.summary, report.summary.tests
    print_lines(
        f"{s.files} files, {s.untested} untested, line coverage {s.line_coverage:.1%}, "
        f"spec files passing {s.specs_passing}, failing {s.specs_failing}, "
        f"no test ran {s.specs_not_run}; tests {t.tests}: {t.passed} passed, {t.failed} failed, "
        f"{t.errors} errors, {t.skipped} skipped",
        *(f"prepared: {note}" for note in report.prepared),
        *(f"warning: {warning}" for warning in report.warnings),
    )


def _print_failing(report: AuditReport) -> None:
    """The failing tests under the files (capped: a 300-file project stays readable), and the
    test files that could not run."""
    failing = report.failing_tests
    if failing:
        columns = [
            Column("test", path=True),
            Column("at", path=True),
            Column("message"),
            Column("source", path=True),
        ]
        rows = [[t.id, t.location, t.message, t.sources] for t in failing[:FAILING_SHOWN]]
        print_table(f"Failing tests ({len(failing)})", columns, rows)
        if len(failing) > FAILING_SHOWN:
            print_lines(f"... and {len(failing) - FAILING_SHOWN} more failing tests (--json)")
    print_lines(*(f"set aside: {f}: {why}" for f, why in report.suite.set_aside.items()))


def run(repo: Path, ref: str, json_out: bool, verbose: bool | int = False) -> int:
    """Audit `repo` at `ref` and print the report (JSON or a table).

    Returns:
        0 when the audit ran; 1 when the suite did not run or a tool failed (one line each on
        stderr); 2 for bad input or configuration (one line on stderr).
    """
    try:
        check_inputs(repo, ref)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    if api := os.environ.get("PREFECT_API_URL"):
        import httpx

        from flows.audit import audit
        from flows.runtime import flow_runtime

        try:
            with flow_runtime(verbose):
                report = audit(repo=str(repo), ref=ref)
        except (httpx.TransportError, RuntimeError) as exc:
            if isinstance(exc, RuntimeError) and "Failed to reach API" not in str(exc):
                raise
            print(
                f"autopilot: error: cannot reach the Prefect server at {api} ({exc}); unset "
                "PREFECT_API_URL to audit without Prefect",
                file=sys.stderr,
            )
            return 2
    else:
        from tasks.audit.run import audit_repo

        report = audit_repo(repo, ref)
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print_table(report)
    for line in report.problems():
        print(f"autopilot: {line}", file=sys.stderr)
    return report.exit_code()
