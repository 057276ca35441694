"""The source as a prompt shows it: numbered lines, with what no test runs marked in place.

A model asked to cover "lines 25, 27" should not have to count: every line carries its number,
a line no test executed is marked ``>>`` and a line with a branch no test took ``~>`` (where the
coverage tool reports branches). The marks are language-neutral and explained by the prompt.
"""

from __future__ import annotations

from collections.abc import Collection

from tasks.core.types import FileCoverage

UNCOVERED = ">>"
PARTIAL = "~>"


def numbered(text: str, uncovered: Collection[int] = (), partial: Collection[int] = ()) -> str:
    """`text` with a right-aligned line number and a mark column on every line.

    Args:
        text: the source file.
        uncovered: 1-based lines no test executed (marked ``>>``).
        partial: 1-based lines with a branch no test took (marked ``~>``; ``>>`` wins).

    Returns:
        One output line per source line: ``"<mark> <number> | <line>"``.
    """
    lines = text.splitlines()
    width = len(str(len(lines))) if lines else 1
    missed, half = set(uncovered), set(partial)
    out = []
    for n, line in enumerate(lines, start=1):
        mark = UNCOVERED if n in missed else PARTIAL if n in half else "  "
        out.append(f"{mark} {n:>{width}} | {line}".rstrip())
    return "\n".join(out) + ("\n" if lines else "")


def numbered_for(text: str, coverage: FileCoverage | None) -> str:
    """`text` numbered and marked from a run's coverage of it (unmarked without one)."""
    if coverage is None:
        return numbered(text)
    return numbered(text, coverage.uncovered_lines, coverage.partial_lines)
