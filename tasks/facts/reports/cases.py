"""What the elements of a JUnit case mean: its status, results, suite and record.

The rules the reference tools count by (see :mod:`tasks.facts.reports.junit` for the dialects): a
case has exactly one status, ``<error>`` outranks ``<failure>``, which outranks ``<skipped>``; the
other results stay on the case. The parser in :mod:`tasks.facts.reports.junit` feeds these functions
what it read; they touch no XML.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasks.core.types import TestStatus

#: One test case as a plain dict with the fields of TestCaseResult.
Record = dict[str, Any]
#: A passing case without message, results or output: (id, name, classname, file, line,
#: duration). Lean readers (the CLI's JSON output) get these instead of records: a tuple costs
#: a fraction of a 15-key dict on the per-case hot path. :func:`expand` makes it a record.
Row = tuple[str, str, str, str | None, int | None, float]

#: Captured output beyond this is cut (the tail is kept: the end of a log explains a failure).
MAX_OUTPUT = 64 * 1024
#: Failure text beyond this is cut (the head is kept: it holds the message and innermost frames).
MAX_TRACE = 1024 * 1024
#: Further results kept per case (a report could repeat <failure> without end).
MAX_OTHER_RESULTS = 16

#: Result elements and their severity: the most severe one is the case's status.
SEVERITY: dict[str, tuple[int, TestStatus]] = {
    "error": (3, "error"),
    "failure": (2, "failed"),
    "skipped": (1, "skipped"),
}
#: Surefire's re-run records: detail only, they never change the status.
RERUNS = frozenset({"rerunFailure", "rerunError", "flakyFailure", "flakyError"})
#: testcase ``status``/``result`` values that mean the case did not run.
_NOT_RUN = frozenset({"disabled", "notrun", "not_run", "suppressed", "skipped", "ignored"})
_TYPE_LINE = re.compile(r"^\S+:\d+: ([A-Za-z_][\w.]*)\s*$", re.M)
_TYPE_PREFIX = re.compile(
    r"^((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Failure|Exit|Interrupt))(?=:|$)"
)


def number(value: str | None) -> float:
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


def line_number(value: str | None) -> int | None:
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


def _firstline_number(text: str) -> str:
    return text.split("\n", 1)[0].rstrip("\r")


def result_of(kind: str, attrs: dict[str, str], text: str) -> Record:
    """message, error_type and trace of one result element (its text: all text inside it)."""
    text = text.strip()
    message = (attrs.get("message") or "").strip() or (_firstline_number(text) if text else None)
    if kind == "skipped":
        return {"kind": kind, "message": message, "error_type": None, "trace": None}
    trace = text or None
    return {
        "kind": kind,
        "message": message,
        "error_type": _error_type(attrs.get("type"), message, trace),
        "trace": trace,
    }


def not_run(attrs: dict[str, str], suite: Suite) -> str | None:
    """The reason a case without a result element did not run (GoogleTest, CTest), or None."""
    for key in ("status", "result"):
        value = attrs.get(key)
        if value and value.lower() in _NOT_RUN:
            return value
    if suite.all_disabled:
        return "disabled"
    return None


class Suite:
    """What a case inherits from its enclosing <testsuite>."""

    __slots__ = ("all_disabled", "file", "name", "pytest")

    def __init__(self, attrs: dict[str, str], parent: Suite | None) -> None:
        self.file: str | None = attrs.get("file") or (parent.file if parent else None)
        self.name: str = attrs.get("name") or ""
        self.pytest: bool = (parent is not None and parent.pytest) or self.name == "pytest"
        disabled = line_number(attrs.get("disabled"))
        tests = line_number(attrs.get("tests"))
        self.all_disabled = bool(disabled) and disabled == tests


#: What a case outside any <testsuite> inherits: nothing.
NO_SUITE = Suite({}, None)


def expand(row: Row) -> Record:
    """The record of a :data:`Row`."""
    return {
        "id": row[0],
        "name": row[1],
        "classname": row[2],
        "file": row[3],
        "line": row[4],
        "status": "passed",
        "duration": row[5],
        "message": None,
        "error_type": None,
        "trace": None,
        "locations": [],
        "other_results": [],
        "duplicate_of": None,
        "stdout": None,
        "stderr": None,
    }


def ranked(results: list[tuple[int, Record]]) -> tuple[Record | None, list[Record]]:
    """(the most severe result, the others in report order) of a case's results."""
    if len(results) == 1:
        severity, result = results[0]
        return (result, []) if severity else (None, [result])
    best = max(range(len(results)), key=lambda i: results[i][0])  # first of the most severe
    main = results[best][1] if results[best][0] else None
    if main is None:
        best = -1
    others = [r for i, (_, r) in enumerate(results) if i != best][:MAX_OTHER_RESULTS]
    return main, others
