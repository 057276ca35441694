"""What a pre-merge run did: the diff coverage of the pull request's changed lines before and
after, every changed file with why it was or was not worked on, the generation's outcomes (the
nightly's report), the ``autopilot premerge --json`` document, and its exit code.

The diff coverage counts, over the worked-on files, the changed lines the coverage tool
measures and how many of them ran: before from the baseline suite, after with the tests that
were accepted (a file whose tests were not accepted keeps its number from before).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tasks.core.types import FileCoverage
from tasks.generate.report import NightlyReport
from tasks.generate.types import FileOutcome, FileSummary
from tasks.premerge.changes import ChangedFile, ChangeSet


def _unset(value: object) -> bool:
    return not value


class DiffCoverage(BaseModel):
    """Changed lines the coverage tool measures, and how many of them ran."""

    measured: int = 0
    covered: int = 0

    @property
    def ratio(self) -> float | None:
        """covered / measured (None: no changed line is measured)."""
        return round(self.covered / self.measured, 4) if self.measured else None

    def add(self, coverage: FileCoverage | None, lines: list[int]) -> DiffCoverage:
        """These counts plus the `lines` of one file as `coverage` saw them (a file without
        coverage counts its lines as measured and not run)."""
        if coverage is None:
            return DiffCoverage(measured=self.measured + len(lines), covered=self.covered)
        ran, measured = coverage.lines_run(lines)
        return DiffCoverage(measured=self.measured + measured, covered=self.covered + ran)


class ForgeResult(BaseModel):
    """What became of the comment or the commit status on the forge (one line when not)."""

    done: bool
    action: str = Field(description="created, updated, set, or skipped")
    url: str | None = None
    error: str | None = None


class ChangedFileSummary(BaseModel):
    """One changed file in the ``autopilot premerge --json`` document."""

    path: str
    status: str
    old_path: str | None
    changed_lines: list[int]
    cut: int
    skipped: str | None
    diff_coverage_before: float | None
    diff_coverage_after: float | None


class PremergeFile(FileSummary):
    """One target in the document: the nightly's entry plus its changed lines."""

    changed_lines: list[int]
    diff_coverage_before: float | None
    diff_coverage_after: float | None


class DiffCoverageSummary(BaseModel):
    before: float | None
    after: float | None
    min: float
    measured_lines: int
    covered_before: int
    covered_after: int


class PremergeSummary(BaseModel):
    """The ``autopilot premerge --json`` document."""

    run_id: str
    repo: str
    base: str
    head: str
    base_commit: str
    head_commit: str
    merge_base: str
    pull_request: int | None
    branch: str | None
    archive_uri: str | None
    model_calls: int
    tokens: int
    diff_coverage: DiffCoverageSummary
    changed: list[ChangedFileSummary]
    files: list[PremergeFile]
    comment: ForgeResult | None
    status: ForgeResult | None
    push_error: str | None = Field(None, exclude_if=_unset)
    baseline_error: str | None = Field(None, exclude_if=_unset)


class PremergeReport(BaseModel):
    """The whole pre-merge run (the document is :meth:`public`)."""

    run: NightlyReport = Field(description="The generation on the head: outcomes, branch, calls")
    base: str
    head: str
    pull_request: int | None = None
    changes: ChangeSet
    min_diff_coverage: float
    before: DiffCoverage = Field(default_factory=DiffCoverage)
    after: DiffCoverage = Field(default_factory=DiffCoverage)
    comment: ForgeResult | None = None
    status: ForgeResult | None = None

    def outcome(self, path: str) -> FileOutcome | None:
        """The generation's outcome for `path`, if it was a target."""
        return next((o for o in self.run.files if o.source == path), None)

    def measure(self, coverage: dict[str, FileCoverage]) -> None:
        """The diff coverage before (the baseline's `coverage`) and after (the accepted
        tests' runs) over every worked-on file."""
        before, after = DiffCoverage(), DiffCoverage()
        for f in self.counted():
            before = before.add(coverage.get(f.path), f.lines)
            out = self.outcome(f.path)
            ran = out.validation if out is not None and out.verdict == "accepted" else None
            if ran is not None and ran.coverage is not None:
                after = after.add(ran.coverage, f.lines)
            else:
                after = after.add(coverage.get(f.path), f.lines)
        self.before, self.after = before, after

    def counted(self) -> list[ChangedFile]:
        """The files whose changed lines count: worked on, or already all run."""
        from tasks.premerge.targets import ALL_RAN

        return [f for f in self.changes.files if f.skipped in (None, ALL_RAN)]

    @property
    def passed(self) -> bool:
        """The changed lines reach the threshold (with the accepted tests), or none is
        measured."""
        ratio = self.after.ratio
        return ratio is None or ratio + 1e-9 >= self.min_diff_coverage

    def exit_code(self) -> int:
        """0: every target accepted and the changed lines covered; 1: a gate failed, the
        changed lines stay under the threshold, the baseline did not run, or a push, the
        comment or the status failed."""
        run = self.run
        bad_files = any(f.verdict in ("rejected", "error", "skipped") for f in run.files)
        forge = [r for r in (self.comment, self.status) if r is not None and r.error]
        failed = bad_files or not self.passed or run.baseline_error or run.push_error or forge
        return 1 if failed else 0

    def public(self) -> PremergeSummary:
        """The ``autopilot premerge --json`` document."""
        run = self.run
        changed = []
        for f in self.changes.files:
            out = self.outcome(f.path)
            changed.append(
                ChangedFileSummary(
                    path=f.path,
                    status=f.status,
                    old_path=f.old_path,
                    changed_lines=f.lines,
                    cut=f.cut,
                    skipped=f.skipped,
                    diff_coverage_before=out.diff_coverage_before if out else None,
                    diff_coverage_after=_after(out),
                )
            )
        files = [
            PremergeFile.model_validate(
                f.public().model_dump()
                | {
                    "changed_lines": f.changed_lines,
                    "diff_coverage_before": f.diff_coverage_before,
                    "diff_coverage_after": _after(f),
                }
            )
            for f in run.files
        ]
        return PremergeSummary(
            run_id=run.run_id,
            repo=run.repo,
            base=self.base,
            head=self.head,
            base_commit=self.changes.base,
            head_commit=self.changes.head,
            merge_base=self.changes.merge_base,
            pull_request=self.pull_request,
            branch=run.branch,
            archive_uri=run.archive_uri,
            model_calls=run.model_calls,
            tokens=run.tokens,
            diff_coverage=DiffCoverageSummary(
                before=self.before.ratio,
                after=self.after.ratio,
                min=self.min_diff_coverage,
                measured_lines=self.before.measured,
                covered_before=self.before.covered,
                covered_after=self.after.covered,
            ),
            changed=changed,
            files=files,
            comment=self.comment,
            status=self.status,
            push_error=run.push_error,
            baseline_error=run.baseline_error,
        )


def _after(out: FileOutcome | None) -> float | None:
    """A target's diff coverage after: its tests' when accepted, else as before."""
    if out is None:
        return None
    return out.diff_coverage_after if out.verdict == "accepted" else out.diff_coverage_before
