"""Streaming JUnit XML parser: the C parser does the work, memory stays bounded, no entities.

The hot loop is expat, CPython's C XML parser, driven directly with a few small handlers: no
element tree is built. The document is fed in chunks; a ``<testcase>`` becomes a record when it
ends, from its attributes and the results and output inside it, so memory depends on one case,
not on the file. Text reaches Python only inside a case's result or output elements, and
streams through a capped buffer there: the head of a failure's text (:data:`MAX_TRACE`), the
tail of captured output (:data:`MAX_OUTPUT`); 100 MB of ``<system-out>`` or a gigabyte of
comments between cases cost no more memory than a small report. Nesting depth costs one small
entry per open suite and no recursion, so 10,000 nested suites are fine. Only a single tag or
comment, which expat must hold whole, is limited: one larger than :data:`MAX_TOKEN` bytes (a
hostile file) is refused. While a tag stays open the chunks grow with it, because expat 2.5
re-reads an open token from its start on every call: fixed chunks made a 60 MB attribute take
45 s (quadratic), growing ones take linear time.

Hostile input: :class:`~tasks.facts.reports.xmlin.EntityGuard` refuses every entity declaration and
every entity reference (billion laughs, ``file:///etc/passwd``, entities from an external DTD)
before the C parser could expand anything; external DTDs are never loaded.

Counting follows the reference tools (Jenkins' JUnit plugin, GoogleTest's and CTest's own
summaries): a case has exactly one status. ``<error>`` outranks ``<failure>``, which outranks
``<skipped>``; the other results stay on the case as ``other_results``. A case marked
``status="disabled"``/``"notrun"`` (CTest, GoogleTest's ``DISABLED_`` tests) or sitting in a
suite that declares all its tests disabled is skipped, with the reason. Surefire's re-run
records (``rerunFailure``, ``flakyFailure``...) never change the status (the case's own outcome
counts) but are kept as ``other_results``.

Dialects: pytest (xunit1 ``file``/``line``, where ``line`` is 0-based, and xunit2), Maven
Surefire/Failsafe, Gradle, rspec_junit_formatter (``file``), jest-junit, go-junit-report, Ant,
PHPUnit (``class``, ``file``, ``line``), GoogleTest, CTest; ``<testsuites>`` or a bare
``<testsuite>``, suites nested at any depth, ``<properties>`` anywhere (ignored). A testcase
without ``file`` inherits the nearest enclosing suite's ``file``. Suite-level
``system-out``/``system-err`` are not attached to cases; a case's own are kept (capped).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any
from xml.parsers import expat

from tasks.core.errors import ReportError
from tasks.facts.reports.cases import (
    MAX_OUTPUT,
    MAX_TRACE,
    NO_SUITE,
    RERUNS,
    SEVERITY,
    Record,
    Row,
    Suite,
    expand,
    line_number,
    not_run,
    number,
    ranked,
    result_of,
)
from tasks.facts.reports.ids import base_id
from tasks.facts.reports.xmlin import (
    CHUNK,
    EntityGuard,
    Refused,
    Utf8Reader,
    refuse_declaration,
    refuse_external,
)
from tasks.facts.stacktrace import PathNormaliser, trace_pairs

if TYPE_CHECKING:
    from tasks.core.types import TestStatus

#: One tag or comment larger than this (bytes) is refused: expat must hold it whole (and
#: peak memory is a few times this).
MAX_TOKEN = 16 * 1024 * 1024
_ENTITY_ERROR = 11  # expat's XML_ERROR_UNDEFINED_ENTITY
_INF = math.inf
#: A case's children whose text is kept: results (head kept) and captured output (tail kept).
_RESULTS = frozenset({*SEVERITY, *RERUNS})
_OUTPUT = ("system-out", "system-err")
_CAPTURED = _RESULTS | frozenset(_OUTPUT)


class _Reader:
    """expat's handlers: a record for every <testcase>, built when it ends.

    Outside a case only suites are tracked; inside one, only the case's direct children that
    carry results or output, whose text (CDATA and nested elements' text included) streams
    into a capped buffer: the head of a failure's text, the tail of captured output. Every
    other text is never handed to Python at all.
    """

    def __init__(self, parser: Any, norm: PathNormaliser, lean: bool) -> None:
        """Attach to ``parser`` (its element handlers are set here).

        ``lean``: plain passing cases become :data:`Row` tuples and captured output is skipped.
        """
        self._parser = parser
        self._norm = norm
        self._lean = lean
        self._captured = _RESULTS if lean else _CAPTURED
        #: Records (and rows, when lean) of the cases finished since the caller took them.
        self.records: list[Record | Row] = []
        self.root_seen = False
        self._suites: list[Suite] = []
        self._suite = NO_SUITE
        self._depth = 0  # 0 outside a testcase, 1 in it, 2 in one of its children...
        self._attrs: dict[str, str] = {}
        self._results: list[tuple[int, Record]] = []  # (severity, result) in report order
        self._output: dict[str, str] = {}
        self._child: tuple[str, dict[str, str]] | None = None
        self._buf: list[str] = []
        self._size = 0
        parser.StartElementHandler = self._start_root
        parser.EndElementHandler = self._end

    def _start_root(self, tag: str, attrs: dict[str, str]) -> None:
        if tag not in ("testsuites", "testsuite"):
            raise Refused(
                f"XML root is <{tag[:40]}>, not <testsuites> or <testsuite>: not a JUnit XML report"
            )
        self.root_seen = True
        self._parser.StartElementHandler = self._start
        self._start(tag, attrs)

    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        depth = self._depth
        if depth:
            self._depth = depth + 1
            if depth == 1 and tag in self._captured:
                self._child = (tag, attrs)
                self._buf = []
                self._size = 0
                self._parser.CharacterDataHandler = self._tail if tag in _OUTPUT else self._head
        elif tag == "testcase":
            self._depth = 1
            self._attrs = attrs
        elif tag == "testsuite":
            self._suite = Suite(attrs, self._suite if self._suites else None)
            self._suites.append(self._suite)

    def _end(self, _tag: str) -> None:
        depth = self._depth
        if depth == 1:
            self._depth = 0
            self.records.append(self._record())
        elif depth:
            self._depth = depth - 1
            if depth == 2 and self._child is not None:
                self._end_child(*self._child)
        elif _tag == "testsuite":
            self._suites.pop()
            self._suite = self._suites[-1] if self._suites else NO_SUITE

    def _head(self, data: str) -> None:
        if self._size < MAX_TRACE:
            self._buf.append(data)
            self._size += len(data)

    def _tail(self, data: str) -> None:
        self._buf.append(data)
        self._size += len(data)
        if self._size > 2 * MAX_OUTPUT:
            kept = "".join(self._buf)[-MAX_OUTPUT:]
            self._buf = [kept]
            self._size = len(kept)

    def _end_child(self, tag: str, attrs: dict[str, str]) -> None:
        self._parser.CharacterDataHandler = None
        self._child = None
        text = "".join(self._buf)
        self._buf = []
        if tag in _OUTPUT:
            if text:
                self._output[tag] = text[-MAX_OUTPUT:]
            return
        severity = SEVERITY.get(tag)
        self._results.append(
            (severity[0] if severity else 0, result_of(tag, attrs, text[:MAX_TRACE]))
        )

    def _record(self) -> Record | Row:
        """The record of the case that just ended (the per-case hot path)."""
        attrs = self._attrs
        get = attrs.get
        suite = self._suite
        name = get("name", "")
        classname = get("classname") or get("class") or ""
        file = get("file") or suite.file
        if file:
            file = self._norm(file) or None
        line: Any = get("line")
        if line is not None:
            line = line_number(line)
            if line is not None and suite.pytest:
                line += 1  # pytest writes the 0-based line of the test function
        duration: Any = get("time")
        if duration is None:
            duration = 0.0
        else:
            try:
                duration = float(duration)
            except ValueError:
                duration = number(duration)
            if not 0.0 <= duration < _INF:  # negative, infinite or NaN
                duration = 0.0
        if file is None and classname and classname != name:
            id_ = f"{classname}::{name}"  # base_id's first rule, inlined: most cases take it
        else:
            id_ = base_id(file, line, classname, name, suite.name)
        if self._results or self._output or "status" in attrs or "result" in attrs:
            return self._detailed(id_, name, classname, file, line, duration)
        if suite.all_disabled:
            return self._detailed(id_, name, classname, file, line, duration)
        if self._lean:
            return (id_, name, classname, file, line, duration)
        return expand((id_, name, classname, file, line, duration))

    def _detailed(
        self, id_: str, name: str, classname: str, file: str | None, line: int | None,
        duration: float,
    ) -> Record | Row:  # fmt: skip
        """The record of a case with results, output or a status attribute."""
        status: TestStatus = "passed"
        message = error_type = trace = None
        others: list[Record] = []
        locations: list[dict[str, Any]] = []
        if self._results:
            main, others = ranked(self._results)
            self._results = []
            if main is not None:
                status = SEVERITY[main["kind"]][1]
                message, error_type, trace = main["message"], main["error_type"], main["trace"]
                if trace:
                    locations = [{"path": p, "line": n} for p, n in trace_pairs(trace, self._norm)]
        if status == "passed":
            reason = not_run(self._attrs, self._suite)
            if reason:
                status, message = "skipped", reason
        out = err = None
        if self._output:
            out, err = self._output.get("system-out"), self._output.get("system-err")
            self._output = {}
        if self._lean and status == "passed" and not others:
            return (id_, name, classname, file, line, duration)
        return {
            "id": id_,
            "name": name,
            "classname": classname,
            "file": file,
            "line": line,
            "status": status,
            "duration": duration,
            "message": message,
            "error_type": error_type,
            "trace": trace,
            "locations": locations,
            "other_results": others,
            "duplicate_of": None,
            "stdout": out,
            "stderr": err,
        }


def _parser() -> Any:
    """An expat parser that reads UTF-8 whatever the document declares and loads nothing."""
    parser = expat.ParserCreate(encoding="utf-8")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.EntityDeclHandler = refuse_declaration
    parser.UnparsedEntityDeclHandler = refuse_declaration
    parser.ExternalEntityRefHandler = refuse_external
    parser.buffer_text = True  # a text arrives in few calls, not one per line or reference
    parser.buffer_size = CHUNK
    return parser


def _parse_error(source: str, exc: expat.ExpatError, seen_root: bool) -> ReportError:
    line, column = exc.lineno, exc.offset
    reason = expat.ErrorString(exc.code)
    if exc.code == _ENTITY_ERROR:
        return ReportError(
            source,
            f"entity reference refused (line {line}, column {column + 1}: {reason}; "
            "entities are not expanded)",
        )
    what = (
        "malformed or truncated JUnit XML" if seen_root else "not a JUnit XML or RSpec JSON report"
    )
    return ReportError(source, f"{what} (line {line}, column {column + 1}: {reason})")


def junit_batches(
    source: str, stream: IO[bytes], head: bytes, norm: PathNormaliser, lean: bool = False
) -> Iterator[list[Record | Row]]:
    """Yield the cases of a JUnit XML report as lists of records, as they are read.

    A record is a dict with exactly the fields of TestCaseResult, in its field order
    (locations as ``{"path", "line"}`` dicts, other results as dicts); callers validate it into
    a TestCaseResult or, when only JSON output is wanted, serialise it directly. Its ``id`` is
    the base id (see :mod:`tasks.facts.reports.ids`); the caller makes it unique. One list holds the
    cases one chunk of input completed.

    Args:
        source: The report's name for error messages.
        stream: The open file, positioned just after ``head``.
        head: The bytes already read from the start of the file (for sniffing).
        norm: The path normaliser for the repository.
        lean: Give plain passing cases as :data:`Row` tuples and skip captured output.

    Raises:
        ReportError: on malformed, truncated, hostile or non-JUnit XML.
    """
    chunks = Utf8Reader(stream, head, source)
    guard = EntityGuard()
    parser = _parser()
    reader = _Reader(parser, norm, lean)
    parse = parser.Parse
    size = CHUNK
    fed = 0
    try:
        while not chunks.eof:
            data = chunks.read(size)
            guard.feed(data)
            parse(data, chunks.eof)
            if reader.records:
                yield reader.records
                reader.records = []
            # Bytes expat holds for a token still open (a tag, a comment; text streams out).
            fed += len(data)
            held = fed - parser.CurrentByteIndex if parser.CurrentByteIndex >= 0 else 0
            if held > MAX_TOKEN:
                raise Refused(
                    f"a single tag or comment is larger than {MAX_TOKEN // 2**20} MB "
                    "(refused to bound memory)"
                )
            # expat 2.5 re-reads an open token from its start on every call: growing the
            # chunk with it keeps a large token linear instead of quadratic.
            size = max(CHUNK, held)
    except Refused as exc:
        raise ReportError(source, str(exc)) from None
    except expat.ExpatError as exc:
        raise _parse_error(source, exc, reader.root_seen) from None
