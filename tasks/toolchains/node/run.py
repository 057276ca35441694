"""Run Jest with coverage through a command runner (the sandbox) and read its results.

One run writes everything into a fresh scratch directory of the worktree (``.autopilot-tmp/
<id>``: the generated configuration, ``jest.json``, ``junit.xml``, ``coverage/
coverage-final.json``), which is removed afterwards (copied to `reports_dir` first when asked).
A suite run with `contexts` also loads ``resources/autopilot_jest_contexts.cjs`` as a reporter,
which writes the source lines each test file ran (``contexts.json``): the evidence that maps
test files to sources whatever their names, as the other stacks' suite runs record it.
Jest's transform cache lives in ``.autopilot-tmp/jest-cache`` so the re-runs of one worktree
(flakiness, the fix loop) do not compile TypeScript again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from tasks.core.errors import CoverageError
from tasks.core.resources import resource_path
from tasks.core.types import FileCoverage, SuiteProblem
from tasks.facts.evidence import body_lines_run
from tasks.toolchains.base import CommandRunner, SuiteResult, ToolchainError
from tasks.toolchains.node.coverage import parse_istanbul
from tasks.toolchains.node.jest import (
    IN_BAND_FILES,
    default_config,
    jest_argv,
    jest_env,
    node_flags,
    project_config,
)
from tasks.toolchains.node.layout import NodeMapping, is_code, map_files
from tasks.toolchains.node.results import node_validation, parse_jest_run
from tasks.toolchains.node.syntax import body_lines
from tasks.toolchains.node.tools import NodeTools
from tasks.toolchains.runs import (
    copy_resource,
    keep_reports,
    load_contexts,
    remove_scratch,
    scratch_base,
    scratch_dir,
)

log = logging.getLogger(__name__)

#: The reporter that writes which test file ran which source lines (``resources/``).
CONTEXTS = "autopilot_jest_contexts.cjs"


def map_project(repo: Path, files: Sequence[str] | None = None) -> NodeMapping:
    """The mapping of a project (see :mod:`tasks.toolchains.node.layout`), kinds read from
    the sources' text; `files` defaults to ``git ls-files`` (or a directory walk)."""
    if files is None:
        from tasks.toolchains.mapping import list_files

        files = list_files(repo)
    return map_files(files, lambda rel: _read_text(repo / rel))


def _read_text(path: Path, limit: int = 1_000_000) -> str | None:
    try:
        if path.stat().st_size > limit:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def coverage_sources(repo: Path, files: Sequence[str] | None = None) -> list[str]:
    """The sources whose coverage a suite run measures: the mapping's."""
    return [m.source for m in map_project(repo, files).files]


def run_jest(
    repo: Path,
    specs: list[str],
    target: str | None,
    runner: CommandRunner,
    tools: NodeTools,
    *,
    timeout_s: float | None = None,
    reports_dir: Path | None = None,
    exclude: list[str] | None = None,
    coverage: bool = True,
    sources: Sequence[str] | None = None,
    contexts: bool = False,
) -> SuiteResult:
    """Run test files (or the suite) under Jest with coverage and a jest-junit report.

    Args:
        repo: the worktree; the run writes only under it.
        specs: repository-relative test files; empty runs the whole suite.
        target: the source whose coverage the result carries, or None.
        runner: how commands run (a sandbox showing ``tools.sandbox_dirs()``).
        tools: node and the tools (see :func:`tasks.toolchains.node.tools.resolve_tools`).
        timeout_s: wall-clock limit of the Jest command.
        reports_dir: when given, the raw reports are copied there.
        exclude: test files left out of a suite run (ones that do not load).
        coverage: False runs without measuring coverage (the flakiness re-runs).
        sources: what coverage measures in a suite run (default: the mapping's sources);
            a run with a `target` measures the target only.
        contexts: also record which test file ran which source lines (a suite run with
            coverage), as the suite's evidence.

    Returns:
        The suite result: the validation (not loaded, with the real message per file, when a
        suite failed to run), coverage per source, and the files that did not load.
    """
    repo = repo.resolve()
    run_dir = scratch_dir(repo)
    cache_dir = scratch_base(repo) / "jest-cache"
    try:
        own = project_setup(repo, tools)
        measured, in_band = _plan(repo, specs, target, sources)
        config_file: Path | None = None
        if own is None:
            config_file = _write_config(repo, default_config(repo, tools, measured, cache_dir))
        env = jest_env(tools, run_dir)
        reporters = _contexts_reporter(run_dir, env) if contexts and coverage else []
        argv = jest_argv(
            tools,
            run_dir,
            config=config_file,
            specs=specs,
            exclude=exclude or [],
            coverage=coverage,
            coverage_from=[target] if target else [],
            cache_dir=cache_dir,
            in_band=in_band,
            node_options=node_flags(repo) if own is not None else (),
            reporters=reporters,
        )
        cmd = runner.run(argv, cwd=repo, env=env, timeout_s=timeout_s)
        result, load_errors = parse_jest_run(repo, run_dir, cmd)
        result.specs = list(specs)
        result.target = target
        suite = SuiteResult(validation=result, load_errors=load_errors)
        if own is not None:
            suite.prepared.append(f"jest configuration: {own}")
        if coverage:
            suite.files = _coverage(repo, run_dir / "coverage" / "coverage-final.json")
        if (run_dir / "contexts.json").is_file():
            found = load_contexts(run_dir / "contexts.json", repo)
            suite.set_evidence(body_lines_run(found, repo, _body_lines))
        if target is not None:
            result.coverage = suite.files.get(target) if coverage else None
        if reports_dir is not None:
            keep_reports(run_dir, reports_dir, ("jest-cache", ".jest-cache", CONTEXTS))
        return suite
    finally:
        remove_scratch(run_dir)


def project_setup(repo: Path, tools: NodeTools) -> str | None:
    """How the project itself runs Jest, or None when Autopilot's generated configuration must
    (no configuration and no Jest of its own): the project's configuration file, else Jest's
    defaults when its node_modules holds Jest (what ``npx jest`` does there: babel-jest, Jest's
    own ``testMatch``, an older Jest's API that Autopilot's ts-jest would not fit)."""
    own = project_config(repo)
    if own is not None:
        return f"the project's {own}"
    if not tools.own("jest"):
        return None
    version = _read_text(tools.package("jest") / "package.json") or "{}"
    try:
        found = json.loads(version).get("version", "?")
    except ValueError:
        found = "?"
    return f"Jest's defaults (the project's Jest {found}, no configuration of its own)"


def _plan(
    repo: Path, specs: list[str], target: str | None, sources: Sequence[str] | None
) -> tuple[list[str], bool]:
    """What the run measures, and whether it runs in band (see :data:`IN_BAND_FILES`)."""
    needs_map = not specs or (target is None and sources is None)
    mapping = map_project(repo) if needs_map else None
    if target:
        measured = [target]
    elif sources is not None:
        measured = list(sources)
    else:
        measured = [m.source for m in mapping.files] if mapping else []
    in_band = bool(specs) or (mapping is not None and len(mapping.tests) <= IN_BAND_FILES)
    return measured, in_band


def _write_config(repo: Path, config: dict[str, object]) -> Path:
    """The generated configuration at a path named by its content: Jest keys its caches on
    the configuration file's path, so one path per configuration keeps them warm."""
    text = json.dumps(config, indent=1, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = scratch_base(repo) / f"jest.config.{digest}.json"
    if not path.is_file():
        path.write_text(text, encoding="utf-8")
    return path


def _coverage(repo: Path, path: Path) -> dict[str, FileCoverage]:
    if not path.is_file():
        return {}
    try:
        return parse_istanbul(path, repo)
    except CoverageError as exc:
        log.warning("coverage of %s unusable: %s", repo, exc)
        return {}


def _contexts_reporter(run_dir: Path, env: dict[str, str]) -> list[str]:
    """The contexts reporter, copied into the run's scratch directory, writing there."""
    source = resource_path(f"tasks/toolchains/node/resources/{CONTEXTS}")
    env["AUTOPILOT_CONTEXTS_FILE"] = str(run_dir / "contexts.json")
    return [str(copy_resource(source, run_dir))]


def _body_lines(path: str, text: str) -> set[int] | None:
    return body_lines(path, text) if is_code(path) else None


def not_started(specs: list[str], target: str | None, error: ToolchainError) -> SuiteResult:
    """A run that never started (no node, no tools installed): not loaded, the environment's
    problem, with the one-line reason."""
    message = str(error)
    problem = SuiteProblem(tool="jest", cause="environment", message=message)
    result = node_validation(
        loaded=False, load_error=message, specs=list(specs), target=target, problem=problem
    )
    return SuiteResult(validation=result)
