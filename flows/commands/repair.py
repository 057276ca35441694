"""`autopilot repair --repo PATH [--report FILE]... [--ref REF] [--max-retries N]
[--human-timeout S] [--archive URI] [--json]`: the post-merge repair flow.

Inputs are checked before the flow starts, so a bad repository, ref, option or configuration is
one line on stderr (exit 2), never a flow-run traceback. A report that cannot be used (missing,
unreadable, broken, a malformed URI) is named first, one line each, and the run goes on with
the others; none usable is exit 2. No model is needed to start: without one every group is
reproduced and ends ``needs_model``. Exit 0 when every failure group was fixed (or nothing
failed), 1 otherwise; ``--json`` prints its document whenever the run finished.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from flows.commands.render import Column, print_lines, print_table, progress_on_stderr
from tasks.core.errors import AutopilotError

if TYPE_CHECKING:
    from tasks.repair.state import GroupSummary, RepairSummary

NO_MODEL = "no model configured (set MISTRAL_API_KEY or AUTOPILOT_MODEL_URL)"


def _reproduced(group: GroupSummary) -> str:
    r = group.reproduction
    return "-" if r is None else "yes" if r.reproduced else "no"


def _print_summary(result: RepairSummary) -> None:
    columns = [
        Column("group", path=True),
        Column("signature"),
        Column("tests", path=True),
        Column("reproduced"),
        Column("outcome"),
        Column("tries", justify="right"),
        Column("reasons"),
    ]
    rows = [
        [g.id, g.signature, g.tests, _reproduced(g), str(g.outcome), g.attempts, g.reasons[-3:]]
        for g in result.groups
    ]
    print_table(f"Repair of {result.repo} at {result.base_commit[:12]}", columns, rows)
    m = result.metrics
    print_lines(*(f"report not used: {e}" for e in result.report_errors))
    if any(g.outcome == "needs_model" for g in result.groups):
        print_lines(f"needs a model: {NO_MODEL}, then autopilot repair --resume {result.run_id}")
    print_lines(
        f"{result.failures} failures, branch {result.branch or '(none)'}; "
        f"autonomous fix rate {m.autonomous_fix_rate:.0%}, human intervention rate "
        f"{m.human_intervention_rate:.0%}, tokens {m.tokens}; "
        f"archive {result.archive_uri}"
    )


def run(
    repo: Path,
    reports: list[str] | list[Path],
    ref: str = "HEAD",
    max_retries: int | None = None,
    human_timeout: float | None = None,
    archive: str | None = None,
    json_out: bool = False,
    verbose: bool | int = False,
    resume: str | None = None,
    commit: str | None = None,
    push: bool = False,
    pr: bool = False,
    dask: str | None = None,
) -> int:
    """Run the post-merge repair flow on `repo` and print its summary (JSON or a table).

    Args:
        repo: The project to repair.
        reports: JUnit XML / RSpec JSON reports, paths or ``s3://`` URIs (fetched by the
            flow); empty runs the suite in the sandbox.
        ref: The merged commit.
        max_retries: Surgeon revisions per group (default 3).
        human_timeout: Seconds to wait for a person per hand-off.
        archive: Archive URI (directory or s3://bucket/prefix).
        json_out: Print issue 6's JSON document on stdout.
        verbose: Log progress (INFO) on stderr.
        resume: An earlier run's id: go on from its archived state (reports and ref unused).
        commit: The failing commit CI names (fetched from origin when missing; wins over ref).
        push: Push the fix branch to origin.
        pr: Push it and open a pull request on the configured forge.
        dask: A Dask scheduler address (or "local") to repair the groups on its workers.

    Returns:
        0 every group fixed, 1 some group not fixed (``needs_model`` included), 2 bad input
        (one line on stderr; also when reports were given and none can be used).
    """
    try:
        from flows.inputs import check_repair

        given = [str(r) for r in reports]
        base = ref if commit is None else "HEAD"
        for line in check_repair(repo, given, base, max_retries, human_timeout):
            print(f"autopilot: warning: report not used: {line}", file=sys.stderr)
        from flows.post_merge import post_merge
        from flows.runtime import SHARED_MODEL_LIMIT, flow_runtime
        from flows.workers import on_task_runner

        flow = on_task_runner(post_merge, dask, 4) if dask else post_merge
        with flow_runtime(verbose), progress_on_stderr():
            result = flow(
                repo=str(repo),
                reports=given,
                ref=ref,
                max_retries=max_retries,
                human_timeout=human_timeout,
                archive=archive,
                resume=resume,
                commit=commit,
                push=push,
                pr=pr,
                # Worker processes each have their own semaphore: one limit on the server.
                shared_model_limit=SHARED_MODEL_LIMIT if dask and dask != "local" else None,
            )
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if json_out:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print_summary(result)
    return result.exit_code()
