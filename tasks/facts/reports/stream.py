"""Reports to plain records, format detected by content; no pydantic on this path.

This is the fast path the CLI's ``parse --json`` streams from (validating and re-serialising
every case would double its cost); :mod:`tasks.facts.reports.read` wraps it into typed objects.

The format is recognised from the content, never from the file name: the first significant
character is ``<`` for XML (the root must then be ``<testsuites>`` or ``<testsuite>``) and ``{``
for RSpec JSON. Every problem with one file becomes a single ReportError line naming that file.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from tasks.core.errors import NotAReportError, ReportError
from tasks.facts.reports.cases import Record, Row, expand
from tasks.facts.reports.ids import CaseIds
from tasks.facts.reports.junit import junit_batches
from tasks.facts.reports.rspec import parse_rspec_json
from tasks.facts.stacktrace import PathNormaliser

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


def _batches(path: Path, norm: PathNormaliser, lean: bool) -> Iterator[list[Record | Row]]:
    source = str(path)
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
            raise NotAReportError(source, f"{_NOT_A_REPORT} ({detail})")
        if kind == "xml":
            try:
                yield from junit_batches(source, stream, head, norm, lean)
            except OSError as exc:
                raise ReportError(source, f"cannot read: {exc.strerror or exc}") from None
            return
        try:
            data = head + stream.read()
        except OSError as exc:
            raise ReportError(source, f"cannot read: {exc.strerror or exc}") from None
    yield list(parse_rspec_json(source, data, norm))


def iter_records(
    path: Path,
    repo: Path | None = None,
    normalise: PathNormaliser | None = None,
    ids: CaseIds | None = None,
) -> Iterator[Record]:
    """Yield the cases of one report as records, streaming JUnit XML in bounded memory.

    A record is a dict with exactly TestCaseResult's fields in its field order; use
    :func:`tasks.facts.reports.read.iter_report` for validated objects.

    Args:
        path: The report file.
        repo: Repository root: file paths and trace locations inside it become relative.
        normalise: A shared normaliser for ``repo`` (optional; saves resolving it per file).
        ids: The run's case ids, shared by its reports so ids are unique across them
            (default: unique within this report). They are committed when the report has
            been read to its end and rolled back otherwise.

    Raises:
        ReportError: when the file is missing, unreadable, empty, hostile or not a report.
            Cases already yielded from a file that then fails belong to a broken report.
    """
    for batch in case_batches(path, repo, normalise, ids):
        yield from cast(list[Record], batch)


def case_batches(
    path: Path,
    repo: Path | None = None,
    normalise: PathNormaliser | None = None,
    ids: CaseIds | None = None,
    lean: bool = False,
) -> Iterator[list[Record | Row]]:
    """The cases of :func:`iter_records` in lists, as they are read (fewer steps per case).

    With ``lean``, plain passing cases come as :data:`~tasks.facts.reports.cases.Row` tuples and
    captured output is not kept (for callers that only count cases and write their JSON).
    """
    norm = normalise if normalise is not None else PathNormaliser(repo)
    registry = ids if ids is not None else CaseIds()
    done = False
    try:
        for batch in _batches(path, norm, lean):
            _claim(registry, batch)
            yield batch
        done = True
    finally:
        if done:
            registry.commit()
        else:
            registry.rollback()


def _claim(ids: CaseIds, batch: list[Record | Row]) -> None:
    """Make the batch's ids unique: all at once when all are new, else case by case."""
    if ids.claim_new([case[0] if isinstance(case, tuple) else case["id"] for case in batch]):
        return
    for i, case in enumerate(batch):
        record = expand(case) if isinstance(case, tuple) else case
        record["id"], record["duplicate_of"] = ids.claim(record["id"])
        batch[i] = record
