"""The post-merge flow: failing tests -> grouped -> diagnosed, patched, audited -> a fix branch.

reports (or a sandboxed suite run) -> scout (parse, group by signature) -> one ``repair-group``
task per group, in parallel (diagnose -> surgeon -> audit -> route; see tasks/repair_loop.py) ->
hand-offs: the flow run pauses for a typed :class:`HumanDecision` per group that needs a person
(approve, reject, or edit with a patch) -> accepted patches applied in order and committed on ONE
new branch ``autopilot/fix-<short-sha>``, one commit per group, built without touching the
user's HEAD, index or working tree -> summary, metrics and the whole state archived.

The typed state of every group is archived after every step (``groups/<id>/<n>-<step>.json``),
the run's state after the scout, the hand-offs and at the end (``state-*.json``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import math
import uuid
from pathlib import Path
from typing import Any, Literal

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from pydantic import Field

from flows.audit import artifact_key, run_name
from tasks.archive import RunArchive, open_archive
from tasks.config import Settings, load_settings
from tasks.discovery import map_repo
from tasks.errors import ArchiveError, AutopilotError, BadInputError
from tasks.git import resolve_commit, subdir_in_repo, unique_branch_name, worktree
from tasks.model import ModelClient
from tasks.repair import (
    GroupState,
    HumanDecisionRecord,
    RepairState,
    group_summary,
    metrics,
    summary,
)
from tasks.repair_audit import git_apply
from tasks.repair_branch import GroupCommit, apply_in_order, commit_chain
from tasks.repair_loop import RepairEnv, now, run_group
from tasks.repair_risk import parse_patch
from tasks.repair_roles import NOT_A_REPORT, group_failures, scout_log
from tasks.reports import parse_reports
from tasks.sandbox import make_runner
from tasks.toolchains import get_toolchain
from tasks.types import TestCaseResult

log = logging.getLogger(__name__)

HUMAN_EVENT = "autopilot.human.needed"


class HumanDecision(RunInput):
    """What a person answers when a group is handed over (the form in the Prefect UI)."""

    action: Literal["approve", "reject", "edit"] = Field(
        description="approve the last patch, reject it, or edit: apply `patch` instead"
    )
    patch: str | None = Field(None, description="The edited unified diff (action 'edit')")
    note: str = Field("", description="Why: kept in the archived state")


class _Saver:
    """Archives states under unique, numbered names (archive objects are immutable)."""

    def __init__(self, archive: RunArchive) -> None:
        self.archive = archive
        self._counter = itertools.count(1)

    def put(self, relpath: str, data: Any) -> None:
        try:
            self.archive.put_json(relpath, data)
        except ArchiveError as exc:
            # The repair goes on; the operator sees the warning.
            log.warning("archive: %s", exc)

    def group(self, state: GroupState, step: str) -> None:
        n = next(self._counter)
        self.put(f"groups/{state.group.id}/{n:03d}-{step}.json", state.model_dump(mode="json"))

    def run(self, state: RepairState, label: str) -> None:
        n = next(self._counter)
        self.put(f"state-{n:03d}-{label}.json", state.model_dump(mode="json"))


@task(name="scout", task_run_name="scout {user_repo.name}", cache_policy=NO_CACHE)
def scout(
    user_repo: Path,
    reports: list[str],
    project: Path,
    toolchain: str,
    settings: Settings,
    client: ModelClient | None,
) -> tuple[list[TestCaseResult], list[str]]:
    """Failing cases from the reports, or from a sandboxed suite run when none is given.

    Plain parsing first; a file no parser understands (a raw log) goes to the scout model when
    one is configured. A file that stays unusable is one error line; the others are kept.
    """
    if reports:
        run = parse_reports([Path(r) for r in reports], repo=user_repo)
        cases, errors = list(run.cases), []
        for e in run.errors:
            if client is None or not e.error.startswith(NOT_A_REPORT):
                errors.append(f"{e.file}: {e.error}")
                continue
            try:
                cases.extend(scout_log(client, Path(e.file), user_repo))
            except (AutopilotError, OSError) as exc:
                errors.append(f"{e.file}: {e.error}; the scout model could not read it: {exc}")
        if errors and len(errors) == len(reports):
            raise BadInputError(errors[0])
        return cases, errors
    runner = make_runner(settings.sandbox, root=project)
    suite = get_toolchain(toolchain).run_suite(project, runner)
    if not suite.validation.loaded:
        raise BadInputError(f"{user_repo}: the suite did not load: {suite.validation.load_error}")
    return suite.validation.examples, []


@task(name="repair-group", task_run_name="repair {state.group.id}", cache_policy=NO_CACHE)
def repair_group(state: GroupState, env: RepairEnv, saver: _Saver) -> GroupState:
    """One group's loop until done or a person is needed (never raises for a tool failure)."""
    return run_group(state, env, saver.group)


def handoff_markdown(state: GroupState) -> str:
    """The whole state of a group formatted for the person who decides."""
    g, d, last = state.group, state.diagnosis, state.last_attempt
    out = [
        f"# Repair needs a person: {g.id}",
        f"Signature: `{g.signature}`",
        "## Why",
        *[f"- {r}" for r in state.handoff_reasons],
        "## Failing tests",
        *[f"- `{t.id}`: {t.name}" for t in g.tests],
    ]
    if d is not None:
        out += [
            "## Diagnosis",
            f"{d.root_cause} (confidence {d.confidence:.2f}, wrong side: {d.wrong_side})",
            f"Strategy: {d.repair_strategy}",
            *[f"- alternative: {a.root_cause} ({a.confidence:.2f})" for a in d.alternatives],
        ]
    if last is not None:
        out += ["## Last patch", "```diff", last.patch.rstrip(), "```"]
        if last.audit is not None:
            out += ["## Audit", f"{last.audit.verdict}: {last.audit.feedback}"]
    out += [
        "## Answer",
        "Resume this flow run with `action` approve (commit the last patch), reject, or edit "
        "(give `patch`, a unified diff), and an optional `note`.",
    ]
    return "\n".join(out)


def _force_running() -> None:
    """After a pause timed out, put the run back to Running so it can finish the others."""
    from prefect import get_client
    from prefect.context import FlowRunContext
    from prefect.states import Running

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(ctx.flow_run.id, Running(), force=True)


def _check_edit(env: RepairEnv, patch: str) -> str | None:
    problems = parse_patch(patch).problems
    if problems:
        return "; ".join(problems)
    with worktree(env.repo_root, env.base_commit) as wt:
        return git_apply(wt, env.sub, patch, check=True)


def hand_off(state: GroupState, env: RepairEnv, run_id: str, timeout_s: float, poll_s: int) -> None:
    """Pause the flow run for a person's decision on `state`; record what they said.

    Unanswered within `timeout_s` (or with a zero timeout): the group ends needs_human.
    """
    from prefect.events import emit_event

    gid = state.group.id
    emit_event(
        HUMAN_EVENT,
        resource={"prefect.resource.id": f"autopilot.repair.{run_id}.{gid}"},
        payload={
            "group": gid,
            "signature": state.group.signature,
            "reasons": state.handoff_reasons,
        },
    )
    create_markdown_artifact(handoff_markdown(state), key=artifact_key("handoff", gid))
    if timeout_s <= 0:
        state.outcome = "needs_human"
        state.reasons.append("handed to a person (no waiting: human timeout is 0)")
        return
    try:
        decision = pause_flow_run(
            wait_for_input=HumanDecision,
            timeout=max(1, math.ceil(timeout_s)),
            poll_interval=poll_s,
            key=f"human-{gid}",
        )
    except FlowPauseTimeout:
        _force_running()
        state.outcome = "needs_human"
        state.reasons.append(f"no answer from a person within {timeout_s:g}s")
        return
    state.human = HumanDecisionRecord(
        action=decision.action, patch=decision.patch, note=decision.note
    )
    last = state.last_attempt
    if decision.action == "reject":
        risky = last is not None and last.audit is not None and last.audit.verdict == "RISKY"
        state.outcome = "risky" if risky else "failed"
        state.reasons.append(f"rejected by a person: {decision.note}".rstrip(": "))
    elif decision.action == "approve":
        if last is None:
            state.outcome = "failed"
            state.reasons.append("approved, but there is no patch to apply")
        else:
            state.final_patch = last.patch
            state.reasons.append(f"approved by a person: {decision.note}".rstrip(": "))
    else:
        error = _check_edit(env, decision.patch or "") if decision.patch else "no patch given"
        if error:
            state.outcome = "failed"
            state.reasons.append(f"edited patch refused: {error}")
        else:
            state.final_patch = decision.patch
            state.reasons.append(f"edited by a person: {decision.note}".rstrip(": "))


def commit_fixes(state: RepairState, env: RepairEnv) -> None:
    """Commit every accepted patch on one new branch, one commit per group, in group order."""
    accepted = [g for g in state.groups if g.final_patch and g.outcome is None]
    if not accepted:
        return
    applied = apply_in_order(
        env.repo_root, env.sub, env.base_commit, [g.final_patch or "" for g in accepted]
    )
    commits: list[GroupCommit] = []
    committed: list[GroupState] = []
    duplicates: list[GroupState] = []
    for g, result in zip(accepted, applied, strict=True):
        if result is None:
            duplicates.append(g)
            g.reasons.append("its patch is already part of an earlier fix on the branch")
            continue
        if isinstance(result, str):
            g.outcome = "needs_human"
            g.reasons.append(result)
            continue
        cause = g.diagnosis.root_cause if g.diagnosis else g.group.signature
        tests = "\n".join(f"- {t.id}" for t in g.group.tests)
        message = f"autopilot: fix {g.group.id}: {cause[:60]}\n\n{cause}\n\nTests:\n{tests}\n"
        commits.append(GroupCommit(message=message, files=result))
        committed.append(g)
    if not commits:
        return
    branch = unique_branch_name(env.repo_root, f"autopilot/fix-{env.base_commit[:7]}")
    shas = commit_chain(env.repo_root, env.base_commit, branch, commits)
    state.branch = branch
    for g, sha in zip(committed, shas, strict=True):
        g.commit, g.outcome, g.finished_at = sha, "fixed", now()
    for g in duplicates:
        g.commit, g.outcome, g.finished_at = shas[-1], "fixed", now()


def _post_merge_run_name() -> str:
    return run_name("post-merge")


@flow(name="post-merge", flow_run_name=_post_merge_run_name, log_prints=False)
def post_merge(
    repo: str,
    reports: list[str] | None = None,
    ref: str = "HEAD",
    max_retries: int | None = None,
    human_timeout: float | None = None,
    archive: str | None = None,
    human_poll_s: int = 10,
) -> dict[str, Any]:
    """Repair the failing tests of `repo` at `ref`; returns the summary (issue 6's JSON).

    Args:
        repo: the project (a git work tree or a directory inside one).
        reports: JUnit XML / RSpec JSON reports; none: the suite is run in the sandbox.
        ref: the merged commit the failures belong to.
        max_retries: surgeon revisions per group (default: settings, 3).
        human_timeout: seconds to wait for a person per hand-off (default: settings).
        archive: archive URI (default: settings).
        human_poll_s: how often a paused run checks for an answer.
    """
    from prefect.runtime import flow_run

    path = Path(repo).resolve()
    settings = load_settings(
        path,
        {
            "repair.max_retries": max_retries,
            "repair.human_timeout_s": human_timeout,
            "archive": archive,
        },
    )
    root, sub = subdir_in_repo(path)
    commit = resolve_commit(root, ref)
    run_id = str(flow_run.id or uuid.uuid4())
    run_archive = open_archive(settings.archive_uri, home=settings.home).run(
        "post_merge", run_id, dt.date.today()
    )
    saver = _Saver(run_archive)
    # The model is needed only when something fails (or a raw log needs the scout).
    client = ModelClient.from_settings(settings) if settings.model_configured else None
    try:
        with worktree(root, commit) as wt:
            project = wt / sub if sub else wt
            mapping = map_repo(project, settings.toolchain)
            cases, report_errors = scout(
                path, list(reports or []), project, mapping.toolchain, settings, client
            )
            failing = [c for c in cases if c.status in ("failed", "error")]
            state = RepairState(
                run_id=run_id,
                repo=str(path),
                project=sub,
                base_commit=commit,
                toolchain=mapping.toolchain,
                archive_uri=run_archive.uri,
                failures=len(failing),
                report_errors=report_errors,
                groups=[GroupState(group=g) for g in group_failures(failing, mapping)],
            )
            saver.run(state, "scout")
            if state.groups:
                client = client or ModelClient.from_settings(settings)  # ConfigError: no model
                env = RepairEnv(
                    client=client,
                    settings=settings,
                    repo_root=root,
                    sub=sub,
                    base_commit=commit,
                    toolchain=mapping.toolchain,
                    project=project,
                    all_failures=failing,
                )
                _repair_groups(state, env, saver, human_poll_s)
    finally:
        if client is not None:
            client.close()
    for g in state.groups:
        if g.outcome is None:  # a PASSED patch that could not be committed is handled above
            g.outcome = "needs_human"
        g.finished_at = g.finished_at or now()
    result = summary(state)
    saver.run(state, "final")
    saver.put("summary.json", result)
    try:
        run_archive.finalize()
    except ArchiveError as exc:
        log.warning("archive: %s", exc)
    _artifacts(state, path.name)
    return result


def _repair_groups(state: RepairState, env: RepairEnv, saver: _Saver, human_poll_s: int) -> None:
    """Every group in parallel, then the hand-offs one by one, then the fix branch."""
    futures = [repair_group.submit(g, env, saver) for g in state.groups]
    state.groups = [f.result() for f in futures]
    saver.run(state, "repaired")
    for g in state.groups:
        if g.step == "human":
            hand_off(g, env, state.run_id, env.settings.repair.human_timeout_s, human_poll_s)
            saver.group(g, "human")
    commit_fixes(state, env)


def _artifacts(state: RepairState, name: str) -> None:
    rows = []
    for g in state.groups:
        s = group_summary(g)
        rows.append(
            {
                "group": g.group.id,
                "tests": len(g.group.tests),
                "outcome": g.outcome,
                "attempts": s["attempts"],
                "tokens": g.tokens,
                "signature": g.group.signature,
            }
        )
    key = artifact_key("post-merge", name)
    create_table_artifact(rows, key=key, description=f"Repair of {name}")
    m = metrics(state.groups)
    create_markdown_artifact(
        f"# Post-merge repair of {name}\n\nBranch: {state.branch or '(none)'}\n\n"
        f"- autonomous fix rate: {m.autonomous_fix_rate:.0%}\n"
        f"- human intervention rate: {m.human_intervention_rate:.0%}\n"
        f"- mean time to fix: {m.mean_time_to_fix_s}s\n- tokens: {m.tokens}\n",
        key=f"{key}-summary",
    )
