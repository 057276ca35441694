"""The nightly flow: write or improve tests for the files that need it most, gated, on a branch.

Worktree at a ref -> map -> baseline suite with coverage and the static rubric -> targets
(untested first, then failing or low coverage, then weak static score) -> per file, in parallel
(one task per file, a thread runner by default): skill, context, generate -> lint -> run -> fix,
flakiness, judge, gates -> accepted files committed on a new branch ``autopilot/nightly-<date>``
(never the base branch; pushed only when asked) -> archive -> table, progress and markdown
artifacts, and an ``autopilot.gate.failed`` event per rejection.

Caching: the per-file task keeps Prefect's own cache off and uses the content-keyed outcome store
of :mod:`tasks.generate.cache` (``$AUTOPILOT_HOME/cache/nightly``): an unchanged file (same
source, specs, factories, helpers, skill, prompts, rubric, models and gates) is not generated
again, so a re-run on an unchanged repository makes no model call, and a killed run started again
re-uses every file that finished.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from flows.audit import artifact_key, map_sources, run_name
from flows.deliver import open_nightly_pr
from flows.inputs import nightly_settings
from flows.limits import (
    INFRA_RETRIES,
    INFRA_RETRY_DELAY_S,
    file_time_limit,
    retry_on_infrastructure,
    task_options,
)
from flows.memory import Memory
from flows.nightly_baseline import Baseline, kept_baseline
from flows.nightly_baseline import baseline as baseline_of
from flows.nightly_publish import publish_nightly, remembered_skips, with_skips
from flows.progress import ProgressArtifact, finished, started
from flows.runtime import collect_logs, with_shared_model_limit
from flows.workers import on_task_runner, shipping
from tasks.audit.baseline import run_baseline
from tasks.audit.prepared import prepared_run
from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.core.run_context import job_context
from tasks.core.types import Mapping
from tasks.generate.cache import default_store_dir
from tasks.generate.copies import project_copies
from tasks.generate.job import NO_MODEL, FileJob, failed, run_file_job, skipped
from tasks.generate.loop import DEFAULT_MAX_ITERATIONS
from tasks.generate.report import (
    NightlyReport,
    SuiteProof,
    archive_run,
    commit_accepted,
    count_calls,
    markdown_summary,
)
from tasks.generate.suite_gate import prove_together
from tasks.generate.targets import Target, choose_targets
from tasks.generate.types import FileOutcome
from tasks.keep.git import (
    resolve_commit,
    subdir_in_repo,
    worktree,
)
from tasks.model.client import ModelClient
from tasks.sandbox.make import make_runner
from tasks.scale import ShippedRun, on_worker
from tasks.scale.secrets import with_block_secrets
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain
from tasks.toolchains.registry import toolchain_for

log = logging.getLogger(__name__)

# The run's model client, shared by its tasks in this process (one connection pool, one
# concurrency limit, one call count). A task in another process (Dask) makes its own.
_CLIENTS: dict[str, ModelClient] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(job: FileJob) -> ModelClient:
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(job.client_token)
        if client is None:
            client = ModelClient.from_settings(job.settings)
            _CLIENTS[job.client_token] = client
        return client


def release_client(token: str) -> ModelClient | None:
    # Kept out of the flow body: Dask pickles the flow function by value, and a lock among its
    # globals cannot be pickled.
    with _CLIENTS_LOCK:
        return _CLIENTS.pop(token, None)


@task(
    name="baseline-suite", task_run_name="baseline suite of {project.name}", cache_policy=NO_CACHE
)
def baseline_suite(
    project: Path, chain: Toolchain, runner: CommandRunner, spec_timeout_s: float
) -> SuiteResult:
    """The suite with coverage before any change; test files that cannot load are set aside and
    the rest re-run, so one broken file never hides every other file's baseline. A suite that
    did not run says why (``ran`` False): the nightly then writes nothing against it."""
    return run_baseline(project, chain, runner, spec_timeout_s=spec_timeout_s)


@task(
    name="generate-tests",
    task_run_name="generate {job.target.source}",
    cache_policy=NO_CACHE,
    # The time limit is the run's (flows/limits.py), given at submit.
    retries=INFRA_RETRIES,
    retry_delay_seconds=INFRA_RETRY_DELAY_S,
    retry_condition_fn=retry_on_infrastructure,
)
def generate_tests(job: FileJob) -> FileOutcome:
    """One target's generate -> lint -> run -> fix loop and gates (or its stored outcome), on
    its own database when the run has services, in whichever process the runner chose (the
    run's environment and services made ready there once, see tasks/scale)."""
    if job.run is None:
        with job_context(job.target.source):
            return run_file_job(job, lambda: _client(job))
    try:
        with on_worker(job.run, job.settings) as (settings, problem):
            if problem:
                return failed(job.target, f"{job.target.source}: {problem}")
            job = job.model_copy(update={"settings": settings})
            with job_context(job.target.source):
                return run_file_job(job, lambda: _client(job))
    except AutopilotError as exc:  # a secret or the run's context not available here
        return failed(job.target, f"{job.target.source}: {exc}")


@task(
    name="suite-proof",
    task_run_name="accepted files together with the suite",
    cache_policy=NO_CACHE,
)
def suite_proof(
    project: Path,
    chain: Toolchain,
    runner: CommandRunner,
    outcomes: list[FileOutcome],
    baseline: SuiteResult,
    spec_timeout_s: float,
) -> tuple[SuiteProof, list[FileOutcome]]:
    """The whole-branch proof (``suite`` gate): the accepted files run together with the
    existing suite, twice, the order varied; a file that fails only together is rejected."""
    proof = prove_together(
        project, chain, runner, outcomes, baseline.validation, timeout_s=spec_timeout_s
    )
    return proof, outcomes


def _nightly_run_name() -> str:
    return run_name("nightly")


def with_task_runner(dask: str | None, workers: int) -> Any:
    """The nightly flow on threads (`workers` at once), or on a Dask cluster (`dask`: an
    address, or "local" for threads of this process)."""
    return on_task_runner(nightly, dask, workers)


def _task_failure(job: FileJob, exc: Exception, limit_s: float) -> str:
    """One line for a file whose task did not return: stopped at its limit, or crashed."""
    if isinstance(exc, TimeoutError):
        return f"{job.target.source}: stopped at its time limit of {limit_s:g}s (file task hung)"
    return f"{job.target.source}: task failed: {type(exc).__name__}: {exc}"


def _run_targets(
    jobs: list[FileJob], targets: list[Target], progress_key: str
) -> list[FileOutcome]:
    if not jobs:
        return []
    progress = ProgressArtifact(progress_key, "Files finished", len(jobs))
    first = jobs[0]
    limit = file_time_limit(first.settings, first.max_iterations, first.file_time_limit_s)
    task = generate_tests.with_options(**task_options(limit))
    futures = {task.submit(job): job for job in jobs}
    by_source: dict[str, FileOutcome] = {}
    for done, future in enumerate(as_completed(list(futures)), start=1):
        try:
            outcome = future.result()
        except Exception as exc:  # a crashed or stopped task is one file's error
            outcome = failed(futures[future].target, _task_failure(futures[future], exc, limit))
        by_source[outcome.source] = outcome
        finished(outcome.source, outcome.verdict, done, len(futures))
        progress.advance(done)
    return [by_source[t.source] for t in targets]


@flow(
    name="nightly",
    flow_run_name=_nightly_run_name,
    log_prints=False,
)
def nightly(
    repo: str,
    ref: str = "HEAD",
    only: list[str] | None = None,
    max_files: int | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    min_coverage: float | None = None,
    min_judge: float | None = None,
    archive: str | None = None,
    push: bool = False,
    max_model_calls: int | None = None,
    file_time_limit_s: float | None = None,
    shared_model_limit: str | None = None,
    pr: bool = False,
) -> NightlyReport:
    """Write or improve the tests of `repo` at `ref`; accepted files land on a new branch.

    Args:
        repo: the target repository (or a project directory inside one).
        ref: the commit to start from.
        only: source globs to restrict the targets to (repeatable).
        max_files: at most this many targets.
        max_iterations: generate + fix rounds per file.
        min_coverage: coverage gate threshold (default from settings).
        min_judge: judge gate threshold (default from settings).
        archive: archive URI (default ``Settings.archive_uri``).
        push: push the new branch to ``origin``.
        max_model_calls: the run's model-call budget; files not started when it is spent are
            skipped, a file that would pass it ends as an error, the run ends cleanly.
        file_time_limit_s: wall-clock budget per file, checked between steps.
        shared_model_limit: a Prefect global concurrency limit every model call of the run takes
            a slot of (default ``model.shared_limit``); created with ``model.max_concurrency``
            slots when missing. Needed when files run in several processes (Dask workers).
        pr: push the branch and open a pull request on the configured forge (``[forge]``),
            its body the run's summary.
    """
    from prefect.runtime import flow_run

    collect_logs()
    started("nightly")
    path = Path(repo).resolve()
    settings = with_shared_model_limit(
        with_block_secrets(nightly_settings(path, min_coverage, min_judge)), shared_model_limit
    )
    root, sub = subdir_in_repo(path)
    commit = resolve_commit(root, ref)
    run_id = str(flow_run.id or uuid.uuid4())
    today = dt.date.today()
    token = uuid.uuid4().hex
    memory = Memory.open(settings, root, sub)
    work = Work(max_iterations, max_model_calls, file_time_limit_s, token, only, max_files, memory)
    try:
        with worktree(root, commit) as wt:
            project = wt / sub if sub else wt
            baseline, targets, outcomes, proof = generate_in(
                project, wt, path, commit, settings, work
            )
    finally:
        client = release_client(token)
    report = NightlyReport(
        run_id=run_id,
        repo=str(path),
        base_commit=commit,
        files=outcomes,
        baseline_error=baseline.error,
        suite_proof=proof,
    )
    count_calls(report, client)
    branch = commit_accepted(root, sub, commit, outcomes, today, push=push and not pr)
    report.branch, report.branch_commit, report.push_error = branch
    if pr:
        delivery = open_nightly_pr(root, report, settings, markdown_summary(report))
        report.push_error = delivery.push_error or report.push_error
        report.pull_request = delivery.pull_request
    archive_run(report, baseline.report, targets, archive or settings.archive_uri, today)
    publish_nightly(report, path, memory, baseline, client)
    return report


#: Chooses a run's targets from its baseline and mapping (the pre-merge's: the changed lines).
ChooseTargets = Callable[[Baseline, Mapping], list[Target]]


@dataclass(frozen=True)
class Work:
    """How a run works on its targets (the flow's options); `memory` None: no run history
    (nothing skipped), `choose` None: the nightly's choice."""

    max_iterations: int
    max_model_calls: int | None
    file_time_limit_s: float | None
    client_token: str
    only: list[str] | None
    max_files: int | None
    memory: Memory | None
    choose: ChooseTargets | None = None
    name: str = "nightly"


def generate_in(
    project: Path,
    wt: Path,
    path: Path,
    commit: str,
    settings: Settings,
    work: Work,
    mapping: Mapping | None = None,
) -> tuple[Baseline, list[Target], list[FileOutcome], SuiteProof | None]:
    """The run inside the worktree, its environment and services ready: the baseline, the
    targets, their outcomes, and the proof of the accepted ones together with the suite
    (None: nothing was accepted). `mapping`: the project's, when the caller made it."""
    mapping = mapping or map_sources(project, settings.toolchain)
    with prepared_run(settings, project, wt, mapping.toolchain) as ready:
        with job_context("baseline"):  # its own database: the template stays clean
            chain = toolchain_for(settings, mapping.toolchain)
            runner = make_runner(
                settings.sandbox, root=wt, toolchain_dirs=chain.sandbox_dirs(project)
            )
            timeout = settings.sandbox.spec_timeout_s
            kept = kept_baseline(baseline_suite, settings, commit, project, wt, chain, ready.env)
            baseline = baseline_of(
                project,
                chain,
                runner,
                mapping,
                path,
                commit,
                timeout,
                kept,
                ready.problem,
            )
        toolchain = mapping.toolchain
        with shipping(work.client_token, settings, ready.problem, toolchain, project, wt) as ship:
            return _targets_and_outcomes(
                project, wt, path, settings, work, mapping, chain, baseline, ship
            )


def _targets_and_outcomes(
    project: Path,
    wt: Path,
    path: Path,
    settings: Settings,
    work: Work,
    mapping: Mapping,
    chain: Toolchain,
    baseline: Baseline,
    ship: tuple[ShippedRun, Settings],
) -> tuple[Baseline, list[Target], list[FileOutcome], SuiteProof | None]:
    """The targets the baseline leaves, their file jobs' outcomes, and the accepted files'
    proof together with the suite (None: nothing was accepted). Each file job carries the run
    and the settings without their secrets (`ship`), for whichever process runs it."""
    if baseline.error:
        targets: list[Target] = []
    elif work.choose is not None:
        targets = work.choose(baseline, mapping)
    else:
        targets = choose_targets(
            baseline.report,
            mapping,
            min_coverage=settings.gates.min_coverage,
            min_static=settings.gates.min_judge,
            only=work.only,
            max_files=work.max_files,
        )
    log.info("%d target(s): %s", len(targets), ", ".join(t.source for t in targets[:10]))
    if not settings.model_configured:
        return baseline, targets, [skipped(t, NO_MODEL) for t in targets], None
    todo = remembered_skips(work.memory, project, targets) if work.memory else targets
    jobs = [
        FileJob(
            project=project,
            target=t,
            toolchain=mapping.toolchain,
            settings=ship[1],
            run=ship[0],
            max_iterations=work.max_iterations,
            store_dir=default_store_dir(settings),
            client_token=work.client_token,
            max_model_calls=work.max_model_calls,
            file_time_limit_s=work.file_time_limit_s,
        )
        for t in todo
    ]
    with project_copies(project):  # the file jobs of this process re-use their copies
        done = _run_targets(jobs, todo, artifact_key(f"{work.name}-progress", path.name))
    outcomes = with_skips(targets, done, work.memory) if work.memory else done
    if not any(o.verdict == "accepted" for o in outcomes):
        return baseline, targets, outcomes, None
    with job_context("suite-proof"):  # its own database, like every job
        runner = make_runner(settings.sandbox, root=wt, toolchain_dirs=chain.sandbox_dirs(project))
        proof, outcomes = suite_proof(
            project, chain, runner, outcomes, baseline.suite, settings.sandbox.spec_timeout_s
        )
    return baseline, targets, outcomes, proof
