"""The nightly's targets, aimed at a pull request's changed lines: a changed source whose changed
lines the existing suite does not all run becomes a :class:`~tasks.generate.targets.Target`
with those lines (``changed_lines``) and their diff coverage before; the loop, the prompts, the
gates and the mutants then work on them. A source whose changed lines all ran, or hold no line
the coverage tool measures, is listed with that reason instead."""

from __future__ import annotations

import logging

from tasks.audit.report import AuditReport
from tasks.core.types import FileCoverage, Mapping
from tasks.generate.gates import diff_share
from tasks.generate.targets import Target
from tasks.premerge.changes import ChangeSet

log = logging.getLogger(__name__)

ALL_RAN = "covered: the suite already runs every changed line"
NOTHING_MEASURED = "no changed line the coverage tool measures (declarations, comments, blanks)"


def changed_targets(
    changes: ChangeSet,
    report: AuditReport,
    coverage: dict[str, FileCoverage],
    mapping: Mapping,
) -> list[Target]:
    """The targets of the worked-on files of `changes` (marked in place when they are not
    targets: all their changed lines ran, or none is measured, or the baseline lacks them).

    Args:
        changes: the pull request's changes, narrowed to sources and cut to the budget.
        report: the baseline audit (status, coverage and specs per source).
        coverage: the baseline suite's coverage per project-relative source.
        mapping: where a new spec of each source goes.
    """
    audited = {f.source: f for f in report.files}
    expected = {m.source: m.expected_spec for m in mapping.files}
    targets: list[Target] = []
    for f in changes.worked:
        audit = audited.get(f.path)
        spec = (audit.specs[0] if audit and audit.specs else None) or expected.get(f.path)
        if audit is None or not spec:
            changes.skip(f.path, "not in the baseline's sources (no test maps to it)")
            continue
        share = diff_share(coverage.get(f.path), f.lines)
        if share is None:
            changes.skip(f.path, NOTHING_MEASURED)
            continue
        if share >= 1.0:
            changes.skip(f.path, ALL_RAN)
            continue
        targets.append(
            Target(
                source=f.path,
                kind=audit.kind,
                specs=list(audit.specs),
                spec=spec,
                reason="changed-lines",
                coverage_before=audit.coverage,
                uncovered_lines=list(audit.uncovered_lines),
                static_before=audit.static_score,
                changed_lines=list(f.lines),
                diff_coverage_before=share,
            )
        )
    log.info("%d target(s) with changed lines the suite does not run", len(targets))
    return targets
