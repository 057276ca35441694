"""Test reports (JUnit XML, RSpec JSON) to normalised TestCaseResult lists.

The format is recognised from the content, never from the file name: the first significant
character is ``<`` for XML (the root must then be ``<testsuites>`` or ``<testsuite>``) and ``{``
for RSpec JSON. Reports are untrusted input: every problem with one file becomes a single
ReportError line naming that file, and :func:`parse_reports` keeps every other file's cases.

Case ids: RSpec JSON uses the example id without the leading ``./``
(``spec/models/user_spec.rb[1:2]``); JUnit uses ``file:line`` when both are known (a
parametrised pytest case appends its ``[params]`` so ids stay unique), ``file::name`` when only
the file is known (rspec_junit_formatter), else ``classname::name``.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from tasks.errors import ReportError
from tasks.reports_junit import Record, iter_junit
from tasks.reports_rspec import parse_rspec_json
from tasks.stacktrace import PathNormaliser
from tasks.types import FileError, RunSummary, TestCaseResult, TestRun

log = logging.getLogger(__name__)

_HEAD = 4096
_NOT_A_REPORT = "not a JUnit XML or RSpec JSON report"


def _first_significant(head: bytes) -> tuple[str, str]:
    """Return (kind, detail) for the start of a file: kind is xml, json, empty or other."""
    for bom, codec in (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if head.startswith(bom):
            text = head[len(bom) :].decode(codec, errors="ignore").lstrip()
            break
    else:
        if head.startswith((b"<\x00", b"\x00<")):
            return "xml", ""  # UTF-16 without a byte order mark
        text = head.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace").lstrip()
    if not text:
        return "empty", ""
    if text[0] == "<":
        return "xml", ""
    if text[0] in "{[":
        return "json", ""
    sample = head[:512]
    if b"\x00" in sample or sum(ch < 9 or 13 < ch < 32 for ch in sample) > len(sample) // 10:
        return "other", "binary data"
    first = text.splitlines()[0][:40]
    return "other", f"starts with {first!r}"


def iter_records(
    path: Path, repo: Path | None = None, normalise: PathNormaliser | None = None
) -> Iterator[Record]:
    """Yield the cases of one report as records, streaming JUnit XML in bounded memory.

    A record is a dict with exactly TestCaseResult's fields in its field order; use
    :func:`iter_report` for validated objects. This form exists for bulk output (the CLI's
    ``--json``), where validating and re-serialising every case would double the cost.

    Args:
        path: The report file.
        repo: Repository root: file paths and trace locations inside it become relative.
        normalise: A shared normaliser for ``repo`` (optional; saves resolving it per file).

    Raises:
        ReportError: when the file is missing, unreadable, empty, hostile or not a report.
            Cases already yielded from a file that then fails belong to a broken report.
    """
    source = str(path)
    norm = normalise if normalise is not None else PathNormaliser(repo)
    try:
        stream = path.open("rb")
    except FileNotFoundError:
        raise ReportError(source, "no such file") from None
    except IsADirectoryError:
        raise ReportError(source, "is a directory, not a report file") from None
    except OSError as exc:
        raise ReportError(source, f"cannot read: {exc.strerror or exc}") from None
    with stream:
        try:
            head = stream.read(_HEAD)
        except OSError as exc:
            raise ReportError(source, f"cannot read: {exc.strerror or exc}") from None
        kind, detail = _first_significant(head)
        if kind == "empty":
            raise ReportError(source, "empty file, not a JUnit XML or RSpec JSON report")
        if kind == "other":
            raise ReportError(source, f"{_NOT_A_REPORT} ({detail})")
        if kind == "xml":
            yield from iter_junit(source, stream, head, repo, norm)
            return
        try:
            data = head + stream.read()
        except OSError as exc:
            raise ReportError(source, f"cannot read: {exc.strerror or exc}") from None
    yield from parse_rspec_json(source, data, norm)


def iter_report(
    path: Path, repo: Path | None = None, normalise: PathNormaliser | None = None
) -> Iterator[TestCaseResult]:
    """Yield the cases of one report as TestCaseResult objects (see :func:`iter_records`).

    Raises:
        ReportError: when the file is missing, unreadable, empty, hostile or not a report.
    """
    validate = TestCaseResult.model_validate
    for record in iter_records(path, repo, normalise):
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
        All cases, their summary, and one FileError per file that could not be used.
    """
    norm = PathNormaliser(repo)
    cases: list[TestCaseResult] = []
    errors: list[FileError] = []
    for path in paths:
        try:
            cases.extend(list(iter_report(path, repo, norm)))
        except ReportError as exc:
            log.warning("%s", exc)
            errors.append(FileError(file=exc.file, error=exc.reason))
    return TestRun(summary=RunSummary.of(cases), cases=cases, errors=errors)
