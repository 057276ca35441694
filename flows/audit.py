"""The audit flow: the nightly's measurements without a model.

Worktree at a ref -> map -> the suite in the sandbox with coverage -> lint and static rubric of
every test file -> per-file results, a table and a markdown artifact in the Prefect UI. The
steps are tasks/audit/run.py's, each run as a Prefect task here.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from tasks.audit.baseline import run_baseline
from tasks.audit.report import AuditReport, markdown_summary, table_rows
from tasks.audit.run import audit_repo
from tasks.audit.run import check_specs as check_specs_plain
from tasks.audit.run import lint_specs as lint_specs_plain
from tasks.core.types import LintOffense, Mapping, StaticVerdict
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain
from tasks.toolchains.mapping import map_repo


def artifact_key(prefix: str, name: str) -> str:
    """Artifact keys may hold only lowercase letters, digits and dashes."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "repo"
    return f"{prefix}-{slug}"[:100]


@task(name="map-sources", task_run_name="map {project.name}", cache_policy=NO_CACHE)
def map_sources(project: Path, toolchain: str | None) -> Mapping:
    return map_repo(project, toolchain)


@task(name="run-suite", task_run_name="run suite of {project.name}", cache_policy=NO_CACHE)
def run_suite(
    project: Path, chain: Toolchain, runner: CommandRunner, spec_timeout_s: float
) -> SuiteResult:
    """The suite with coverage and evidence, robust to bad test files (tasks/audit/baseline.py)."""
    return run_baseline(project, chain, runner, spec_timeout_s=spec_timeout_s)


@task(name="lint-specs", task_run_name="lint specs of {project.name}", cache_policy=NO_CACHE)
def lint_specs(
    project: Path, chain: Toolchain, specs: list[str], runner: CommandRunner
) -> tuple[list[LintOffense], list[str]]:
    return lint_specs_plain(project, chain, specs, runner)


@task(name="check-specs", task_run_name="static rubric of {project.name}", cache_policy=NO_CACHE)
def check_specs(project: Path, chain: Toolchain, specs: list[str]) -> dict[str, StaticVerdict]:
    return check_specs_plain(project, chain, specs)


class PrefectSteps:
    """The audit's steps as Prefect tasks."""

    def map(self, project: Path, toolchain: str | None) -> Mapping:
        return map_sources(project, toolchain)

    def suite(
        self, project: Path, chain: Toolchain, runner: CommandRunner, spec_timeout_s: float
    ) -> SuiteResult:
        return run_suite(project, chain, runner, spec_timeout_s)

    def lint(
        self, project: Path, chain: Toolchain, specs: list[str], runner: CommandRunner
    ) -> tuple[list[LintOffense], list[str]]:
        return lint_specs(project, chain, specs, runner)

    def static(self, project: Path, chain: Toolchain, specs: list[str]) -> dict[str, StaticVerdict]:
        return check_specs(project, chain, specs)


def run_name(flow_name: str) -> str:
    """`<flow>-<repo dir name>-<date>`: what an operator scans for in the UI."""
    from prefect.runtime import flow_run

    repo = str(flow_run.parameters.get("repo", "repo"))
    return f"{flow_name}-{Path(repo).name}-{dt.date.today().isoformat()}"


def _audit_run_name() -> str:
    return run_name("audit")


@flow(
    name="audit",
    flow_run_name=_audit_run_name,
    log_prints=False,
)
def audit(repo: str, ref: str = "HEAD") -> AuditReport:
    """Audit the tests of `repo` at `ref`: mapping, coverage, lint, static rubric, pass/fail."""
    from flows.runtime import collect_logs

    collect_logs()
    report = audit_repo(Path(repo), ref, PrefectSteps())
    key = artifact_key("audit", Path(repo).resolve().name)
    name = Path(repo).resolve().name
    create_table_artifact(table_rows(report), key=key, description=f"Audit of {name}")
    create_markdown_artifact(markdown_summary(report), key=f"{key}-summary")
    return report
