"""Istanbul's ``coverage-final.json`` (what Jest writes with ``--coverageReporters=json``, for
the babel and the v8 coverage providers alike) -> per-file line coverage.

Lines are counted the way istanbul's own reports (and so Jest's text summary, its "% Lines"
column) count them: a line is the start line of one or more statements, its hits are the
highest hit count of those statements, and it is covered when that is above zero
(``FileCoverage.getLineCoverage`` in istanbul-lib-coverage). Statement, branch and function
figures are kept beside the lines for reports that want them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.core.errors import CoverageError
from tasks.core.types import FileCoverage

#: A coverage report larger than this is refused (a real one is a few MB per thousand files).
MAX_REPORT_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class IstanbulTotals:
    """Covered and total counts of one file, as istanbul's summary reports them."""

    lines: tuple[int, int]
    statements: tuple[int, int]
    branches: tuple[int, int]
    functions: tuple[int, int]


def line_hits(entry: dict[str, Any]) -> dict[int, int]:
    """Line -> hits of one file's istanbul data (istanbul's ``getLineCoverage``)."""
    statements = entry.get("statementMap")
    counts = entry.get("s")
    if not isinstance(statements, dict) or not isinstance(counts, dict):
        raise CoverageError("an entry has no statementMap/s")
    lines: dict[int, int] = {}
    for key, count in counts.items():
        where = statements.get(key)
        if not isinstance(where, dict):
            continue
        try:
            line = int(where["start"]["line"])
            hits = int(count)
        except (KeyError, TypeError, ValueError):
            raise CoverageError(f"statement {key}: malformed location or count") from None
        if line not in lines or lines[line] < hits:
            lines[line] = hits
    return lines


def totals(entry: dict[str, Any]) -> IstanbulTotals:
    """Covered/total lines, statements, branches and functions of one file's data."""
    lines = line_hits(entry)
    s = entry.get("s") or {}
    f = entry.get("f") or {}
    b = entry.get("b") or {}
    arms = [int(h) for hits in b.values() if isinstance(hits, list) for h in hits]
    return IstanbulTotals(
        lines=(sum(1 for h in lines.values() if h > 0), len(lines)),
        statements=(sum(1 for h in s.values() if h), len(s)),
        branches=(sum(1 for h in arms if h > 0), len(arms)),
        functions=(sum(1 for h in f.values() if h), len(f)),
    )


def _relative(path: str, roots: Sequence[str]) -> str | None:
    path = os.path.normpath(path)
    for root in roots:
        if path.startswith(root + os.sep):
            return Path(path[len(root) + 1 :]).as_posix()
    return None


def load_istanbul(path: Path) -> dict[str, Any]:
    """The parsed report.

    Raises:
        CoverageError: unreadable, too large, not JSON, or not an object of file entries.
    """
    try:
        size = path.stat().st_size
        if size > MAX_REPORT_BYTES:
            raise CoverageError(f"{path.name}: {size} bytes, larger than the limit")
        with path.open("rb") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise CoverageError(f"{path.name}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CoverageError(f"{path.name}: not JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise CoverageError(f"{path.name}: not an istanbul coverage-final.json")
    return data


def parse_istanbul(path: Path, repo: Path, aliases: Sequence[Path] = ()) -> dict[str, FileCoverage]:
    """Per-file line coverage keyed by repository-relative path (files outside the
    repository are dropped).

    Args:
        path: ``coverage-final.json``.
        repo: the repository the run was in.
        aliases: other absolute paths that meant the repository during the run (a container's
            mount point).

    Raises:
        CoverageError: the report is unusable (see :func:`load_istanbul`), or an entry is
            malformed (the message names the file).
    """
    data = load_istanbul(path)
    roots = list(dict.fromkeys(os.path.normpath(str(r)) for r in (repo, repo.resolve(), *aliases)))
    files: dict[str, FileCoverage] = {}
    for key, entry in data.items():
        name = str(entry.get("path") or key)
        rel = _relative(name, roots) if os.path.isabs(name) else Path(name).as_posix()
        if rel is None or rel.startswith("../"):
            continue
        try:
            lines = line_hits(entry)
        except CoverageError as exc:
            raise CoverageError(f"{path.name}: {rel}: {exc}") from None
        files[rel] = FileCoverage(
            path=rel,
            executable_lines=len(lines),
            covered_lines=sum(1 for h in lines.values() if h > 0),
            uncovered_lines=sorted(n for n, h in lines.items() if h == 0),
            executed_lines=sorted(n for n, h in lines.items() if h > 0),
        )
    return files
