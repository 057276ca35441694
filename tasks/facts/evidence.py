"""Which test files exercise which sources: mapping tests to code by what they execute.

The suite run records, per source line, the test files that ran it (coverage.py contexts for
pytest, per-spec-file SimpleCov deltas for RSpec). Loading a file runs its definitions (``def``
lines, class bodies, imports) whoever caused the load, so only lines inside function or method
bodies count: a test file "tests" a source when it ran at least one line of the source's
function bodies (which lines those are, the source's toolchain says).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: source -> test file -> executed line numbers.
LineContexts = dict[str, dict[str, set[int]]]
#: (path, text) -> the lines inside its function bodies, or None when it is not a source.
BodyLines = Callable[[str, str], set[int] | None]


def body_lines_run(
    contexts: LineContexts, repo: Path, body_lines: BodyLines
) -> dict[str, dict[str, int]]:
    """source -> test file -> how many lines of the source's function bodies it ran (only
    test files that ran at least one).

    Args:
        contexts: per source, the lines each test file executed.
        repo: the project directory the sources are read from.
        body_lines: the toolchain's finder of function-body lines.
    """
    out: dict[str, dict[str, int]] = {}
    for source, by_test in contexts.items():
        if not by_test:
            continue
        try:
            text = (repo / source).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        body = body_lines(source, text)
        if body is None:
            continue
        runs = {test: len(lines & body) for test, lines in sorted(by_test.items())}
        if runs := {test: n for test, n in runs.items() if n}:
            out[source] = runs
    return out


def exercised_by(contexts: LineContexts, repo: Path, body_lines: BodyLines) -> dict[str, list[str]]:
    """source -> the test files that ran at least one line of its function bodies (sorted).

    Args:
        contexts: per source, the lines each test file executed.
        repo: the project directory the sources are read from.
        body_lines: the toolchain's finder of function-body lines.
    """
    return tested_by(body_lines_run(contexts, repo, body_lines))


def tested_by(runs: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """source -> the test files of :func:`body_lines_run`'s counts, sorted."""
    return {source: sorted(by_test) for source, by_test in runs.items()}
