"""`autopilot nightly --repo PATH ...`: write or improve tests, gated, on a new branch.

Inputs are checked before the flow starts, so a bad repository, ref, glob, threshold or archive
URI is one line on stderr (exit 2), never a flow-run traceback. Exit 0 when every target was
accepted (or skipped because no model is configured), 1 when any was rejected or errored.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flows.commands.render import Column, print_lines, print_table, progress_on_stderr
from tasks.core.errors import AutopilotError
from tasks.generate.report import NightlyReport, table_rows


def _print_table(report: NightlyReport) -> None:
    columns = [
        Column("file", path=True),
        Column("kind"),
        Column("verdict", style={"accepted": "green", "rejected": "red", "error": "red"}),
        Column("gate"),
        Column("iter", justify="right"),
        Column("cov", justify="right"),
        Column("judge", justify="right"),
        Column("tokens", justify="right"),
    ]
    rows = [
        [
            row["file"],
            row["kind"],
            row["verdict"],
            row["failed gate"],
            row["iterations"],
            f"{row['coverage before']}->{row['coverage after']}",
            row["judge score"],
            row["tokens"],
        ]
        for row in table_rows(report.files)
    ]
    print_table(f"Nightly of {report.repo} at {report.base_commit[:12]}", columns, rows)
    print_lines(
        f"branch: {report.branch or 'none'}; model calls {report.model_calls}, "
        f"tokens {report.tokens}; archive: {report.archive_uri or 'none'}",
        *(
            f"{f.source}: {f.verdict}: {f.reasons[0]}"
            for f in report.files
            if f.verdict in ("rejected", "error", "skipped") and f.reasons
        ),
    )


def run(
    repo: Path,
    ref: str = "HEAD",
    only: list[str] | None = None,
    max_files: int | None = None,
    max_iterations: int = 4,
    min_coverage: float | None = None,
    min_judge: float | None = None,
    archive: str | None = None,
    dask: str | None = None,
    push: bool = False,
    json_out: bool = False,
    verbose: bool | int = False,
    max_model_calls: int | None = None,
    file_time_limit_s: float | None = None,
    pr: bool = False,
) -> int:
    """Run the nightly on `repo` and print its report (one JSON document, or a table).

    Args:
        repo: the target repository (or a project directory inside one).
        ref: the commit to start from.
        only: source globs (repeatable) restricting the targets.
        max_files: at most this many targets.
        max_iterations: generate + fix rounds per file (default 4).
        min_coverage: coverage gate threshold.
        min_judge: judge gate threshold.
        archive: archive URI (a directory or s3://bucket/prefix).
        dask: a Dask scheduler address, or "local", to run files on prefect-dask.
        push: push the new branch to origin.
        json_out: print issue 5's JSON document on stdout.
        verbose: log progress.
        max_model_calls: the run's model-call budget (``--max-model-calls``); None: no limit.
        file_time_limit_s: wall-clock budget per file, checked between steps; None: no limit.
        pr: push the branch and open a pull request on the configured forge.

    Returns:
        0 all accepted (or skipped for no model); 1 any rejected or errored, or the flow failed;
        2 bad input or configuration (one line on stderr).
    """
    repo = Path(repo)
    from flows.inputs import check_nightly, nightly_settings

    try:
        check_nightly(
            repo,
            ref,
            only,
            max_files,
            max_iterations,
            min_coverage,
            min_judge,
            archive,
            max_model_calls=max_model_calls,
            file_time_limit_s=file_time_limit_s,
        )
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    from prefect import tags

    from flows.nightly import with_task_runner
    from flows.runtime import SHARED_MODEL_LIMIT, flow_runtime

    workers = nightly_settings(repo, min_coverage, min_judge).model.max_concurrency
    try:
        with flow_runtime(verbose), tags("autopilot", "nightly"), progress_on_stderr():
            report: NightlyReport = with_task_runner(dask, workers)(
                repo=str(repo.resolve()),
                ref=ref,
                only=list(only) if only else None,
                max_files=max_files,
                max_iterations=max_iterations,
                min_coverage=min_coverage,
                min_judge=min_judge,
                archive=archive,
                push=push,
                max_model_calls=max_model_calls,
                file_time_limit_s=file_time_limit_s,
                # Worker processes each have their own semaphore: one limit on the server.
                shared_model_limit=SHARED_MODEL_LIMIT if dask and dask != "local" else None,
                pr=pr,
            )
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if json_out:
        sys.stdout.write(report.public().model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print_table(report)
    if report.baseline_error:
        print(f"autopilot: {report.baseline_error}", file=sys.stderr)
    return report.exit_code()
