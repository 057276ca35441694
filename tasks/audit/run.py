"""The audit's steps, in a worktree of the audited commit: map, baseline suite, lint, rubric.

:func:`audit_repo` is the whole audit as plain functions; flows/audit.py runs the same steps as
Prefect tasks (pass other :class:`AuditSteps`). The CLI runs it without Prefect when no Prefect
server is configured: an ephemeral server costs seconds that an audit of a small suite does not
have to pay.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from judge.static import check_file
from tasks.audit.baseline import run_baseline
from tasks.audit.prepared import not_ready_suite, prepared_run
from tasks.audit.report import AuditReport, suite_report
from tasks.core.config import load_settings
from tasks.core.errors import BadInputError
from tasks.core.run_context import job_context
from tasks.core.types import LintOffense, Mapping, StaticVerdict
from tasks.keep.git import resolve_commit, subdir_in_repo, worktree
from tasks.sandbox.make import make_runner
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain, ToolchainError
from tasks.toolchains.mapping import list_specs, map_repo
from tasks.toolchains.registry import detect_toolchain, toolchain_for

log = logging.getLogger(__name__)


def lint_specs(
    project: Path, chain: Toolchain, specs: list[str], runner: CommandRunner
) -> tuple[list[LintOffense], list[str]]:
    """Lint every test file: (offences, errors). A linter that fails is one error line (the
    tool, the real cause, a hint), never the end of the audit."""
    if not specs:
        return [], []
    try:
        return chain.lint(project, specs, False, runner), []
    except ToolchainError as exc:
        log.info("lint failed: %s", exc)
        return [], [str(exc)]


def check_specs(project: Path, chain: Toolchain, specs: list[str]) -> dict[str, StaticVerdict]:
    """The static rubric of every test file."""
    return {spec: check_file(project, spec, chain) for spec in specs}


class AuditSteps(Protocol):
    """How each step runs: plain calls, or Prefect tasks (flows/audit.py)."""

    def map(self, project: Path, toolchain: str | None) -> Mapping: ...

    def suite(
        self, project: Path, chain: Toolchain, runner: CommandRunner, spec_timeout_s: float
    ) -> SuiteResult: ...

    def lint(
        self, project: Path, chain: Toolchain, specs: list[str], runner: CommandRunner
    ) -> tuple[list[LintOffense], list[str]]: ...

    def static(
        self, project: Path, chain: Toolchain, specs: list[str]
    ) -> dict[str, StaticVerdict]: ...


class PlainSteps:
    """Every step as a plain function call."""

    def map(self, project: Path, toolchain: str | None) -> Mapping:
        return map_repo(project, toolchain)

    def suite(
        self, project: Path, chain: Toolchain, runner: CommandRunner, spec_timeout_s: float
    ) -> SuiteResult:
        return run_baseline(project, chain, runner, spec_timeout_s=spec_timeout_s)

    def lint(
        self, project: Path, chain: Toolchain, specs: list[str], runner: CommandRunner
    ) -> tuple[list[LintOffense], list[str]]:
        return lint_specs(project, chain, specs, runner)

    def static(self, project: Path, chain: Toolchain, specs: list[str]) -> dict[str, StaticVerdict]:
        return check_specs(project, chain, specs)


def check_inputs(repo: Path, ref: str) -> None:
    """Raise BadInputError/ConfigError for what would make an audit fail at once: the
    repository, the ref, the configuration, a toolchain for it."""
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    settings = load_settings(repo)
    root, _ = subdir_in_repo(repo)
    resolve_commit(root, ref)
    detect_toolchain(repo, settings.toolchain)


def audit_repo(repo: Path, ref: str = "HEAD", steps: AuditSteps | None = None) -> AuditReport:
    """Audit the tests of `repo` at `ref` in a throwaway worktree.

    Every test file is linted and checked by the static rubric (not only the ones a name rule
    maps); the suite runs once with coverage and per-test-file evidence.

    Raises:
        BadInputError: not a git repository, a bad ref, or no toolchain recognised.
    """
    steps = steps or PlainSteps()
    path = repo.resolve()
    settings = load_settings(path)
    root, sub = subdir_in_repo(path)
    commit = resolve_commit(root, ref)
    with worktree(root, commit) as wt:
        project = wt / sub if sub else wt
        mapping = steps.map(project, settings.toolchain)
        log.info(
            "%s at %s: %d source files (%s), %d untested by name",
            path.name,
            commit[:12],
            len(mapping.files),
            mapping.toolchain,
            len(mapping.untested),
        )
        with prepared_run(settings, project, wt, mapping.toolchain) as ready:
            chain = toolchain_for(settings, mapping.toolchain)
            with job_context("audit"):  # its own database: the template stays clean
                runner = make_runner(
                    settings.sandbox, root=wt, toolchain_dirs=chain.sandbox_dirs(project)
                )
                if ready.problem:
                    suite = not_ready_suite(chain.name, ready.problem, ready.suite_problem)
                else:
                    log.info("running the suite (%s sandbox)", settings.sandbox.backend)
                    suite = steps.suite(project, chain, runner, settings.sandbox.spec_timeout_s)
            specs = sorted(
                set(list_specs(project, mapping.toolchain))
                | {s for f in mapping.files for s in f.specs}
                | set(suite.broken)
            )
            specs = [s for s in specs if (project / s).is_file()]
            lint: list[LintOffense] = []
            errors: list[str] = []
            problem = suite.validation.problem if not suite.ran else None
            if problem is not None and chain.lint_blocked_by(problem):
                log.info("lint skipped: %s", problem.one_line())
            else:
                log.info("linting and checking %d test files", len(specs))
                lint, errors = steps.lint(project, chain, specs, runner)
            errors = [*suite.errors, *errors]
            static = steps.static(project, chain, specs)
            report = suite_report(
                repo=str(path),
                commit=commit,
                mapping=mapping,
                suite=suite,
                project=project,
                lint=lint,
                static=static,
                errors=errors,
            )
    return report
