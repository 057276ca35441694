"""Streaming JUnit XML parser: bounded memory, no entity expansion, no external entities.

It drives expat directly instead of building a tree (ElementTree, junitparser): a report with
hundreds of thousands of cases is read in fixed-size chunks and every case is handed on as soon
as its ``</testcase>`` is seen, so memory depends on the largest case, not on the file. Nesting
depth costs one small entry per open ``<testsuite>`` and no recursion, so 10,000 nested suites
are fine.

Hostile input: any ``<!ENTITY>`` declaration (billion laughs, external entities such as
``file:///etc/passwd``) is refused before it can be expanded or read, and parameter entities and
external DTDs are never loaded.

Dialects: pytest (xunit1 ``file``/``line``, where ``line`` is 0-based, and xunit2), Maven
Surefire/Failsafe (``flakyFailure``/``rerunFailure`` are ignored: the case's own outcome counts),
Gradle, rspec_junit_formatter (``file``), jest-junit, go-junit-report, Ant; ``<testsuites>`` or a
bare ``<testsuite>``, suites nested at any depth, ``<properties>`` anywhere (ignored). A
testcase without ``file`` inherits the nearest enclosing suite's ``file`` attribute. Suite-level
``system-out``/``system-err`` are not attached to cases; a case's own are kept (capped).
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any
from xml.parsers import expat

from tasks.errors import ReportError
from tasks.stacktrace import PathNormaliser, trace_pairs
from tasks.types import TestStatus

#: One test case as a plain dict with the fields of TestCaseResult.
Record = dict[str, Any]

#: Small enough that the cases completed by one chunk (yielded after it) stay few.
CHUNK = 1 << 16
#: Captured output beyond this is cut (the tail is kept: the end of a log explains a failure).
MAX_OUTPUT = 64 * 1024
#: Failure text beyond this is cut (the head is kept: it holds the message and innermost frames).
MAX_TRACE = 1024 * 1024

_RESULTS: dict[str, TestStatus] = {"failure": "failed", "error": "error", "skipped": "skipped"}
_DECLARED = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
# Characters XML 1.0 forbids; real reports carry them (ANSI colour codes in captured output).
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_TYPE_LINE = re.compile(r"^\S+:\d+: ([A-Za-z_][\w.]*)\s*$", re.M)
_TYPE_PREFIX = re.compile(
    r"^((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Failure|Exit|Interrupt))(?=:|$)"
)
_PARAMS = re.compile(r"(\[.*\])$", re.S)


class _Refused(Exception):
    """Raised from inside expat callbacks to abort on hostile or foreign content."""


def _needs_utf8_sanitising(head: bytes) -> bool:
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, b"<\x00", b"\x00<")):
        return False  # UTF-16/32: expat decodes it itself
    m = _DECLARED.match(head)
    return m is None or m.group(1).lower().replace(b"_", b"-") in (b"utf-8", b"utf8")


def _chunks(stream: IO[bytes], head: bytes) -> Iterator[bytes]:
    """Yield the file in chunks; UTF-8 input is repaired on the way (bad bytes, control chars).

    Invalid UTF-8 would make expat reject the whole file, so it is decoded with replacement
    characters instead, which keeps every case and marks the damage where it is.
    """
    if not _needs_utf8_sanitising(head):
        yield head
        while chunk := stream.read(CHUNK):
            yield chunk
        return
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    data = head
    while True:
        text = decoder.decode(data, final=not data)
        if _FORBIDDEN.search(text):
            text = _FORBIDDEN.sub("\ufffd", text)
        yield text.encode("utf-8")
        if not data:
            return
        data = stream.read(CHUNK)


def _number(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        try:
            number = float(value.replace(",", ""))  # Surefire writes 1,234.5 in some locales
        except ValueError:
            return 0.0
    return number if math.isfinite(number) and number >= 0 else 0.0


def _line(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _error_type(attr: str | None, message: str | None, trace: str | None) -> str | None:
    if attr:
        return attr
    if trace:
        # pytest ends a failure with "path:line: ErrorType"; the last such line is innermost.
        found = _TYPE_LINE.findall(trace)
        if found:
            return str(found[-1])
    if message:
        m = _TYPE_PREFIX.match(message)
        if m:
            return m.group(1)
    return None


class _Builder:
    """expat callbacks that turn testcase elements into TestCaseResult objects."""

    def __init__(self, repo: Path | None, norm: PathNormaliser) -> None:
        self.repo = repo
        self.norm = norm
        self.seen_root = False
        self.depth = 0
        # Per open <testsuite>: (file attribute or inherited, inside a pytest suite).
        self.suites: list[tuple[str | None, bool]] = []
        self.done: list[Record] = []
        self.case: dict[str, str] | None = None
        self.case_depth = 0
        self.result: tuple[str, dict[str, str]] | None = None
        self.result_text: list[str] = []
        self.out: list[str] = []
        self.err: list[str] = []
        self.sink: list[str] | None = None
        self.sink_depth = 0
        self.sink_size = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if not self.seen_root:
            if name not in ("testsuites", "testsuite"):
                raise _Refused(
                    f"XML root is <{name[:40]}>, not <testsuites> or <testsuite>: "
                    "not a JUnit XML report"
                )
            self.seen_root = True
        if self.sink is not None:
            return
        if name == "testsuite":
            parent_file, parent_pytest = self.suites[-1] if self.suites else (None, False)
            self.suites.append(
                (attrs.get("file") or parent_file, parent_pytest or attrs.get("name") == "pytest")
            )
        elif name == "testcase" and self.case is None:
            self.case, self.case_depth = attrs, self.depth
            self.result, self.result_text, self.out, self.err = None, [], [], []
        elif self.case is not None and self.depth == self.case_depth + 1:
            status = _RESULTS.get(name)
            if status is not None:
                # The first outcome wins, but a failure or error outranks a skip.
                if self.result is None or (self.result[0] == "skipped" and status != "skipped"):
                    self.result, self.result_text = (name, attrs), []
                    self._collect(self.result_text)
            elif name == "system-out":
                self._collect(self.out)
            elif name == "system-err":
                self._collect(self.err)

    def _collect(self, into: list[str]) -> None:
        self.sink, self.sink_depth, self.sink_size = into, self.depth, 0

    def text(self, data: str) -> None:
        sink = self.sink
        if sink is None:
            return
        limit = MAX_TRACE if sink is self.result_text else MAX_OUTPUT
        if sink is self.result_text and self.sink_size >= limit:
            return  # keep the head of a trace
        sink.append(data)
        self.sink_size += len(data)
        if sink is not self.result_text and self.sink_size > 2 * limit:
            joined = "".join(sink)[-limit:]  # keep the tail of captured output
            sink[:] = [joined]
            self.sink_size = len(joined)

    def end(self, name: str) -> None:
        if self.sink is not None and self.depth == self.sink_depth:
            self.sink = None
        if self.case is not None and self.depth == self.case_depth:
            self.done.append(self._finish(self.case))
            self.case = None
        elif name == "testsuite" and self.case is None and self.suites:
            self.suites.pop()
        self.depth -= 1

    def _finish(self, attrs: dict[str, str]) -> Record:
        suite_file, pytest_suite = self.suites[-1] if self.suites else (None, False)
        name = attrs.get("name", "")
        classname = attrs.get("classname") or attrs.get("class") or ""
        raw_file = attrs.get("file") or suite_file
        file = self.norm(raw_file) if raw_file else None
        line = _line(attrs.get("line"))
        if line is not None and pytest_suite:
            line += 1  # pytest writes the 0-based line of the test function
        status: TestStatus = "passed"
        message = error_type = trace = None
        if self.result is not None:
            tag, rattrs = self.result
            status = _RESULTS[tag]
            text = "".join(self.result_text).strip()
            message = (rattrs.get("message") or "").strip() or (
                text.splitlines()[0] if text else None
            )
            if status != "skipped":
                trace = text or None
                error_type = _error_type(rattrs.get("type"), message, trace)
        if file is not None and line is not None:
            params = _PARAMS.search(name)
            case_id = f"{file}:{line}{params.group(1) if params else ''}"
        elif file is not None:
            case_id = f"{file}::{name}"
        else:
            case_id = f"{classname}::{name}"
        return {
            "id": case_id,
            "name": name,
            "classname": classname,
            "file": file,
            "line": line,
            "status": status,
            "duration": _number(attrs.get("time")),
            "message": message,
            "error_type": error_type,
            "trace": trace,
            "locations": [{"path": p, "line": n} for p, n in trace_pairs(trace, self.norm)]
            if trace
            else [],
            "stdout": "".join(self.out)[-MAX_OUTPUT:] or None if self.out else None,
            "stderr": "".join(self.err)[-MAX_OUTPUT:] or None if self.err else None,
        }


def _refuse_entity(*_: Any) -> None:
    raise _Refused("entity declarations are refused (entity expansion or external entity)")


def _refuse_external(*_: Any) -> int:
    raise _Refused("external entities are refused")


def iter_junit(
    source: str, stream: IO[bytes], head: bytes, repo: Path | None, norm: PathNormaliser
) -> Iterator[Record]:
    """Yield the cases of a JUnit XML report as records, as they are read.

    A record is a dict with exactly the fields of TestCaseResult, in its field order
    (locations as ``{"path", "line"}`` dicts); callers validate it into a TestCaseResult, or,
    when only JSON output is wanted, serialise it directly (validation would double the cost).

    Args:
        source: The report's name for error messages.
        stream: The open file, positioned just after ``head``.
        head: The bytes already read from the start of the file (for sniffing).
        repo: Repository root for relative paths.
        norm: The path normaliser for ``repo``.

    Raises:
        ReportError: on malformed, truncated, hostile or non-JUnit XML.
    """
    builder = _Builder(repo, norm)
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_external
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.text
    chunks: Iterable[bytes] = _chunks(stream, head)
    try:
        for chunk in chunks:
            parser.Parse(chunk, False)
            if builder.done:
                yield from builder.done
                builder.done.clear()
        parser.Parse(b"", True)
    except _Refused as exc:
        raise ReportError(source, str(exc)) from None
    except expat.ExpatError as exc:
        what = (
            "malformed or truncated JUnit XML"
            if builder.seen_root
            else "not a JUnit XML or RSpec JSON report"
        )
        reason = expat.ErrorString(exc.code)
        raise ReportError(
            source, f"{what} (line {exc.lineno}, column {exc.offset + 1}: {reason})"
        ) from None
    except (LookupError, ValueError) as exc:  # unknown declared encoding, bad codec data
        raise ReportError(source, f"cannot decode XML: {exc}") from None
    yield from builder.done
