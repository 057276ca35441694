"""The nightly's baseline: the audit of the tree before any change, and why nothing is written
against it (the suite did not run, or the run's environment is not ready)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flows.audit import check_specs
from tasks.audit.report import AuditReport, suite_report
from tasks.core.config import Settings
from tasks.core.types import Mapping, ValidationResult
from tasks.envs import PreparedEnv
from tasks.generate.cache import default_store_dir
from tasks.generate.steps import StepMemo
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain

RunSuite = Callable[[Path, Toolchain, CommandRunner, float], SuiteResult]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Baseline:
    """The audit before any change, and why nothing is written against it (None: it ran)."""

    report: AuditReport
    suite: SuiteResult
    error: str | None


def baseline(
    project: Path,
    chain: Toolchain,
    runner: CommandRunner,
    mapping: Mapping,
    path: Path,
    commit: str,
    spec_timeout_s: float,
    run_suite: RunSuite,
    not_ready: str | None = None,
) -> Baseline:
    """The suite with coverage and the static rubric of the mapped specs, before any change
    (not run when `not_ready` says why the environment or a service is missing)."""
    if not_ready:
        log.error("the run's environment is not ready: %s; no test is written", not_ready)
        validation = ValidationResult(toolchain=chain.name, loaded=False, load_error=not_ready)
        suite = SuiteResult(validation=validation)
    else:
        suite = run_suite(project, chain, runner, spec_timeout_s)
    specs = sorted({s for f in mapping.files for s in f.specs} | set(suite.broken))
    report = suite_report(
        repo=str(path),
        commit=commit,
        mapping=mapping,
        suite=suite,
        project=project,
        lint=[],
        static=check_specs(project, chain, specs),
    )
    log.info(
        "baseline of %s: %d files, %d untested, line coverage %.1f%%",
        path.name,
        report.summary.files,
        report.summary.untested,
        100 * report.summary.line_coverage,
    )
    error = None if suite.ran else baseline_error(suite)
    if not_ready:
        error = f"the baseline suite did not run: {not_ready}"
    return Baseline(report=report, suite=suite, error=error)


def baseline_error(suite: SuiteResult) -> str:
    """Why the nightly writes nothing: the baseline suite did not run (one line)."""
    problem = suite.validation.problem
    cause = problem.one_line() if problem else suite.validation.reason or "unknown cause"
    log.error("the baseline suite did not run: %s; no test is written against it", cause)
    return f"the baseline suite did not run: {cause}"


def kept_baseline(
    run_suite: RunSuite,
    settings: Settings,
    commit: str,
    project: Path,
    worktree: Path,
    chain: Toolchain,
    env: PreparedEnv | None,
) -> RunSuite:
    """`run_suite`, its result kept once it ran (``<cache root>/nightly-baselines``): a run
    started again the same day on the same commit, configuration, environment and services
    (a resumed nightly) replays the baseline instead of running the whole suite again."""
    memo = StepMemo(default_store_dir(settings).with_name("nightly-baselines"))
    inputs = {
        "commit": commit,
        "project": str(project.relative_to(worktree)),
        "toolchain": [chain.name, chain.config_digest(project)],
        "env": env.name if env is not None else None,
        "services": settings.services.model_dump(mode="json"),
        "sandbox": settings.sandbox.backend,
        # What the run uses from outside the commit: the interpreter and modules named by the
        # settings, the prepare commands.
        "own": [settings.python, settings.node_modules, settings.prepare, settings.toolchain],
        "day": dt.datetime.now(dt.UTC).date().isoformat(),
    }

    def run(
        project: Path, chain: Toolchain, runner: CommandRunner, spec_timeout_s: float
    ) -> SuiteResult:
        kept = memo.recall("baseline", [inputs, spec_timeout_s], SuiteResult)
        if kept is not None:
            log.info("baseline of %s replayed (run before today on this commit)", project.name)
            return kept
        suite = run_suite(project, chain, runner, spec_timeout_s)
        if suite.ran:
            memo.keep("baseline", [inputs, spec_timeout_s], suite)
        return suite

    return run
