"""`autopilot nightly --repo PATH ...`: write or improve tests, gated, on a new branch.

Inputs are checked before the flow starts, so a bad repository, ref, glob, threshold or archive
URI is one line on stderr (exit 2), never a flow-run traceback. Exit 0 when every target was
accepted (or skipped because no model is configured), 1 when any was rejected or errored.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tasks.core.errors import AutopilotError
from tasks.generate.report import NightlyReport


def _print_table(report: NightlyReport) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tasks.generate.report import table_rows

    console = Console()
    table = Table(title=f"Nightly of {report.repo} at {report.base_commit[:12]}")
    rows = table_rows(report.files)
    columns = list(rows[0]) if rows else ["file", "verdict"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(str(row[c])) for c in columns))
    console.print(table)
    console.print(
        f"branch: {report.branch or 'none'}; model calls {report.model_calls}, "
        f"tokens {report.tokens}; archive: {report.archive_uri or 'none'}",
        markup=False,
    )
    for f in report.files:
        if f.verdict in ("rejected", "error", "skipped") and f.reasons:
            console.print(f"{f.source}: {f.verdict}: {f.reasons[0]}", markup=False)


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
        with flow_runtime(verbose), tags("autopilot", "nightly"):
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
