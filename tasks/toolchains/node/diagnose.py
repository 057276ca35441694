"""Why a Jest test file did not load, read from Jest's own message (the interface's
``load_error_files`` and ``load_problem``).

A failed run's ``load_error`` holds one ``<test file>: <message>`` entry per suite that failed
to run (:func:`tasks.toolchains.node.results.parse_jest_run`); one file's message is what Jest
printed under "Test suite failed to run": a ``SyntaxError`` with the file and position, ``Cannot
find module './x' from 'src/a.test.ts'``, or ts-jest's ``src/a.test.ts:3:7 - error TS2322: ...``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tasks.core.types import SuiteProblem
from tasks.toolchains.node.layout import is_test_file
from tasks.toolchains.node.results import load_problem_of, strip_ansi
from tasks.toolchains.runs import relative_path

#: An entry of a joined load error: ``<file>: <message>`` at the start of a line.
_ENTRY = re.compile(r"^(?P<path>[^\s:]+\.[cm]?[jt]sx?): ", re.MULTILINE)
#: Where a message names its test file: a TypeScript error, a missing module's importer, a
#: SyntaxError's file (Babel and ts-jest print it first), a stack frame.
_NAMED = (
    re.compile(r"(?P<path>[^\s:'(]+\.[cm]?[jt]sx?):\d+:\d+ - error TS\d+"),
    re.compile(r"Cannot find module '[^']+' from '(?P<path>[^']+)'"),
    re.compile(r"SyntaxError: (?P<path>[^\s:]+\.[cm]?[jt]sx?)[:\s]"),
    re.compile(r"\((?P<path>[^\s:()]+\.[cm]?[jt]sx?):\d+:\d+\)"),
)


def load_error_files(text: str) -> list[str]:
    """The test files a failed run's output names as not loading, in order."""
    found = (m.group("path") for m in _ENTRY.finditer(strip_ansi(text)))
    return list(dict.fromkeys(p for p in found if is_test_file(p.lstrip("./"))))


def _named_file(text: str, project: Path) -> str:
    entry = _ENTRY.match(text)
    if entry:
        return relative_path(entry.group("path"), project)
    for pattern in _NAMED:
        m = pattern.search(text)
        if m:
            rel = relative_path(m.group("path"), project)
            if not rel.startswith("/"):
                return rel
    return ""


def load_problem(text: str, project: Path) -> SuiteProblem:
    """The problem in one test file's load error, as Jest printed it (the file is the one the
    message names; a ``<file>: `` prefix is taken off)."""
    text = strip_ansi(text).strip()
    file = _named_file(text, project)
    entry = _ENTRY.match(text)
    message = text[entry.end() :] if entry else text
    return load_problem_of(file or "the test file", message, project)
