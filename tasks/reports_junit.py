"""Streaming JUnit XML parser: the C parser does the work, memory stays bounded, no entities.

The hot loop is CPython's C ElementTree pull parser (expat underneath): the document is fed in
chunks, every ``<testcase>`` is turned into a record at its end event and then detached from
its parent, so memory depends on the largest case, not on the file. Nesting depth costs one
small entry per open element and no recursion, so 10,000 nested suites are fine. A single
text or attribute larger than :data:`MAX_TOKEN` characters (a hostile file) is refused rather
than held in memory.

Hostile input: :class:`~tasks.reports_xmlin.EntityGuard` refuses every entity declaration and
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
import re
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from xml.etree.ElementTree import ParseError, XMLPullParser

from tasks.errors import ReportError
from tasks.reports_ids import base_id
from tasks.reports_xmlin import EntityGuard, Refused, text_chunks
from tasks.stacktrace import PathNormaliser, trace_pairs

if TYPE_CHECKING:
    from tasks.types import TestStatus

#: One test case as a plain dict with the fields of TestCaseResult.
Record = dict[str, Any]

#: Captured output beyond this is cut (the tail is kept: the end of a log explains a failure).
MAX_OUTPUT = 64 * 1024
#: Failure text beyond this is cut (the head is kept: it holds the message and innermost frames).
MAX_TRACE = 1024 * 1024
#: One text node or tag larger than this (characters) is refused: it would be held whole.
MAX_TOKEN = 64 * 1024 * 1024
#: Further results kept per case (a report could repeat <failure> without end).
MAX_OTHER_RESULTS = 16

#: Result elements and their severity: the most severe one is the case's status.
_SEVERITY: dict[str, tuple[int, TestStatus]] = {
    "error": (3, "error"),
    "failure": (2, "failed"),
    "skipped": (1, "skipped"),
}
#: Surefire's re-run records: detail only, they never change the status.
_RERUNS = frozenset({"rerunFailure", "rerunError", "flakyFailure", "flakyError"})
#: testcase ``status``/``result`` values that mean the case did not run.
_NOT_RUN = frozenset({"disabled", "notrun", "not_run", "suppressed", "skipped", "ignored"})
_TYPE_LINE = re.compile(r"^\S+:\d+: ([A-Za-z_][\w.]*)\s*$", re.M)
_TYPE_PREFIX = re.compile(
    r"^((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Failure|Exit|Interrupt))(?=:|$)"
)
_ENTITY_ERROR = 11  # expat's XML_ERROR_UNDEFINED_ENTITY


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
    if not value:
        return None
    try:
        return int(value)
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


def _text(elem: Any) -> str:
    """An element's text (CDATA included); Surefire's re-runs keep it in <stackTrace>."""
    text = "".join(elem.itertext()) if len(elem) else (elem.text or "")
    return text[:MAX_TRACE] if len(text) > MAX_TRACE else text


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0].rstrip("\r")


def _result(elem: Any, kind: str) -> Record:
    """message, error_type and trace of one result element."""
    text = _text(elem).strip()
    message = (elem.get("message") or "").strip() or (_first_line(text) if text else None)
    if kind == "skipped":
        return {"kind": kind, "message": message, "error_type": None, "trace": None}
    trace = text or None
    return {
        "kind": kind,
        "message": message,
        "error_type": _error_type(elem.get("type"), message, trace),
        "trace": trace,
    }


def _not_run(attrs: Any, suite: _Suite | None) -> str | None:
    """The reason a case without a result element did not run (GoogleTest, CTest), or None."""
    for key in ("status", "result"):
        value = attrs.get(key)
        if value and value.lower() in _NOT_RUN:
            return value
    if suite is not None and suite.all_disabled:
        return "disabled"
    return None


class _Suite:
    """What a case inherits from its enclosing <testsuite>."""

    __slots__ = ("all_disabled", "file", "name", "pytest")

    def __init__(self, attrs: Any, parent: _Suite | None) -> None:
        self.file: str | None = attrs.get("file") or (parent.file if parent else None)
        self.name: str = attrs.get("name") or ""
        self.pytest: bool = (parent is not None and parent.pytest) or self.name == "pytest"
        disabled = _line(attrs.get("disabled"))
        tests = _line(attrs.get("tests"))
        self.all_disabled = bool(disabled) and disabled == tests


class _Cases:
    """Turns finished <testcase> elements into records (the per-case hot path)."""

    def __init__(self, norm: PathNormaliser) -> None:
        self.norm = norm

    def record(self, elem: Any, suite: _Suite | None) -> Record:
        get = elem.attrib.get
        name = get("name", "")
        classname = get("classname") or get("class") or ""
        raw_file = get("file") or (suite.file if suite is not None else None)
        file = self.norm(raw_file) if raw_file else None
        line = _line(get("line"))
        if line is not None and suite is not None and suite.pytest:
            line += 1  # pytest writes the 0-based line of the test function
        status: TestStatus = "passed"
        message = error_type = trace = out = err = None
        others: list[Record] = []
        if len(elem):
            main, others, out, err = _children(elem)
            if main is not None:
                status = _SEVERITY[main["kind"]][1]
                message, error_type, trace = main["message"], main["error_type"], main["trace"]
        if status == "passed" and (
            get("status") or get("result") or (suite is not None and suite.all_disabled)
        ):
            not_run = _not_run(elem.attrib, suite)
            if not_run:
                status, message = "skipped", not_run
        duration = get("time")
        return {
            "id": base_id(file, line, classname, name, suite.name if suite is not None else ""),
            "name": name,
            "classname": classname,
            "file": file,
            "line": line,
            "status": status,
            "duration": _number(duration) if duration else 0.0,
            "message": message,
            "error_type": error_type,
            "trace": trace,
            "locations": [{"path": p, "line": n} for p, n in trace_pairs(trace, self.norm)]
            if trace
            else [],
            "other_results": others,
            "duplicate_of": None,
            "stdout": out[-MAX_OUTPUT:] if out else None,
            "stderr": err[-MAX_OUTPUT:] if err else None,
        }


def _children(elem: Any) -> tuple[Record | None, list[Record], str | None, str | None]:
    """(most severe result, the other results in report order, stdout, stderr) of a case."""
    results: list[tuple[int, Record]] = []  # (severity, result), in report order
    out = err = None
    for child in elem:
        tag = child.tag
        severity = _SEVERITY.get(tag)
        if severity is not None:
            results.append((severity[0], _result(child, tag)))
        elif tag in _RERUNS:
            results.append((0, _result(child, tag)))
        elif tag == "system-out":
            out = child.text
        elif tag == "system-err":
            err = child.text
    if not results:
        return None, [], out, err
    best = max(range(len(results)), key=lambda i: results[i][0])  # first of the most severe
    main = results[best][1] if results[best][0] else None
    if main is None:
        best = -1
    others = [r for i, (_, r) in enumerate(results) if i != best][:MAX_OTHER_RESULTS]
    return main, others, out, err


def _parse_error(source: str, exc: ParseError, seen_root: bool) -> ReportError:
    line, column = exc.position
    reason = str(exc).split(":", 1)[0]
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


def iter_junit(
    source: str, stream: IO[bytes], head: bytes, repo: Path | None, norm: PathNormaliser
) -> Iterator[Record]:
    """Yield the cases of a JUnit XML report as records, as they are read.

    A record is a dict with exactly the fields of TestCaseResult, in its field order
    (locations as ``{"path", "line"}`` dicts, other results as dicts); callers validate it into
    a TestCaseResult or, when only JSON output is wanted, serialise it directly. Its ``id`` is
    the base id (see :mod:`tasks.reports_ids`); the caller makes it unique.

    Args:
        source: The report's name for error messages.
        stream: The open file, positioned just after ``head``.
        head: The bytes already read from the start of the file (for sniffing).
        repo: Repository root for relative paths (the normaliser holds it).
        norm: The path normaliser for ``repo``.

    Raises:
        ReportError: on malformed, truncated, hostile or non-JUnit XML.
    """
    guard = EntityGuard()
    pull: XMLPullParser[Any] = XMLPullParser(events=("start", "end"))
    cases = _Cases(norm)
    suites: list[_Suite] = []
    root: Any = None
    in_case = 0
    pending = 0
    elem: Any = None
    try:
        for chunk in chain(text_chunks(stream, head, source), [None]):
            if chunk is None:
                pull.close()  # raises on a truncated document
            else:
                guard.feed(chunk)
                pull.feed(chunk)
                pending += len(chunk)
            elem = None
            events: Iterator[Any] = pull.read_events()
            for event, elem in events:
                tag = elem.tag
                if event == "start":
                    if tag == "testcase":
                        in_case += 1
                    elif tag == "testsuite" and not in_case:
                        suites.append(_Suite(elem.attrib, suites[-1] if suites else None))
                    if root is None:
                        _check_root(tag)
                        root = elem
                elif tag == "testcase":
                    in_case -= 1
                    if not in_case:
                        yield cases.record(elem, suites[-1] if suites else None)
                elif tag == "testsuite" and not in_case:
                    suites.pop()
            if elem is not None:
                pending = 0
                _prune(root)
            elif pending > MAX_TOKEN:
                raise Refused(
                    f"a single text or tag is larger than {MAX_TOKEN // 2**20} MB "
                    "(refused to bound memory)"
                )
    except Refused as exc:
        raise ReportError(source, str(exc)) from None
    except ParseError as exc:
        raise _parse_error(source, exc, root is not None) from None


def _prune(root: Any) -> None:
    """Drop every finished element: the open ones are the chain of last children from the root.

    Run after a chunk's events are handled, so nothing still needs the dropped elements; the
    tree never grows beyond the open path and the elements of one chunk.
    """
    elem = root
    while elem.tag != "testcase" and len(elem):  # an open case still needs its children
        last = elem[-1]
        if len(elem) > 1:
            del elem[:-1]
        elem = last


def _check_root(tag: str) -> None:
    if tag not in ("testsuites", "testsuite"):
        raise Refused(
            f"XML root is <{tag[:40]}>, not <testsuites> or <testsuite>: not a JUnit XML report"
        )
