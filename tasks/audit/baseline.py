"""The whole suite, run robustly for a baseline (audit, nightly, repair), and plainly reported
when it did not run.

One test file that cannot load must not hide every other file's results: files named in a load
error are set aside and the rest re-run; a run stopped outright (timeout, memory or process
limit) runs each test file alone to find the culprits. What remains is either a suite that ran
(failing tests included) or a suite that did not run, with the
:class:`~tasks.core.types.SuiteProblem` that stopped it: never a pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from tasks.core.types import SuiteProblem, ValidationResult
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain
from tasks.toolchains.mapping import list_specs
from tasks.toolchains.runs import relative_path

log = logging.getLogger(__name__)


def specs_failing_to_load(
    chain: Toolchain, result: ValidationResult, repo: Path | None = None
) -> list[str]:
    """Spec files named in a load error (the ones to set aside before running the rest),
    relative to `repo` when the error names them by absolute path."""
    if result.loaded or not result.load_error:
        return []
    seen: dict[str, None] = {}
    for path in chain.load_error_files(result.load_error):
        seen[relative_path(path, repo) if repo is not None else path] = None
    return [p for p in seen if not p.startswith("/")]


def isolate_culprits(
    run_one: Callable[[str], ValidationResult], specs: list[str]
) -> dict[str, str]:
    """Run each spec file alone and name the ones that cannot run: spec -> reason.

    Used when a whole-suite run was stopped (timeout, memory or process limit): one hostile or
    hanging spec must not hide every other file's results.
    """
    culprits: dict[str, str] = {}
    for spec in specs:
        result = run_one(spec)
        if result.reason:
            culprits[spec] = result.reason
        elif not result.loaded:
            culprits[spec] = "did not load"
    return culprits


def run_baseline(
    project: Path,
    chain: Toolchain,
    runner: CommandRunner,
    *,
    spec_timeout_s: float,
    contexts: bool = True,
) -> SuiteResult:
    """The suite with coverage (and, with `contexts`, which test ran which source), robust to
    bad test files; ``ran`` is False with ``validation.problem`` set when it did not run.

    Args:
        project: the project directory in a worktree.
        chain: the toolchain (interpreter, prepare commands).
        runner: the sandbox.
        spec_timeout_s: the limit for one test file run alone (finding a hanging one).
        contexts: record per-test-file line evidence.
    """
    suite = chain.run_suite(project, runner, contexts=contexts)
    prepared = list(suite.prepared)
    first = suite.validation
    broken: dict[str, str] = {}
    if first.reason:
        log.warning("suite run stopped (%s): running each test file alone", first.reason)
        broken = isolate_culprits(
            lambda spec: chain.run_specs(project, [spec], None, runner, timeout_s=spec_timeout_s),
            list_specs(project, chain.name),
        )
    elif not first.loaded:
        named = list(suite.load_errors) or specs_failing_to_load(chain, first, project)
        # Without a per-file message, a single culprit's is the run's own.
        alone = first.load_error if len(named) == 1 else None
        broken = {f: _why(chain, suite.load_errors.get(f) or alone, project) for f in named}
    load_errors = dict(suite.load_errors)
    if broken:
        suite = chain.run_suite(project, runner, exclude=sorted(broken), contexts=contexts)
        prepared += [note for note in suite.prepared if note not in prepared]
        load_errors |= suite.load_errors
    suite.broken, suite.prepared, suite.load_errors = broken, prepared, load_errors
    specs = list_specs(project, chain.name)
    v = suite.validation
    environment = v.problem is not None and v.problem.cause == "environment"
    if broken and not v.examples and set(specs) <= set(broken) and not environment:
        # Every test file was set aside: nothing ran, for the reason the first run gave (not
        # the re-run's, which only says it found no test: Jest's "No tests found"); a re-run
        # that found the environment at fault (a package imported from outside) says that.
        _not_run(v, _every_file(chain, first.problem), first.load_error)
    elif v.loaded and v.reason is None and not v.examples and specs:
        _not_run(
            v,
            _problem(
                chain,
                f"ran no test from {len(specs)} test files",
                "check the test paths and file patterns of the project's configuration",
            ),
            None,
        )
    elif not suite.ran and v.problem is None:
        v.problem = _problem(chain, v.reason or (v.load_error or "did not run").splitlines()[0])
    if suite.ran:
        log.info(
            "the suite ran: %d tests, %d test files set aside, %d sources measured",
            len(v.examples),
            len(broken),
            len(suite.files),
        )
    else:
        problem = v.problem.one_line() if v.problem else "unknown cause"
        log.info("the suite did not run: %s", problem)
    return suite


def _why(chain: Toolchain, text: str | None, project: Path) -> str:
    """ "did not load: <the error>" for a set-aside file, in one line."""
    if not text:
        return "did not load"
    message = chain.load_problem(text, project).message
    for header in ("ERROR collecting ", "An error occurred while loading "):
        if message.startswith(header) and ": " in message:
            message = message.split(": ", 1)[1]
    return f"did not load: {message}"


def _every_file(chain: Toolchain, problem: SuiteProblem | None) -> SuiteProblem:
    """The problem of a suite none of whose test files loads, said as such."""
    if problem is None:
        return _problem(chain, "no test file loads")
    message = problem.message
    for header in ("ERROR collecting ", "An error occurred while loading ", "While loading "):
        if message.startswith(header) and ": " in message:
            message = message.split(": ", 1)[1]
    return problem.model_copy(update={"message": f"no test file loads: {message}"})


def _problem(chain: Toolchain, message: str, hint: str | None = None) -> SuiteProblem:
    return SuiteProblem(tool=chain.test_tool, cause="environment", message=message, hint=hint)


def _not_run(result: ValidationResult, problem: SuiteProblem, load_error: str | None) -> None:
    result.loaded = False
    result.problem = problem
    result.load_error = load_error or problem.one_line()
