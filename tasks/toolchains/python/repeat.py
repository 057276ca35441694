"""pytest's repeats in one process: several sessions after one interpreter start.

The runner (``resources/autopilot_pytest_repeat.py``) calls ``pytest.main`` once per run in the
same interpreter (under ``coverage run`` when measuring), each session with its own JUnit XML
report and Autopilot plugin status, read back here exactly as a separate run's
(:func:`~tasks.toolchains.python.results.parse_run`), so the flakiness evidence stays per run.
The first run's result carries the coverage (the process's: the repeats run the same tests).
"""

from __future__ import annotations

from pathlib import Path

from tasks.core.secrets import redact_validation
from tasks.core.types import ValidationResult
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain, ToolchainError
from tasks.toolchains.python.env import isolated_python
from tasks.toolchains.python.project import package_roots, project_packages, write_version_files
from tasks.toolchains.python.results import parse_run
from tasks.toolchains.python.run import (
    PLUGIN,
    default_home,
    environment,
    measure,
    pytest_argv,
    read_status,
    select_files,
)
from tasks.toolchains.runs import (
    copy_resource,
    not_run,
    remove_scratch,
    scratch_dir,
    split_repeats,
)

REPEAT_NAME = "autopilot_pytest_repeat.py"


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
    reverse_alternate: bool = False,
    python: str | None = None,
    home: Path | None = None,
) -> list[ValidationResult]:
    """`runs` runs of `specs` in one Python process (see :meth:`Toolchain.run_repeats`);
    `python` and `home` as for :func:`tasks.toolchains.python.run.run_tests`."""
    repo = repo.resolve()
    own = python is None
    py = str(isolated_python(home or default_home())) if own else str(python)
    write_version_files(repo)
    roots = package_roots(repo)
    packages = project_packages(repo, roots)
    runs = max(1, runs)
    run_dir = scratch_dir(repo)
    try:
        copy_resource(chain.resource(PLUGIN), run_dir)
        copy_resource(chain.resource(REPEAT_NAME), run_dir)
        env = environment(repo, run_dir, roots, packages, run_dir / "status-1.json", own=own)
        env |= {"AUTOPILOT_REPEATS": str(runs), "AUTOPILOT_REPEAT_DIR": str(run_dir)}
        if reverse_alternate:
            env["AUTOPILOT_REVERSE_ALTERNATE"] = "1"
        try:
            chain.prepare_worktree(repo, runner, env)
        except ToolchainError as exc:
            return [not_run(chain.name, specs, target, "prepare", str(exc)).validation]
        module = REPEAT_NAME.removesuffix(".py")
        args, selected = select_files(repo, run_dir, specs)
        env |= selected
        argv = pytest_argv(repo, py, run_dir, None, args, None, coverage=coverage, module=module)
        cmd = runner.run(argv, cwd=repo, env=env, timeout_s=timeout_s)
        label = py if not own else "Autopilot's isolated interpreter (no project dependencies)"
        results: list[ValidationResult] = []
        for index, each in enumerate(split_repeats(cmd, run_dir, runs), start=1):
            status = read_status(run_dir / f"status-{index}.json")
            xml_out = run_dir / f"junit-{index}.xml"
            result, _ = parse_run(
                repo, xml_out, each, status=status, packages=packages, python=label
            )
            result.specs, result.target = list(specs), target
            results.append(result)
        first = results[0]
        if coverage and (first.loaded or first.examples):
            suite = SuiteResult(validation=first)
            measure(chain, repo, runner, py, env, run_dir, suite, contexts=False, target=target)
            first.coverage = suite.files.get(target) if target is not None else None
        return [redact_validation(r) for r in results]
    finally:
        remove_scratch(run_dir)
