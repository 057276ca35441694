"""`autopilot premerge --repo PATH --base REF [--head REF] ...`: tests for a pull request's
changed lines, gated, on a branch on top of its head; a comment and a commit status on the
forge.

Inputs are checked (and a missing base or head fetched) before the flow starts, so a bad
repository, ref or option is one line on stderr (exit 2). Exit 0 when every target was
accepted and the changed lines reach ``gates.min_diff_coverage``; 1 when a gate failed, the
changed lines stay under it, or the push, the comment or the status failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flows.commands.render import Column, print_lines, print_table, progress_on_stderr
from tasks.core.errors import AutopilotError
from tasks.premerge.report import PremergeReport


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _print(report: PremergeReport) -> None:
    doc = report.public()
    columns = [
        Column("file", path=True),
        Column("lines", justify="right"),
        Column("before", justify="right"),
        Column("after", justify="right"),
        Column("verdict"),
    ]
    verdicts = {f.source: f for f in doc.files}
    rows = []
    for f in doc.changed:
        out = verdicts.get(f.path)
        verdict = (
            f"{out.verdict} ({out.gate})" if out and out.gate else out.verdict if out else None
        )
        rows.append(
            [
                f.path,
                len(f.changed_lines),
                _pct(f.diff_coverage_before),
                _pct(f.diff_coverage_after),
                verdict or f.skipped,
            ]
        )
    title = f"Pre-merge of {doc.repo}: {doc.base} ... {doc.head} ({doc.head_commit[:12]})"
    print_table(title, columns, rows)
    cov = doc.diff_coverage
    lines = [
        f"diff coverage {_pct(cov.before)} -> {_pct(cov.after)} (min {cov.min:.0%}, "
        f"{cov.measured_lines} measured changed lines); branch: {doc.branch or 'none'}; "
        f"model calls {doc.model_calls}; archive: {doc.archive_uri or 'none'}",
    ]
    for name, result in (("comment", doc.comment), ("status", doc.status)):
        if result is not None:
            lines.append(f"{name}: {result.action}" + (f": {result.error}" if result.error else ""))
    print_lines(*lines)


def run(
    repo: Path,
    base: str,
    head: str = "HEAD",
    pr_number: int | None = None,
    max_iterations: int = 4,
    min_diff_coverage: float | None = None,
    archive: str | None = None,
    push: bool = False,
    json_out: bool = False,
    verbose: bool | int = False,
    max_model_calls: int | None = None,
    file_time_limit_s: float | None = None,
    dask: str | None = None,
) -> int:
    """Run the pre-merge on `repo` and print its report (one JSON document, or a table).

    Args:
        repo: the repository (or a project directory inside one).
        base: the branch or commit the pull request goes into.
        head: the pull request's head.
        pr_number: the pull (merge) request to comment on (default: the CI's, when plain).
        max_iterations: generate + fix rounds per file.
        min_diff_coverage: the ``diff_coverage`` gate's threshold.
        archive: archive URI (a directory or s3://bucket/prefix).
        push: push the new branch to origin.
        json_out: print the JSON document on stdout.
        verbose: log progress.
        max_model_calls: the run's model-call budget.
        file_time_limit_s: wall-clock budget per file, checked between steps.
        dask: a Dask scheduler address, or "local", to run the files on its workers.

    Returns:
        0 done and covered; 1 a gate, the diff coverage, a push or the forge failed; 2 bad
        input or configuration (one line on stderr).
    """
    from flows.inputs import check_premerge, premerge_pr_number, premerge_settings

    repo = Path(repo)
    number = premerge_pr_number(pr_number)
    try:
        check_premerge(
            repo,
            base,
            head,
            pr_number=number,
            max_iterations=max_iterations,
            min_diff_coverage=min_diff_coverage,
            archive=archive,
            max_model_calls=max_model_calls,
            file_time_limit_s=file_time_limit_s,
        )
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    from prefect import tags

    from flows.premerge import premerge
    from flows.runtime import SHARED_MODEL_LIMIT, flow_runtime
    from flows.workers import on_task_runner

    workers = premerge_settings(repo, min_diff_coverage).model.max_concurrency
    try:
        with flow_runtime(verbose), tags("autopilot", "premerge"), progress_on_stderr():
            report: PremergeReport = on_task_runner(premerge, dask, workers)(
                repo=str(repo.resolve()),
                base=base,
                head=head,
                pr_number=number,
                max_iterations=max_iterations,
                min_diff_coverage=min_diff_coverage,
                archive=archive,
                push=push,
                max_model_calls=max_model_calls,
                file_time_limit_s=file_time_limit_s,
                # Worker processes each have their own semaphore: one limit on the server.
                shared_model_limit=SHARED_MODEL_LIMIT if dask and dask != "local" else None,
            )
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if json_out:
        sys.stdout.write(report.public().model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print(report)
    for problem in (report.run.baseline_error, report.run.push_error):
        if problem:
            print(f"autopilot: {problem}", file=sys.stderr)
    for name, result in (("comment", report.comment), ("status", report.status)):
        if result is not None and result.error:
            print(f"autopilot: the pull request's {name}: {result.error}", file=sys.stderr)
    return report.exit_code()
