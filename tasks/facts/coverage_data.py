"""Which test file ran which lines, read from coverage.py's own data file (its SQLite database,
coverage.py 5 and later) rather than from ``coverage json --show-contexts``.

The JSON report names every context of every line: for a suite of a hundred test files over
twenty thousand statements it grew past a gigabyte (docutils), and writing it took longer than
the run. The data file holds the same facts compactly: per (file, context) the executed lines
as a bitmap (``line_bits.numbits``: byte ``i``, bit ``j`` is line ``8 * i + j``), or in branch
mode the arcs (``arc``: from and to line, negative at a code object's entry and exit; a line
ran when it is an end of an arc and positive).

Contexts are the test files' paths (Autopilot's pytest plugin switches the dynamic context at
each new test file); the empty context (import time, before any test) is left out, and so are
sources and test files outside the repository.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from tasks.core.errors import CoverageError
from tasks.facts.coverage import _relativise, _where

#: source -> test file -> executed line numbers.
Contexts = dict[str, dict[str, set[int]]]


def numbits_to_lines(numbits: bytes) -> set[int]:
    """The line numbers a coverage.py numbits bitmap holds."""
    return {8 * i + j for i, byte in enumerate(numbits) for j in range(8) if byte & (1 << j)}


def load_data_contexts(path: Path, repo: Path) -> Contexts:
    """Per source file, the lines each test file ran, from coverage.py's data file `path`.

    Raises:
        CoverageError: the file cannot be opened or is not a coverage.py data file.
    """
    where = _where(repo)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise CoverageError(f"{path}: cannot open coverage data: {exc}") from None
    with contextlib.closing(con):
        try:
            files = {
                i: _relativise(p, where, [repo])
                for i, p in con.execute("select id, path from file")
            }
            names = {
                i: _relativise(c, where, [repo]) if c else None
                for i, c in con.execute("select id, context from context")
            }
            lines = con.execute("select file_id, context_id, numbits from line_bits")
            arcs = con.execute("select file_id, context_id, fromno, tono from arc")
            rows = [(f, c, numbits_to_lines(bits)) for f, c, bits in lines]
            rows += [(f, c, {n for n in (a, b) if n > 0}) for f, c, a, b in arcs]
        except sqlite3.Error as exc:
            raise CoverageError(f"{path}: not a coverage.py data file: {exc}") from None
    out: Contexts = {}
    for file_id, context_id, ran in rows:
        source, test = files.get(file_id), names.get(context_id)
        if source is None or test is None or not ran:
            continue
        out.setdefault(source, {}).setdefault(test, set()).update(ran)
    return out
