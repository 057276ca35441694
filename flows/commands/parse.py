"""`autopilot parse REPORT... [--json]`: normalised test results from reports.

Kept light on purpose: its start-up time is part of what users wait for in CI. No Prefect, no
pydantic unless a table of failures is printed (rich only in a terminal): ``--json`` streams
the document (:mod:`tasks.facts.reports.stream_json`, beside the typed parser, because the
parse bench needs it), so memory stays flat on reports with hundreds of thousands of cases.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.facts.reports.stream_json import failures, write_json

if TYPE_CHECKING:
    from tasks.core.types import TestCaseResult

#: Failing cases listed in the human-readable table; the summary still counts all of them.
TABLE_LIMIT = 50


def _summary_line(summary: dict[str, Any], parsed: int) -> str:
    line = (
        f"{parsed} report(s): {summary['tests']} tests, {summary['passed']} passed, "
        f"{summary['failed']} failed, {summary['errors']} errors, {summary['skipped']} skipped "
        f"in {summary['duration']:.3f}s"
    )
    if summary["duplicates"]:
        line += f" ({summary['duplicates']} duplicate case ids, numbered #2...)"
    return line


def _print_table(summary: dict[str, Any], records: list[dict[str, Any]], parsed: int) -> None:
    """The failures table (:mod:`flows.commands.render`) and the summary line."""
    if not records:
        print(_summary_line(summary, parsed))
        return
    from flows.commands.render import Column, print_lines, print_table
    from tasks.core.types import TestCaseResult

    failing: list[TestCaseResult] = [TestCaseResult.model_validate(r) for r in records]
    rows = []
    for case in failing:
        where = case.locations[-1] if case.locations else None
        first_line = case.message.splitlines()[0][:120] if case.message else ""
        rows.append(
            [
                case.status,
                case.id,
                f"{case.error_type or ''} {first_line}".strip(),
                f"{where.path}:{where.line}" if where else (case.file or ""),
            ]
        )
    columns = [Column("status"), Column("test", path=True), Column("error")]
    print_table("Failures and errors", [*columns, Column("location", path=True)], rows)
    shown = summary["failed"] + summary["errors"]
    if shown > len(failing):
        print_lines(f"... and {shown - len(failing)} more failing cases")
    print_lines(_summary_line(summary, parsed))


def run(reports: list[Path], json_out: bool) -> int:
    """Parse reports and print their normalised results.

    Args:
        reports: Report files (JUnit XML or RSpec JSON, detected by content).
        json_out: Print one JSON document ``{"summary", "cases", "errors"}`` on stdout.

    Returns:
        0 when every report parsed, 2 when at least one could not be used (one line per bad
        file is written to stderr).
    """
    if json_out:
        sys.stdout.flush()
        errors = write_json(reports, sys.stdout.buffer)
    else:
        summary, failing, errors = failures(reports, TABLE_LIMIT)
        _print_table(summary, failing, len(reports) - len(errors))
    for err in errors:
        print(f"autopilot: error: {err['file']}: {err['error']}", file=sys.stderr)
    return 2 if errors else 0
