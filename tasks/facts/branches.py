"""Branch coverage where the tool measures it: coverage.py's branch mode and SimpleCov's
``enable_coverage :branch``, as counts and the executed lines with a branch never taken."""

from __future__ import annotations

from typing import Any

from tasks.core.types import FileCoverage


def merge_simplecov_branches(into: dict[tuple[int, str], int], conditions: dict[str, Any]) -> None:
    """SimpleCov's ``{"[:if, id, line, ...]": {"[:then, id, ...]": hits}}`` into
    (condition line, branch key) -> hits, the most any command saw; bad entries are skipped."""
    for cond, arms in conditions.items():
        parts = str(cond).strip("[]").split(",")
        if len(parts) < 3 or not isinstance(arms, dict):
            continue
        try:
            line = int(parts[2])
        except ValueError:
            continue
        for arm, hits in arms.items():
            if isinstance(hits, int) and not isinstance(hits, bool) and hits >= 0:
                slot = (line, f"{cond}/{arm}")
                into[slot] = max(into.get(slot, 0), hits)


def with_simplecov_branches(cov: FileCoverage, taken: dict[tuple[int, str], int]) -> FileCoverage:
    """`cov` with the branches SimpleCov saw (merged by :func:`merge_simplecov_branches`)."""
    uncovered = set(cov.uncovered_lines)
    partial = sorted({line for (line, _), hits in taken.items() if hits == 0} - uncovered)
    return cov.model_copy(
        update={
            "branches": len(taken),
            "covered_branches": sum(1 for hits in taken.values() if hits > 0),
            "partial_lines": partial,
        }
    )


def with_coverage_py_branches(cov: FileCoverage, entry: dict[str, Any]) -> FileCoverage:
    """A coverage.py branch-mode entry's branches: the summary's counts, and the executed
    lines with a branch never taken (a bad entry leaves the line figures alone)."""
    summary = entry.get("summary")
    try:
        total = int(summary["num_branches"])  # type: ignore[index]
        taken = int(summary["covered_branches"])  # type: ignore[index]
        uncovered = set(cov.uncovered_lines)
        partial = sorted({int(pair[0]) for pair in entry["missing_branches"]} - uncovered)
    except (KeyError, TypeError, ValueError, IndexError):
        return cov
    return cov.model_copy(
        update={"branches": total, "covered_branches": taken, "partial_lines": partial}
    )
