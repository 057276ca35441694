"""Reports to the ``{"summary", "cases", "errors"}`` document without building typed cases: the
streamed writer ``autopilot parse --json`` needs for huge reports (bench/parse_bench.py).

The records stream from the parser to a temporary spool file and are copied to the output after
the summary, so memory stays flat on reports with hundreds of thousands of cases while the
document still opens with its summary. It sits beside the typed path
(:func:`tasks.facts.reports.read.parse_reports`) and writes the same document: the records carry
TestCaseResult's fields in its order (:mod:`tasks.facts.reports.json_out`), the summary is
counted by the same rule (:class:`tasks.core.counts.CaseTally`), and a broken report
contributes nothing, as there. No pydantic here: the command's start-up stays light.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any

from tasks.core.counts import CaseTally
from tasks.core.errors import ReportError
from tasks.facts.reports.cases import Record, Row
from tasks.facts.reports.ids import CaseIds
from tasks.facts.reports.json_out import cases_json
from tasks.facts.reports.stream import case_batches
from tasks.facts.stacktrace import PathNormaliser

#: One line per report that could not be used: ``{"file", "error"}``.
FileErrors = list[dict[str, str]]


def write_json(reports: list[Path], out: IO[bytes]) -> FileErrors:
    """Write the reports' document to `out`; returns the files that could not be used."""
    with tempfile.TemporaryFile("w+b") as spool:
        tally, errors = _parse_into(reports, spool, None)
        summary = tally.summary()
        out.write(b'{"summary": ' + json.dumps(summary).encode() + b', "cases": [')
        _copy(spool, 1 if summary["tests"] else 0, out)  # skip the first case's comma
        errs = json.dumps(errors).encode()
        out.write((b"\n" if summary["tests"] else b"") + b'], "errors": ' + errs + b"}\n")
        out.flush()
    return errors


def failures(reports: list[Path], limit: int) -> tuple[dict[str, Any], list[Record], FileErrors]:
    """(summary, the first `limit` failing or erroring records, the unusable files)."""
    failing: list[Record] = []
    tally, errors = _parse_into(reports, None, failing, limit)
    return tally.summary(), failing, errors


def _parse_into(
    reports: list[Path],
    spool: IO[bytes] | None,
    failing: list[Record] | None,
    limit: int = 0,
) -> tuple[CaseTally, FileErrors]:
    """Stream every report's cases into ``spool`` (JSON) and/or ``failing`` (at most
    `limit`)."""
    tally = CaseTally()
    errors: FileErrors = []
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
                if failing is not None and len(failing) < limit:
                    failing.extend(
                        [
                            r for r in batch
                            if isinstance(r, dict) and r["status"] in ("failed", "error")
                        ][: limit - len(failing)]
                    )  # fmt: skip
                if spool is not None:
                    # Records go to JSON as they are: validating 200k of them only to serialise
                    # them again would double the run time. Every case is written as ",\n{...}";
                    # write_json() drops the very first comma.
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


def _count(tally: CaseTally, batch: list[Record | Row]) -> None:
    """Add a batch of cases to the counts, in report order (passing rows in bulk: fast)."""
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
