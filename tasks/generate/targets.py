"""Choosing the nightly's targets from the baseline audit.

Order (DESIGN.md "Flows"): untested files first, then files whose specs fail or whose coverage is
under ``min_coverage`` (lowest first), then files whose specs score weakly on the static rubric
(lowest first). ``--only`` globs narrow the set before ``--max-files`` cuts it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from tasks.audit.report import AuditFile, AuditReport
from tasks.core.errors import BadInputError
from tasks.core.types import Mapping, SourceKind
from tasks.generate.skills import glob_match

log = logging.getLogger(__name__)

TargetReason = Literal["untested", "failing", "low-coverage", "weak-static", "changed-lines"]
_RANK: dict[TargetReason, int] = {
    "untested": 0,
    "failing": 1,
    "low-coverage": 1,
    "weak-static": 2,
    "changed-lines": 0,
}


class Target(BaseModel):
    """One source file the nightly will write or improve tests for."""

    source: str
    kind: SourceKind
    specs: list[str] = Field(default_factory=list, description="Existing specs of the source")
    spec: str = Field(description="The spec to write: the first existing one, else the new path")
    reason: TargetReason
    coverage_before: float | None = None
    uncovered_lines: list[int] = Field(default_factory=list)
    static_before: float | None = None
    changed_lines: list[int] = Field(
        default_factory=list,
        description="Pre-merge: the lines a pull request added or changed, the ones to cover "
        "([]: a nightly target, the whole file)",
    )
    diff_coverage_before: float | None = Field(
        None, description="Pre-merge: the share of the changed lines the suite ran before"
    )


def _reason(f: AuditFile, min_coverage: float, min_static: float) -> TargetReason | None:
    if f.status == "untested":
        return "untested"
    if f.status == "failing":
        return "failing"
    if f.coverage + 1e-9 < min_coverage:
        return "low-coverage"
    if f.static_score is not None and f.static_score + 1e-9 < min_static:
        return "weak-static"
    return None


def check_globs(only: Sequence[str] | None) -> list[str]:
    """The `--only` globs, validated (an empty glob is bad input)."""
    globs = [g.strip() for g in only or []]
    for g in globs:
        if not g:
            raise BadInputError("--only: empty glob")
    return globs


def choose_targets(
    report: AuditReport,
    mapping: Mapping,
    *,
    min_coverage: float,
    min_static: float,
    only: Sequence[str] | None = None,
    max_files: int | None = None,
) -> list[Target]:
    """The files to work on, most needed first.

    Args:
        report: the baseline audit (status, coverage and static score per source).
        mapping: the source -> spec mapping (gives the path of a new spec).
        min_coverage: files under this line coverage are targets.
        min_static: files whose weakest spec scores under this on the static rubric are targets.
        only: repository-relative globs (``**`` allowed); when given, only matching sources.
        max_files: keep at most this many targets (after ordering).

    Raises:
        BadInputError: ``max_files`` is negative or a glob is empty.
    """
    if max_files is not None and max_files < 0:
        raise BadInputError(f"--max-files: {max_files} is negative")
    globs = check_globs(only)
    expected = {m.source: m.expected_spec for m in mapping.files}
    ranked: list[tuple[int, float, str, Target]] = []
    for f in report.files:
        if globs and not any(glob_match(g, f.source) for g in globs):
            continue
        reason = _reason(f, min_coverage, min_static)
        if reason is None:
            continue
        spec = f.specs[0] if f.specs else expected.get(f.source, "")
        if not spec:
            log.warning("%s: no spec path known; skipped as a target", f.source)
            continue
        target = Target(
            source=f.source,
            kind=f.kind,
            specs=list(f.specs),
            spec=spec,
            reason=reason,
            coverage_before=f.coverage,
            uncovered_lines=list(f.uncovered_lines),
            static_before=f.static_score,
        )
        # Within a group: the lowest coverage (or static score) first, then by path for a
        # stable order across runs.
        measure = (f.static_score or 0.0) if reason == "weak-static" else f.coverage
        ranked.append((_RANK[reason], measure, f.source, target))
    ranked.sort(key=lambda item: item[:3])
    targets = [t for *_, t in ranked]
    if max_files is not None:
        targets = targets[:max_files]
    return targets
