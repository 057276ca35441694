"""Test reports (JUnit XML, RSpec JSON) to normalised TestCaseResult lists.

The format is recognised from the content, never from the file name (see
:mod:`tasks.facts.reports.stream`). Reports are untrusted input: every problem with one file becomes
a single ReportError line naming that file, and :func:`parse_reports` keeps every other file's
cases.

Case ids are unique within a run (see :mod:`tasks.facts.reports.ids`): RSpec JSON uses the example
id without the leading ``./`` (``spec/models/user_spec.rb[1:2]``); JUnit joins file (and line),
class and name as far as the report gives them; a case repeating an earlier id gets ``#2``... and
``duplicate_of``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from tasks.core.errors import NotAReportError, ReportError
from tasks.core.types import FileError, RunSummary, TestCaseResult, TestRun
from tasks.facts.reports.ids import CaseIds
from tasks.facts.reports.stream import iter_records
from tasks.facts.stacktrace import PathNormaliser

__all__ = ["iter_records", "iter_report", "parse_report", "parse_reports"]

log = logging.getLogger(__name__)


def iter_report(
    path: Path,
    repo: Path | None = None,
    normalise: PathNormaliser | None = None,
    ids: CaseIds | None = None,
) -> Iterator[TestCaseResult]:
    """Yield the cases of one report as TestCaseResult objects (see :func:`iter_records`).

    Raises:
        ReportError: when the file is missing, unreadable, empty, hostile or not a report.
    """
    validate = TestCaseResult.model_validate
    for record in iter_records(path, repo, normalise, ids):
        yield validate(record)


def parse_report(path: Path, repo: Path | None = None) -> list[TestCaseResult]:
    """Parse one JUnit XML or RSpec JSON report.

    Args:
        path: The report file (format detected from its content).
        repo: Repository root: file paths and trace locations inside it become relative.

    Returns:
        The report's cases in file order.

    Raises:
        ReportError: with the file and a one-line reason when the file cannot be used.
    """
    return list(iter_report(path, repo))


def parse_reports(paths: Iterable[Path], repo: Path | None = None) -> TestRun:
    """Parse several reports; a broken file becomes an error entry, the rest are kept.

    Args:
        paths: Report files.
        repo: Repository root for relative paths.

    Returns:
        All cases (ids unique across the reports), their summary, and one FileError per file
        that could not be used.
    """
    norm = PathNormaliser(repo)
    ids = CaseIds()
    cases: list[TestCaseResult] = []
    errors: list[FileError] = []
    for path in paths:
        try:
            cases.extend(list(iter_report(path, repo, norm, ids)))
        except ReportError as exc:
            log.warning("%s", exc)
            not_a_report = isinstance(exc, NotAReportError)
            errors.append(FileError(file=exc.file, error=exc.reason, not_a_report=not_a_report))
    return TestRun(summary=RunSummary.of(cases), cases=cases, errors=errors)
