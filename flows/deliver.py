"""The fix out: push a run's branch to the remote and open a pull request on the configured
forge with the run's markdown summary as its body (the nightly's and the repair's ``--push``
and ``--pr``). A refused push or a forge that answers 401/422 is a one-line outcome, never an
exception: the branch stays in the clone and the archive is written either way."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from flows.progress import flow_run_url as progress_flow_run_url
from tasks.ci_inputs import push_fix_branch
from tasks.core.config import Settings
from tasks.forge import open_pull_request, pull_request_body
from tasks.generate.report import NightlyReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """What became of the push and the pull request (None: not asked, or done)."""

    push_error: str | None = None
    pull_request: str | None = None
    pull_request_ok: bool = True


def flow_run_url() -> str | None:
    """The current flow run's page in the Prefect UI, when there is one (none on an
    ephemeral server: a link to nowhere is worse than none)."""
    try:
        return progress_flow_run_url()
    except Exception:  # no flow run, no UI configured
        return None


def deliver(
    root: Path,
    branch: str | None,
    *,
    settings: Settings,
    push: bool,
    pr: bool,
    title: str,
    summary: str,
    archive_uri: str | None,
    commit: str | None,
) -> Delivery:
    """Push `branch` (when `push` or `pr`) and open its pull request (when `pr`)."""
    if branch is None or not (push or pr):
        return Delivery()
    pushed = push_fix_branch(root, branch)
    if not pushed.pushed:
        log.warning("push of %s failed: %s", branch, pushed.error)
        why = f"no pull request for {branch}: the push failed" if pr else None
        return Delivery(push_error=pushed.error, pull_request=why, pull_request_ok=not pr)
    if not pr:
        return Delivery()
    body = pull_request_body(
        summary, flow_run_url=flow_run_url(), archive_uri=archive_uri, commit=commit
    )
    outcome = open_pull_request(settings.forge, head=branch, title=title, body=body)
    line = outcome.url if outcome.status == "opened" and outcome.url else outcome.one_line()
    return Delivery(pull_request=line, pull_request_ok=outcome.ok)


def open_nightly_pr(
    root: Path, report: NightlyReport, settings: Settings, summary: str
) -> Delivery:
    """The nightly's ``--pr``: its branch pushed and proposed, the summary as the body."""
    return deliver(
        root,
        report.branch,
        settings=settings,
        push=True,
        pr=True,
        title=f"Autopilot nightly: tests for {Path(report.repo).name}",
        summary=summary,
        archive_uri=report.archive_uri,
        commit=None,  # the summary names the base commit; "failing commit" is the repair's
    )
