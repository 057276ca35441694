"""The pull request's comment and status as text: the numbers, every accepted test and every
rejection with its reason, and names from the pull request that cannot break out of it."""

from __future__ import annotations

from tasks.generate.report import NightlyReport
from tasks.generate.types import FileOutcome
from tasks.premerge.changes import ChangedFile, ChangeSet
from tasks.premerge.comment import MARKER, code, comment_body, status_of
from tasks.premerge.report import DiffCoverage, PremergeReport
from tasks.premerge.targets import ALL_RAN

SHA = "c" * 40


def _report(*outcomes: FileOutcome, after: int = 3) -> PremergeReport:
    files = [
        ChangedFile(path="src/a.py", status="modified", lines=[3, 4, 5]),
        ChangedFile(path="src/b.py", status="modified", lines=[9], skipped=ALL_RAN),
        ChangedFile(
            path="we`ird|<!-- autopilot-premerge -->.lock",
            status="added",
            lines=[1],
            skipped="generated: a lock file",
        ),
    ]
    run = NightlyReport(
        run_id="r1", repo="/r", base_commit=SHA, files=list(outcomes), branch="autopilot/premerge-7"
    )
    report = PremergeReport(
        run=run,
        base="main",
        head="feature",
        pull_request=7,
        changes=ChangeSet(base="b" * 40, head=SHA, merge_base="b" * 40, files=files),
        min_diff_coverage=0.9,
    )
    report.before = DiffCoverage(measured=4, covered=1)
    report.after = DiffCoverage(measured=4, covered=after)
    return report


def _outcome(verdict: str, **kw: object) -> FileOutcome:
    base = {
        "source": "src/a.py",
        "kind": "python",
        "spec": "tests/test_a.py",
        "verdict": verdict,
        "diff_coverage_before": 0.0,
    }
    return FileOutcome.model_validate(base | kw)


def test_the_comment_names_the_numbers_each_test_and_each_rejection() -> None:
    good = _outcome(
        "accepted",
        files={"tests/test_a.py": "x"},
        judge_score=0.8,
        mutation_score=0.75,
        diff_coverage_after=1.0,
    )
    body = comment_body(_report(good, after=4), "http://ui/flow-runs/flow-run/1")
    assert body.startswith(MARKER + "\n")
    assert "**diff coverage 25% -> 100% (min 90%; 4/4 changed lines run)**" in body
    assert "branch `autopilot/premerge-7` (on top of `cccccccccccc`)" in body
    assert (
        "- `tests/test_a.py` for `src/a.py`: changed lines 0% -> 100%, judge 0.80, mutation 0.75"
        in body
    )
    assert "- `src/b.py`: lines 9" in body
    assert "[flow run](http://ui/flow-runs/flow-run/1)" in body
    assert status_of(_report(good, after=4)) == (
        "success",
        "diff coverage 25% -> 100% (min 90%; 4/4 changed lines run); 1/1 accepted",
    )

    bad = _outcome(
        "rejected", gate="diff_coverage", reasons=["changed lines covered 1/3 (33%) < 90%"]
    )
    body = comment_body(_report(bad, after=1))
    assert (
        "- `src/a.py`: rejected at **diff_coverage**: changed lines covered 1/3 (33%) < 90%" in body
    )
    assert status_of(_report(bad, after=1))[0] == "failure"


def test_names_from_the_pull_request_cannot_break_out_or_forge_the_marker() -> None:
    body = comment_body(_report())
    assert body.count(MARKER) == 1
    assert "`we'ird\\|<! -- autopilot-premerge -->.lock`: generated: a lock file" in body
    assert code("a\nb`c") == "`a b'c`"
