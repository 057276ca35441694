"""`autopilot parse REPORT... [--json]`: normalised test results from reports.

Kept light on purpose: its start-up time is part of what users wait for in CI. No Prefect, no
pydantic and no rich unless a table of failures is printed: with ``--json`` the records stream
straight from the parser to a temporary spool file and are copied to stdout after the summary,
so memory stays flat on reports with hundreds of thousands of cases while the document still
opens with its summary.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tasks.core.errors import ReportError
from tasks.facts.reports.cases import Record, Row
from tasks.facts.reports.ids import CaseIds
from tasks.facts.reports.json_out import cases_json
from tasks.facts.reports.stream import case_batches
from tasks.facts.stacktrace import PathNormaliser

if TYPE_CHECKING:
    from tasks.core.types import TestCaseResult

#: Failing cases listed in the human-readable table; the summary still counts all of them.
TABLE_LIMIT = 50


class _Tally:
    """Running counts in the same order RunSummary.of would add them."""

    def __init__(self) -> None:
        self.counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        self.duration = 0.0
        self.duplicates = 0

    def snapshot(self) -> tuple[dict[str, int], float, int]:
        return dict(self.counts), self.duration, self.duplicates

    def restore(self, snap: tuple[dict[str, int], float, int]) -> None:
        self.counts, self.duration, self.duplicates = dict(snap[0]), snap[1], snap[2]

    def summary(self) -> dict[str, Any]:
        """The fields of RunSummary, in its order (see tasks.core.types)."""
        c = self.counts
        return {
            "tests": c["passed"] + c["failed"] + c["error"] + c["skipped"],
            "passed": c["passed"],
            "failed": c["failed"],
            "errors": c["error"],
            "skipped": c["skipped"],
            "duration": round(self.duration, 6),
            "duplicates": self.duplicates,
        }


def _parse_into(
    reports: list[Path], spool: IO[bytes] | None, failing: list[dict[str, Any]] | None
) -> tuple[_Tally, list[dict[str, str]]]:
    """Stream every report's cases into ``spool`` (JSON) and/or ``failing`` (the table)."""
    tally = _Tally()
    errors: list[dict[str, str]] = []
    norm = PathNormaliser(None)
    ids = CaseIds()
    for path in reports:
        snap = tally.snapshot()
        position = spool.tell() if spool is not None else 0
        kept = len(failing) if failing is not None else 0
        try:
            # Lean: passing cases come as tuples, captured output (not in the JSON) is skipped.
            for batch in case_batches(path, None, norm, ids, lean=True):
                _count(tally, batch)
                if failing is not None and len(failing) < TABLE_LIMIT:
                    failing.extend(
                        [
                            r for r in batch
                            if isinstance(r, dict) and r["status"] in ("failed", "error")
                        ][: TABLE_LIMIT - len(failing)]
                    )  # fmt: skip
                if spool is not None:
                    # Records go to JSON as they are: they carry TestCaseResult's fields in its
                    # order, and validating 200k of them only to serialise them again would
                    # double the run time. Every case is written as ",\n{...}"; run() drops
                    # the very first comma.
                    spool.write(cases_json(batch).encode())
        except ReportError as exc:
            # A broken report contributes nothing, exactly as parse_reports() treats it.
            tally.restore(snap)
            if failing is not None:
                del failing[kept:]
            if spool is not None:
                spool.seek(position)
                spool.truncate()
            errors.append({"file": exc.file, "error": exc.reason})
    return tally, errors


def _count(tally: _Tally, batch: list[Record | Row]) -> None:
    """Add a batch of cases to the running counts (in report order, as RunSummary.of)."""
    counts = tally.counts
    duration = tally.duration
    passed = duplicates = 0
    for case in batch:
        if isinstance(case, tuple):
            passed += 1
            duration += case[5]
            continue
        counts[case["status"]] += 1
        duration += case["duration"]
        if case["duplicate_of"] is not None:
            duplicates += 1
    counts["passed"] += passed
    tally.duration = duration
    tally.duplicates += duplicates


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
    """The failures table (rich, imported only here) and the summary line."""
    if not records:
        print(_summary_line(summary, parsed))
        return
    from rich.console import Console
    from rich.table import Table

    from tasks.core.types import TestCaseResult

    failing: list[TestCaseResult] = [TestCaseResult.model_validate(r) for r in records]
    # CI logs are not terminals: rich would wrap ids at 80 columns there.
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    console = Console(width=None if wide else 160)
    table = Table(title="Failures and errors")
    for column in ("status", "test", "error", "location"):
        table.add_column(column, overflow="fold")
    for case in failing:
        where = case.locations[-1] if case.locations else None
        first_line = case.message.splitlines()[0][:120] if case.message else ""
        table.add_row(
            case.status,
            case.id,
            f"{case.error_type or ''} {first_line}".strip(),
            f"{where.path}:{where.line}" if where else (case.file or ""),
        )
    console.print(table)
    shown = summary["failed"] + summary["errors"]
    if shown > len(failing):
        console.print(f"... and {shown - len(failing)} more failing cases")
    console.print(_summary_line(summary, parsed))


def _copy(spool: IO[bytes], start: int, out: IO[bytes]) -> None:
    """Copy the spool from ``start`` to ``out``: in the kernel where it can (sendfile)."""
    spool.flush()
    out.flush()
    end = spool.seek(0, os.SEEK_END)
    try:
        out_fd, spool_fd = out.fileno(), spool.fileno()
        while start < end:
            sent = os.sendfile(out_fd, spool_fd, start, end - start)
            if not sent:
                break
            start += sent
        if start >= end:
            return
    except BrokenPipeError:
        raise  # the reader went away (`| head`): flows.entry ends quietly
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a file descriptor sendfile takes: copy through Python, from where it stopped
    spool.seek(start)
    shutil.copyfileobj(spool, out, 1 << 20)


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
        with tempfile.TemporaryFile("w+b") as spool:
            tally, errors = _parse_into(reports, spool, None)
            summary = tally.summary()
            sys.stdout.flush()
            out = sys.stdout.buffer
            out.write(b'{"summary": ' + json.dumps(summary).encode() + b', "cases": [')
            _copy(spool, 1 if summary["tests"] else 0, out)  # skip the first case's comma
            errs = json.dumps(errors).encode()
            out.write((b"\n" if summary["tests"] else b"") + b'], "errors": ' + errs + b"}\n")
            out.flush()
    else:
        failing: list[dict[str, Any]] = []
        tally, errors = _parse_into(reports, None, failing)
        _print_table(tally.summary(), failing, len(reports) - len(errors))
    for err in errors:
        print(f"autopilot: error: {err['file']}: {err['error']}", file=sys.stderr)
    return 2 if errors else 0
