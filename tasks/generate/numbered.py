"""The source as a prompt shows it: numbered lines, with what no test runs marked in place.

A model asked to cover "lines 25, 27" should not have to count: every line carries its number,
a line no test executed is marked ``>>`` and a line with a branch no test took ``~>`` (where the
coverage tool reports branches). In a pre-merge run a third column marks with ``+`` the lines
the pull request added or changed. The marks are language-neutral and explained by the prompt.
"""

from __future__ import annotations

from collections.abc import Collection

from tasks.core.types import FileCoverage

UNCOVERED = ">>"
PARTIAL = "~>"
CHANGED = "+"


def numbered(
    text: str,
    uncovered: Collection[int] = (),
    partial: Collection[int] = (),
    changed: Collection[int] = (),
) -> str:
    """`text` with a right-aligned line number and a mark column on every line.

    Args:
        text: the source file.
        uncovered: 1-based lines no test executed (marked ``>>``).
        partial: 1-based lines with a branch no test took (marked ``~>``; ``>>`` wins).
        changed: 1-based lines a pull request added or changed (``+`` in a column of its
            own, present only when some line is changed).

    Returns:
        One output line per source line: ``"<mark> <number> | <line>"``, or
        ``"<mark><+> <number> | <line>"`` with changed lines.
    """
    lines = text.splitlines()
    width = len(str(len(lines))) if lines else 1
    missed, half, new = set(uncovered), set(partial), set(changed)
    out = []
    for n, line in enumerate(lines, start=1):
        mark = UNCOVERED if n in missed else PARTIAL if n in half else "  "
        if new:
            mark += CHANGED if n in new else " "
        out.append(f"{mark} {n:>{width}} | {line}".rstrip())
    return "\n".join(out) + ("\n" if lines else "")


def numbered_for(text: str, coverage: FileCoverage | None, changed: Collection[int] = ()) -> str:
    """`text` numbered and marked from a run's coverage of it (unmarked without one)."""
    if coverage is None:
        return numbered(text, changed=changed)
    return numbered(text, coverage.uncovered_lines, coverage.partial_lines, changed)


def line_ranges(lines: Collection[int]) -> str:
    """`lines` as a prompt reads them: ``3-7, 12, 15-16`` ("" for none)."""
    out: list[str] = []
    run: list[int] = []
    for n in sorted(set(lines)):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)
