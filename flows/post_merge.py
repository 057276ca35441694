"""The post-merge flow: failing tests -> grouped -> diagnosed, patched, audited -> a fix branch.

reports (or a sandboxed suite run) -> scout (parse, group by signature) -> one ``repair-group``
task per group, in parallel (diagnose -> surgeon -> audit -> route; see tasks/repair/loop.py) ->
hand-offs: the flow run pauses (suspends, under a deployment) for a typed
:class:`HumanDecision` per group that needs a person (approve, reject, or edit with a patch) ->
accepted patches applied in order and committed on ONE new branch ``autopilot/fix-<short-sha>``,
one commit per group, built without touching the user's HEAD, index or working tree ->
summary, metrics and the whole state archived. Without a model the run still scouts, groups and
reproduces every group; each then ends ``needs_model`` (a flaky one goes to a person as ever).

The loop is tasks/repair/loop.py, the hand-off tasks/repair/human.py, the branch
tasks/repair/branch.py. The typed state of every group is archived after every step
(``groups/<id>/<n>-<step>.json``), the run's state after the scout, after the repairs and at
the end (``state-*.json``).
"""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from flows.audit import artifact_key, run_name
from flows.deliver import Delivery, deliver
from flows.inputs import repair_settings
from flows.limits import (
    INFRA_RETRIES,
    INFRA_RETRY_DELAY_S,
    group_time_limit,
    retry_on_infrastructure,
    task_options,
)
from flows.memory import Memory
from flows.memory_runs import publish_history, repair_batch
from flows.post_merge_keep import Saver, publish_repair
from flows.post_merge_memory import remembered_groups, with_memory
from flows.progress import ProgressArtifact, finished, started
from flows.repair_jobs import GroupJob, gathered, repair_group_job, spot_for
from flows.runtime import collect_logs, with_shared_model_limit
from flows.workers import on_dask, shipping
from tasks.audit.prepared import PreparedRun, prepared_run
from tasks.ci_inputs import ensure_commit
from tasks.ci_inputs.reports import local_reports
from tasks.core.config import Settings
from tasks.core.errors import ArchiveError, AutopilotError, BadInputError
from tasks.core.run_context import job_context
from tasks.core.types import Mapping, SuiteProblem, TestCaseResult
from tasks.keep.archive import Archive, RunArchive, open_archive
from tasks.keep.git import resolve_commit, subdir_in_repo, worktree
from tasks.model.client import ModelClient
from tasks.repair.branch import commit_fixes
from tasks.repair.human import HumanDecision, deployed, hand_off
from tasks.repair.knowledge import Knowledge, record_outcomes
from tasks.repair.loop import RepairEnv, run_group
from tasks.repair.resume import last_number, reopen, resumed_state, suspended_state
from tasks.repair.scout import (
    environment_group,
    failures_from_suite,
    fill_test_files,
    group_failures,
    no_usable_report,
    read_reports,
)
from tasks.repair.state import (
    GroupState,
    RepairState,
    RepairSummary,
)
from tasks.repair.summary import not_ready_problem, settle, summary_markdown, to_person
from tasks.sandbox.make import make_runner
from tasks.scale import ShippedRun
from tasks.scale.secrets import with_block_secrets
from tasks.toolchains.base import Toolchain
from tasks.toolchains.mapping import map_repo
from tasks.toolchains.registry import toolchain_for

__all__ = ["HumanDecision", "post_merge"]

log = logging.getLogger(__name__)


@task(name="scout", task_run_name="scout {user_repo.name}", cache_policy=NO_CACHE)
def scout(
    user_repo: Path,
    reports: list[str],
    project: Path,
    chain: Toolchain,
    settings: Settings,
    client: ModelClient | None,
) -> tuple[list[TestCaseResult], list[str], SuiteProblem | None]:
    """Failing cases from the reports (a raw log to the scout model), or from a sandboxed suite
    run when none is given (see tasks/repair/scout.py)."""
    if reports:
        cases, errors = read_reports([Path(r) for r in reports], user_repo, client)
        return cases, errors, None
    with job_context("scout"):  # its own database: the template stays clean
        runner = make_runner(
            settings.sandbox, root=project, toolchain_dirs=chain.sandbox_dirs(project)
        )
        timeout = settings.sandbox.spec_timeout_s
        cases, problem = failures_from_suite(project, chain, runner, timeout)
    return cases, [], problem


@task(
    name="repair-group",
    task_run_name="repair {state.group.id}",
    cache_policy=NO_CACHE,
    # The time limit is the run's (flows/limits.py), given at submit.
    retries=INFRA_RETRIES,
    retry_delay_seconds=INFRA_RETRY_DELAY_S,
    retry_condition_fn=retry_on_infrastructure,
)
def repair_group(state: GroupState, env: RepairEnv, saver: Saver) -> GroupState:
    """One group's loop until done or a person is needed (never raises for a tool failure), on
    its own database when the run has services."""
    with job_context(state.group.id):
        return run_group(state, env, saver.group)


def _post_merge_run_name() -> str:
    return run_name("post-merge")


@flow(
    name="post-merge",
    flow_run_name=_post_merge_run_name,
    log_prints=False,
    # Bounded: every group may run a sandboxed test suite at the same time.
    task_runner=ThreadPoolTaskRunner(max_workers=4),  # type: ignore[arg-type]
)
def post_merge(
    repo: str,
    reports: list[str] | None = None,
    ref: str = "HEAD",
    max_retries: int | None = None,
    human_timeout: float | None = None,
    archive: str | None = None,
    human_poll_s: int = 10,
    resume: str | None = None,
    commit: str | None = None,
    push: bool = False,
    pr: bool = False,
    shared_model_limit: str | None = None,
) -> RepairSummary:
    """Repair the failing tests of `repo` at `ref`; returns the summary (issue 6's JSON).

    Args:
        repo: the project (a git work tree or a directory inside one).
        reports: JUnit XML / RSpec JSON reports, local paths or ``s3://`` URIs (fetched);
            none: the suite is run in the sandbox.
        ref: the merged commit the failures belong to.
        max_retries: surgeon revisions per group (default: settings, 3).
        human_timeout: seconds to wait for a person per hand-off (default: settings).
        archive: archive URI (default: settings).
        human_poll_s: how often a paused run checks for an answer.
        resume: the id of an earlier run in the same archive to go on from: its groups at
            their last archived step, at its base commit (`reports` and `ref` are not used).
        commit: the failing commit CI names (instead of `ref`): fetched from ``origin`` when
            the clone lacks it.
        push: push the fix branch to ``origin``.
        pr: push it and open a pull request on the configured forge (``[forge]``), its body
            the run's summary.
        shared_model_limit: a Prefect global concurrency limit every model call takes a slot
            of (see the nightly); needed when groups run in several processes (Dask workers).
    """
    from prefect.runtime import flow_run

    collect_logs()
    started("post-merge")
    path = Path(repo).resolve()
    settings = with_shared_model_limit(
        with_block_secrets(repair_settings(path, max_retries, human_timeout, archive)),
        shared_model_limit,
    )
    root, sub = subdir_in_repo(path)
    if commit and not resume:
        ref = ensure_commit(root, commit).sha
    run_id = str(flow_run.id or uuid.uuid4())
    memory = Memory.open(settings, root, sub)
    archive_root = open_archive(settings.archive_uri, home=settings.home)
    # Under a deployment a hand-off suspends; resumed, the run finds its own archived state.
    own = suspended_state(archive_root, run_id) if deployed() else None
    earlier = own[1] if own else resumed_state(archive_root, resume) if resume else None
    base = resolve_commit(root, earlier.base_commit if earlier else ref)
    run_archive = own[0] if own else archive_root.run("post_merge", run_id, dt.date.today())
    saver = Saver(run_archive, last_number(run_archive) if own else 0)
    # The model is needed only when something fails (or a raw log needs the scout).
    client = ModelClient.from_settings(settings) if settings.model_configured else None
    try:
        with tempfile.TemporaryDirectory(prefix="autopilot-reports-") as fetched_dir:
            given, fetch_errors = local_reports(reports or [], Path(fetched_dir))
            if reports and not given:  # every report named was unusable: nothing to repair
                raise BadInputError(no_usable_report(fetch_errors))
            run = _Run(
                run_id, base, sub, run_archive.uri, given, fetch_errors, human_poll_s, memory
            )
            state = _repair_in(path, root, settings, run, earlier, saver, client, archive_root)
    finally:
        if client is not None:
            # Every model call: role, model, prompt name/version/hash, tokens, latency, retries.
            saver.put(saver.calls_key, [r.model_dump(mode="json") for r in client.records])
            client.close()
    settle(state)
    memory.write(repair_batch(memory, state, memory.observed, client.records if client else None))
    delivery = deliver(
        root,
        state.branch,
        settings=settings,
        push=push,
        pr=pr,
        title=f"Autopilot: fix tests broken by {base[:12]}",
        summary=summary_markdown(state, path.name),
        archive_uri=run_archive.uri,
        commit=base,
    )
    result = _close(state, saver, run_archive, path.name, delivery)
    publish_history(memory, path.name, list(memory.flagged.values()))
    memory.close()
    return result


@dataclass(frozen=True)
class _Run:
    """One run's identity and inputs inside the flow."""

    run_id: str
    commit: str
    sub: str
    archive_uri: str
    reports: list[str]
    report_errors: list[str]
    human_poll_s: int
    memory: Memory


def _repair_in(
    path: Path,
    root: Path,
    settings: Settings,
    run: _Run,
    earlier: RepairState | None,
    saver: Saver,
    client: ModelClient | None,
    archive_root: Archive,
) -> RepairState:
    """The run in a worktree at its commit, with its environment and services ready (past
    fixes are read from `archive_root`'s knowledge when a model is asked)."""
    with worktree(root, run.commit) as wt:
        project = wt / run.sub if run.sub else wt
        mapping = map_repo(project, settings.toolchain)
        toolchain = mapping.toolchain
        with (
            prepared_run(settings, project, wt, toolchain) as ready,
            shipping(run.run_id, settings, ready.problem, toolchain, project, wt) as ship,
        ):
            chain = toolchain_for(settings, mapping.toolchain)
            if earlier is not None:
                state = reopen(earlier, run.run_id, run.archive_uri)
                saver.run(state, "resumed")
            else:
                state = _scouted(path, run, project, chain, mapping, settings, client, ready)
                state.run_id, state.base_commit, state.project = run.run_id, run.commit, run.sub
                state.archive_uri = run.archive_uri
                state.report_errors = [*run.report_errors, *state.report_errors]
                with_memory(state, run.memory, settings, run.reports)
                saver.run(state, "scout")
            if state.groups and ready.problem:
                to_person(state, ready.problem)
            elif state.groups:
                failing = [t for g in state.groups for t in g.group.tests]
                env = RepairEnv(
                    client, settings, root, run.sub, run.commit, chain, project, failing
                )
                if client is not None:
                    env.knowledge = Knowledge.load(archive_root)
                    env.knowledge.earlier = run.memory.earlier(
                        [g.group.signature for g in state.groups]
                    )
                _repair_groups(state, env, saver, run.human_poll_s, path.name, ship)
    return state


def _scouted(
    user_repo: Path,
    run: _Run,
    project: Path,
    chain: Toolchain,
    mapping: Mapping,
    settings: Settings,
    client: ModelClient | None,
    ready: PreparedRun,
) -> RepairState:
    """A new run's state: the failing tests grouped by signature (and the group a person must
    take when the suite cannot start at all, or its environment or services are not ready;
    the tests the run history quarantines as flaky in groups of their own)."""
    reports = run.reports
    if ready.problem and not reports:
        cases: list[TestCaseResult] = []
        report_errors: list[str] = []
        blocked: SuiteProblem | None = not_ready_problem(ready.problem)
    else:
        cases, report_errors, blocked = scout(user_repo, reports, project, chain, settings, client)
        blocked = not_ready_problem(ready.problem) if ready.problem else blocked
    cases = run.memory.observe(cases, "ci-report" if reports else "baseline")
    failing = fill_test_files([c for c in cases if c.status in ("failed", "error")], project, chain)
    rules = chain.file_rules(project)
    groups = remembered_groups(group_failures(failing, rules, mapping), run.memory, run)
    if blocked is not None:
        groups.append(environment_group(blocked))
    return RepairState(
        run_id="",
        repo=str(user_repo),
        base_commit="",
        toolchain=chain.name,
        failures=len(failing),
        report_errors=report_errors,
        groups=groups,
    )


def _close(
    state: RepairState, saver: Saver, run_archive: RunArchive, name: str, delivery: Delivery
) -> RepairSummary:
    """The run's end: the summary (with the push and pull request outcomes) archived, the
    artifacts published."""
    settle(state)
    record_outcomes(run_archive, state)
    result = RepairSummary.of(state).model_copy(
        update={"push_error": delivery.push_error, "pull_request": delivery.pull_request}
    )
    saver.run(state, "final")
    saver.put("summary.json", result.model_dump(mode="json"))
    try:
        run_archive.finalize()
    except ArchiveError as exc:
        log.warning("archive: %s", exc)
    publish_repair(state, name)
    return result


def _repair_groups(
    state: RepairState,
    env: RepairEnv,
    saver: Saver,
    human_poll_s: int,
    name: str,
    ship: tuple[ShippedRun, Settings],
) -> None:
    """Every group in parallel, then the hand-offs one by one, then the fix branch.

    The human timeout bounds the whole wait, not each hand-off: ten groups needing a person
    never keep the run waiting ten times as long. A run without a model waits for nobody:
    its groups are reproduced and reported.
    """
    # Groups a person already decided (a resumed run) stay as they are.
    open_groups = [g for g in state.groups if g.outcome is None]
    options = task_options(group_time_limit(env.settings))
    if on_dask():  # workers in other processes: each group carries its run (tasks/scale)
        jobs = [_job(g, env, ship, spot_for(saver, env.settings)) for g in open_groups]
        futures = [repair_group_job.with_options(**options).submit(j) for j in jobs]
        done = _gathered(futures, name, lambda d: gathered(d, saver, env.client))
    else:
        task = repair_group.with_options(**options)
        done = _gathered([task.submit(g, env, saver) for g in open_groups], name)
    state.groups = [done.get(g.group.id, g) for g in state.groups]
    saver.run(state, "repaired")
    deadline = time.monotonic() + env.settings.repair.human_timeout_s
    for g in state.groups if env.client is not None else []:
        if g.step == "human" and g.outcome is None and g.human is None:
            remaining = max(0.0, deadline - time.monotonic())
            hand_off(g, env, state.run_id, remaining, human_poll_s)
            saver.group(g, "human")
    try:
        commit_fixes(state, env)
    except AutopilotError as exc:
        # The patches passed but could not be committed: a person takes it from here.
        log.warning("committing the fixes failed: %s", exc)
        for g in state.groups:
            if g.final_patch and g.outcome is None:
                g.outcome = "needs_human"
                g.reasons.append(f"could not commit the fix: {exc}")


def _job(g: GroupState, env: RepairEnv, ship: tuple[ShippedRun, Settings], spot: Any) -> GroupJob:
    return GroupJob(
        g, ship[0], ship[1], env.repo_root, env.sub, env.base_commit, env.all_failures,
        env.knowledge, spot,
    )  # fmt: skip


def _gathered(
    futures: list[Any], name: str, back: Callable[[Any], GroupState] = lambda g: g
) -> dict[str, GroupState]:
    """The groups as they finish (`back`: a worker's result taken back into the run): a
    progress artifact (like the nightly's) and a line each."""
    key = artifact_key("post-merge-progress", name)
    progress = ProgressArtifact(key, "Groups finished", len(futures))
    groups: dict[str, GroupState] = {}
    for done, future in enumerate(as_completed(futures), start=1):
        g: GroupState = back(future.result())
        groups[g.group.id] = g
        finished(g.group.id, g.outcome or f"next: {g.step}", done, len(futures))
        progress.advance(done)
    return groups
