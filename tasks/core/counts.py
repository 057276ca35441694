"""Counting test cases by outcome: the one rule a run's summary follows.

:class:`~tasks.core.types.RunSummary` counts with it, and so does the streaming ``autopilot
parse --json`` (:mod:`tasks.facts.reports.stream_json`), which never builds the typed cases;
plain Python, so the fast path stays free of pydantic.
"""

from __future__ import annotations

from typing import Any

#: A case's statuses, in the order the summary lists their counts.
STATUSES = ("passed", "failed", "error", "skipped")


class CaseTally:
    """Running counts of cases, added in report order (the duration's float sum too)."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(STATUSES, 0)
        self.duration = 0.0
        self.duplicates = 0

    def add(self, status: str, duration: float, duplicate: bool) -> None:
        """One more case."""
        self.counts[status] += 1
        self.duration += duration
        self.duplicates += duplicate

    def snapshot(self) -> tuple[dict[str, int], float, int]:
        """The counts so far (to undo a report that turns out broken half-way)."""
        return dict(self.counts), self.duration, self.duplicates

    def restore(self, snap: tuple[dict[str, int], float, int]) -> None:
        """Back to a :meth:`snapshot`."""
        self.counts, self.duration, self.duplicates = dict(snap[0]), snap[1], snap[2]

    def summary(self) -> dict[str, Any]:
        """RunSummary's fields, in its order."""
        c = self.counts
        return {
            "tests": sum(c.values()),
            "passed": c["passed"],
            "failed": c["failed"],
            "errors": c["error"],
            "skipped": c["skipped"],
            "duration": round(self.duration, 6),
            "duplicates": self.duplicates,
        }
