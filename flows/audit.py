"""The audit flow: the nightly's measurements without a model.

Worktree at a ref -> map -> the suite in the sandbox with coverage -> lint and static rubric of
every spec -> per-file results, a table and a markdown artifact in the Prefect UI.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from judge.static import check_file
from tasks.audit import (
    AuditReport,
    build_report,
    isolate_culprits,
    markdown_summary,
    specs_failing_to_load,
    table_rows,
)
from tasks.config import load_settings
from tasks.discovery import list_specs, map_repo
from tasks.git import resolve_commit, subdir_in_repo, worktree
from tasks.sandbox import make_runner
from tasks.toolchains import get_toolchain
from tasks.toolchains.base import CommandRunner, SuiteResult
from tasks.types import LintOffense, Mapping, StaticVerdict, ToolchainName


def artifact_key(prefix: str, name: str) -> str:
    """Artifact keys may hold only lowercase letters, digits and dashes."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "repo"
    return f"{prefix}-{slug}"[:100]


@task(name="map-sources", task_run_name="map {project.name}", cache_policy=NO_CACHE)
def map_sources(project: Path, toolchain: str | None) -> Mapping:
    return map_repo(project, toolchain)


@task(name="run-suite", task_run_name="run suite of {project.name}", cache_policy=NO_CACHE)
def run_suite(
    project: Path,
    toolchain: ToolchainName,
    runner: CommandRunner,
    spec_timeout_s: float,
    python: str | None = None,
) -> tuple[SuiteResult, dict[str, str]]:
    """The suite with coverage, robust to bad specs.

    Specs that cannot load are set aside and the rest re-run. When the run was stopped outright
    (timeout, memory or process limit), each spec runs alone to find the culprits, which are set
    aside with their reason: one hostile spec never hides every other file's results.
    """
    chain = get_toolchain(toolchain, python)
    suite = chain.run_suite(project, runner)
    broken: dict[str, str] = {}
    if suite.validation.reason:
        log = get_run_logger()
        log.warning("suite run stopped (%s): running each spec alone", suite.validation.reason)
        broken = isolate_culprits(
            lambda spec: chain.run_specs(project, [spec], None, runner, timeout_s=spec_timeout_s),
            list_specs(project, toolchain),
        )
    else:
        broken = dict.fromkeys(specs_failing_to_load(suite.validation), "did not load")
    if broken:
        suite = chain.run_suite(project, runner, exclude=sorted(broken))
    return suite, broken


@task(name="lint-specs", task_run_name="lint specs of {project.name}", cache_policy=NO_CACHE)
def lint_specs(
    project: Path, toolchain: str, specs: list[str], runner: CommandRunner
) -> list[LintOffense]:
    if not specs:
        return []
    return get_toolchain(toolchain).lint(project, specs, False, runner)


@task(name="check-specs", task_run_name="static rubric of {project.name}", cache_policy=NO_CACHE)
def check_specs(project: Path, specs: list[str]) -> dict[str, StaticVerdict]:
    return {spec: check_file(project, spec) for spec in specs}


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
    path = Path(repo).resolve()
    settings = load_settings(path)
    root, sub = subdir_in_repo(path)
    commit = resolve_commit(root, ref)
    with worktree(root, commit) as wt:
        project = wt / sub if sub else wt
        mapping = map_sources(project, settings.toolchain)
        runner = make_runner(settings.sandbox, root=wt)
        suite, broken = run_suite(
            project, mapping.toolchain, runner, settings.sandbox.spec_timeout_s, settings.python
        )
        specs = sorted({s for f in mapping.files for s in f.specs} | set(broken))
        lint = lint_specs(project, mapping.toolchain, specs, runner)
        static = check_specs(project, specs)
    report = build_report(
        repo=str(path),
        commit=commit,
        mapping=mapping,
        suite=suite.validation,
        coverage=suite.files,
        broken_specs=broken,
        lint=lint,
        static=static,
    )
    key = artifact_key("audit", path.name)
    create_table_artifact(table_rows(report), key=key, description=f"Audit of {path.name}")
    create_markdown_artifact(markdown_summary(report), key=f"{key}-summary")
    return report
