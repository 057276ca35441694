"""The pre-merge flow: tests for the lines a pull request adds or changes, before it lands.

base and head present (fetched when the clone lacks them) -> their merge base -> the changed
lines per file from git (``base...head``; binary, generated, vendored and deleted files skipped
with the reason) -> a worktree at the head -> map -> changed sources cut to the budget -> the
nightly's machinery (:func:`flows.nightly.generate_in`): the baseline suite with coverage, the
targets (changed sources whose changed lines the suite does not all run, aimed at those
lines), per file generate -> lint -> run -> fix, the gates with ``diff_coverage`` and the
mutants on changed lines, the whole-branch proof -> accepted files on a new branch
``autopilot/premerge-<pr>`` on top of the head (never the head itself) -> the diff coverage
before and after -> archive -> the pull request's comment (updated, not duplicated) and the
head's commit status on the forge -> artifacts and an ``autopilot.gate.failed`` event per
rejection.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.audit import artifact_key, map_sources, run_name
from flows.deliver import flow_run_url
from flows.inputs import premerge_settings
from flows.nightly import Work, generate_in, release_client
from flows.nightly_baseline import Baseline
from flows.nightly_publish import emit_rejections
from flows.progress import started
from flows.runtime import collect_logs, with_shared_model_limit
from tasks.ci_inputs import ensure_ref, merge_base
from tasks.core.config import Settings
from tasks.core.types import Mapping
from tasks.forge import set_status, upsert_comment
from tasks.generate.loop import DEFAULT_MAX_ITERATIONS
from tasks.generate.report import (
    NightlyReport,
    SuiteProof,
    archive_run,
    commit_accepted,
    count_calls,
    table_rows,
)
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome
from tasks.keep.git import subdir_in_repo, worktree
from tasks.premerge.changes import ChangeSet, read_changes, within_budget
from tasks.premerge.comment import MARKER, comment_body, status_of
from tasks.premerge.report import ForgeResult, PremergeReport
from tasks.premerge.targets import changed_targets
from tasks.scale.secrets import with_block_secrets

log = logging.getLogger(__name__)


def _premerge_run_name() -> str:
    return run_name("premerge")


@flow(name="premerge", flow_run_name=_premerge_run_name, log_prints=False)
def premerge(
    repo: str,
    base: str,
    head: str = "HEAD",
    pr_number: int | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    min_diff_coverage: float | None = None,
    archive: str | None = None,
    push: bool = False,
    max_model_calls: int | None = None,
    file_time_limit_s: float | None = None,
    shared_model_limit: str | None = None,
) -> PremergeReport:
    """Test the lines a pull request changes; accepted tests land on a branch on its head.

    Args:
        repo: the repository (or a project directory inside one).
        base: the branch or commit the pull request goes into (fetched from ``origin`` when
            missing).
        head: the pull request's head (fetched likewise).
        pr_number: the pull (merge) request to comment on and whose head gets the status
            (None: no comment, no status).
        max_iterations: generate + fix rounds per file.
        min_diff_coverage: the ``diff_coverage`` gate's threshold (default from settings).
        archive: archive URI (default ``Settings.archive_uri``).
        push: push the new branch to ``origin``.
        max_model_calls: the run's model-call budget.
        file_time_limit_s: wall-clock budget per file, checked between steps.
        shared_model_limit: a Prefect global concurrency limit for every model call.
    """
    from prefect.runtime import flow_run

    collect_logs()
    started("premerge")
    path = Path(repo).resolve()
    settings = with_shared_model_limit(
        with_block_secrets(premerge_settings(path, min_diff_coverage)), shared_model_limit
    )
    root, sub = subdir_in_repo(path)
    head_sha = ensure_ref(root, head).sha
    base_sha = ensure_ref(root, base).sha
    changes = read_changes(
        root, base_sha, head_sha, merge_base(root, base_sha, head_sha), sub, settings.premerge
    )
    run_id, today, token = str(flow_run.id or uuid.uuid4()), dt.date.today(), uuid.uuid4().hex
    work = Work(max_iterations, max_model_calls, file_time_limit_s, token, None, None, None)
    try:
        with worktree(root, head_sha) as wt:
            project = wt / sub if sub else wt
            baseline, targets, outcomes, proof, changes = _work_on(
                project, wt, path, head_sha, settings, work, changes
            )
    finally:
        client = release_client(token)
    run = NightlyReport(
        run_id=run_id,
        repo=str(path),
        base_commit=head_sha,
        files=outcomes,
        baseline_error=baseline.error if baseline else None,
        suite_proof=proof,
    )
    count_calls(run, client)
    name = f"autopilot/premerge-{pr_number or head_sha[:12]}"
    branch = commit_accepted(
        root, sub, head_sha, outcomes, today, push=push, branch=name, title="Autopilot pre-merge"
    )
    run.branch, run.branch_commit, run.push_error = branch
    report = PremergeReport(
        run=run,
        base=base,
        head=head,
        pull_request=pr_number,
        changes=changes,
        min_diff_coverage=settings.gates.min_diff_coverage,
    )
    report.measure(baseline.suite.files if baseline else {})
    _archive(report, baseline, targets, archive or settings.archive_uri, today)
    _tell_forge(report, settings)
    _publish(report, path)
    return report


def _work_on(
    project: Path,
    wt: Path,
    path: Path,
    head: str,
    settings: Settings,
    work: Work,
    changes: ChangeSet,
) -> tuple[Baseline | None, list[Target], list[FileOutcome], SuiteProof | None, ChangeSet]:
    """The changed sources within budget, and the nightly's machinery aimed at their changed
    lines (no baseline at all when no source has a changed line to test)."""
    mapping = map_sources(project, settings.toolchain)
    budget = settings.premerge
    changes = within_budget(
        changes, {m.source for m in mapping.files}, budget.max_changed_lines, budget.max_files
    )
    if not changes.worked:
        log.info("no changed source line to test")
        return None, [], [], None, changes

    def choose(baseline: Baseline, mapping: Mapping) -> list[Target]:
        return changed_targets(changes, baseline.report, baseline.suite.files, mapping)

    aimed = dataclasses.replace(work, choose=choose, name="premerge")
    baseline, targets, outcomes, proof = generate_in(
        project, wt, path, head, settings, aimed, mapping
    )
    return baseline, targets, outcomes, proof, changes


def _archive(
    report: PremergeReport,
    baseline: Baseline | None,
    targets: list[Target],
    uri: str,
    today: dt.date,
) -> None:
    """The run under ``<uri>/premerge/<date>/<run-id>/``: the generation's objects, the changes,
    the premerge document and the comment as it will be posted."""
    extra: dict[str, str | dict[str, Any]] = {
        "changes.json": report.changes.model_dump(mode="json"),
        "premerge.json": report.public().model_dump(mode="json"),
        "comment.md": comment_body(report),
    }
    audit = baseline.report if baseline else None
    archive_run(report.run, audit, targets, uri, today, flow="premerge", extra=extra)


def _tell_forge(report: PremergeReport, settings: Settings) -> None:
    """The comment (updated when the run's marker is found) and the head's commit status;
    each a one-line result, never an exception (the branch and archive stand either way)."""
    if report.pull_request is None or not settings.forge.configured:
        why = "no pull request number" if settings.forge.configured else "no forge configured"
        log.info("no comment and no status: %s", why)
        return
    url = flow_run_url()
    comment = upsert_comment(
        settings.forge, report.pull_request, comment_body(report, url), marker=MARKER
    )
    report.comment = ForgeResult(
        done=comment.ok, action=comment.action, url=comment.url, error=comment.error
    )
    state, description = status_of(report)
    status = set_status(
        settings.forge,
        report.changes.head,
        state=state,
        description=description,
        context=settings.premerge.status_context,
        target_url=url,
    )
    report.status = ForgeResult(done=status.ok, action=status.action, error=status.error)
    for result in (comment, status):
        if result.error:
            log.error("forge: the %s: %s", result.what, result.error)


def _publish(report: PremergeReport, path: Path) -> None:
    """The table and comment artifacts, and an event per rejection."""
    key = artifact_key("premerge", path.name)
    rows = table_rows(report.run.files)
    create_table_artifact(rows, key=key, description=f"Pre-merge of {path.name}")
    create_markdown_artifact(comment_body(report), key=f"{key}-summary")
    emit_rejections(report.run)
