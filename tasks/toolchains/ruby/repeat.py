"""RSpec's repeats in one process: the spec files run several times after one boot.

The runner (``resources/autopilot_rspec_repeat.rb``) loads RSpec and the application once, runs
the spec files, resets RSpec's world and runs them again; each run writes its own JSON report,
read back here exactly as a separate run's (:func:`~tasks.toolchains.ruby.run.parse_rspec_run`),
so the flakiness evidence stays per run. The first run is measured by our SimpleCov helper when
asked (coverage is the process's: the repeats run the same examples).
"""

from __future__ import annotations

from pathlib import Path

from tasks.core.secrets import redact_validation
from tasks.core.types import ValidationResult
from tasks.toolchains.base import CommandRunner, Toolchain, ToolchainError
from tasks.toolchains.ruby.run import parse_rspec_run, resultset_coverage, run_env, uses_bundler
from tasks.toolchains.runs import (
    copy_resource,
    not_run,
    remove_scratch,
    scratch_dir,
    split_repeats,
)

REPEAT_NAME = "autopilot_rspec_repeat.rb"


def run_repeats(
    chain: Toolchain,
    repo: Path,
    specs: list[str],
    target: str | None,
    runner: CommandRunner,
    *,
    runs: int,
    coverage: bool = False,
    timeout_s: float | None = None,
) -> list[ValidationResult]:
    """`runs` runs of `specs` in one Ruby process (see :meth:`Toolchain.run_repeats`)."""
    repo = repo.resolve()
    run_dir = scratch_dir(repo)
    try:
        script = copy_resource(chain.resource(REPEAT_NAME), run_dir)
        env = run_env(chain, repo, run_dir, target, coverage=coverage)
        env |= {"AUTOPILOT_REPEATS": str(max(1, runs)), "AUTOPILOT_REPEAT_DIR": str(run_dir)}
        try:
            chain.prepare_worktree(repo, runner, {"RAILS_ENV": "test"})
        except ToolchainError as exc:
            return [not_run(chain.name, specs, target, "prepare", str(exc)).validation]
        ruby = ["bundle", "exec", "ruby"] if uses_bundler(repo, "rspec") else ["ruby"]
        cmd = runner.run([*ruby, str(script), *specs], cwd=repo, env=env, timeout_s=timeout_s)
        results: list[ValidationResult] = []
        for index, each in enumerate(split_repeats(cmd, run_dir, max(1, runs)), start=1):
            result = parse_rspec_run(repo, run_dir / f"rspec-{index}.json", each)
            result.specs, result.target = list(specs), target
            results.append(result)
        if coverage and target is not None and results[0].loaded:
            results[0].coverage = resultset_coverage(repo, run_dir).get(target)
        return [redact_validation(r) for r in results]
    finally:
        remove_scratch(run_dir)
