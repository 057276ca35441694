"""What every toolchain offers, and the command runner it runs its tools through.

A toolchain never starts a process itself: it builds argv lists and hands them to a
:class:`CommandRunner` (the sandbox from ``tasks.sandbox.runners.make_runner`` in production), so
the same code runs inside bwrap, Docker or a plain subprocess.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.errors import AutopilotError
from tasks.core.resources import resource_path
from tasks.core.secrets import redact, redact_validation
from tasks.core.types import (
    CommandResult,
    FileCoverage,
    LintOffense,
    SuiteProblem,
    ToolchainName,
    ValidationResult,
)

#: Scratch space for reports inside the repository (the only place a sandbox can write).
SCRATCH_DIR = ".autopilot-tmp"
#: How much of a tool's output to keep in an error message.
MAX_ERROR_CHARS = 4000
#: RuboCop and ruff runs are bounded (the field report used 60 s for RuboCop).
LINT_TIMEOUT_S = 60.0


class ToolchainError(AutopilotError):
    """A tool (rubocop, ruff, coverage) failed in a way that yields no usable result."""


class CommandRunner(Protocol):
    """Runs one command; implemented by the sandbox backends (bwrap, docker, none)."""

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> CommandResult:
        """Run `argv` in `cwd` with extra `env`, stopping it after `timeout_s` seconds."""
        ...


class SuiteResult(BaseModel):
    """A whole-suite run: the validation result plus every source file's coverage."""

    model_config = ConfigDict(extra="forbid")

    validation: ValidationResult
    files: dict[str, FileCoverage] = Field(
        default_factory=dict, description="Coverage per repository-relative source path"
    )
    tested_by: dict[str, list[str]] = Field(
        default_factory=dict,
        description="source -> test files that ran its function bodies (suite runs with "
        "contexts only)",
    )
    prepared: list[str] = Field(
        default_factory=list,
        description="What was produced in the worktree before the run (generated files, "
        "prepare commands), one note each",
    )
    broken: dict[str, str] = Field(
        default_factory=dict, description="Test files set aside because they cannot run alone"
    )
    load_errors: dict[str, str] = Field(
        default_factory=dict, description="Test file -> the error that kept it from loading"
    )

    @property
    def ran(self) -> bool:
        """The suite got to its tests (a failing test still counts as a run)."""
        return self.validation.loaded and self.validation.reason is None


class Toolchain(ABC):
    """Runs one stack's tests with coverage, and its linter."""

    name: ToolchainName
    #: Project files that change how tests run, are measured or linted (repository-relative).
    config_files: tuple[str, ...] = ()
    #: Files of ``tasks/toolchains/resources`` the toolchain brings into every run.
    resources: tuple[str, ...] = ()
    #: Commands (``autopilot.toml``'s ``prepare``) run once in a worktree before its tests.
    prepare: tuple[str, ...] = ()

    def config_digest(self, repo: Path) -> str:
        """The sha256 of what decides a validation besides the tests and the source: the
        project's tool configuration (`config_files`) and the toolchain's own resources."""
        digest = hashlib.sha256(self.name.encode())
        for command in self.prepare:
            digest.update(f"\0prepare:{command}".encode())
        for rel in self.config_files:
            path = repo / rel
            data = path.read_bytes() if path.is_file() else b"(absent)"
            digest.update(f"\0{rel}\0{len(data)}\0".encode() + data)
        for name in self.resources:
            data = resource_path(f"tasks/toolchains/resources/{name}").read_bytes()
            digest.update(f"\0resource:{name}\0{len(data)}\0".encode() + data)
        return digest.hexdigest()

    def run_specs(
        self,
        repo: Path,
        specs: list[str],
        target: str | None,
        runner: CommandRunner,
        *,
        timeout_s: float | None = None,
        reports_dir: Path | None = None,
        coverage: bool = True,
    ) -> ValidationResult:
        """Run the given test files with coverage and report on `target`.

        Args:
            repo: repository root (a worktree); the run writes only under it.
            specs: repository-relative test files; empty means the whole suite.
            target: repository-relative source file whose coverage is reported, or None.
            runner: how commands run (a sandbox).
            timeout_s: wall-clock limit for the test command (None: the runner's default).
            reports_dir: when given, the run's raw reports are copied there (for archiving).
            coverage: False runs the tests alone, without measuring coverage (faster: the
                flakiness re-runs only need pass or fail); the result's coverage is then None.

        Returns:
            The ValidationResult; ``loaded`` is False (with the tool's error text) when a test
            file cannot be loaded, and no example then counts as passed.
        """
        result = self.run_tests(
            repo,
            specs,
            target,
            runner,
            timeout_s=timeout_s,
            reports_dir=reports_dir,
            coverage=coverage,
        ).validation
        # What the tests printed or read came out of the sandbox: redacted before it can reach
        # a prompt, a report, a log or the archive.
        return redact_validation(result)

    def run_suite(
        self,
        repo: Path,
        runner: CommandRunner,
        *,
        timeout_s: float | None = None,
        reports_dir: Path | None = None,
        exclude: list[str] | None = None,
        contexts: bool = False,
    ) -> SuiteResult:
        """Run the whole suite with coverage of every source file.

        `exclude` lists repository-relative test files to leave out (e.g. ones that do not load,
        so they cannot hide every other file's results). `contexts` also records which test
        file ran which source lines (``tested_by``), at some cost: for baselines.
        """
        suite = self.run_tests(
            repo,
            [],
            None,
            runner,
            timeout_s=timeout_s,
            reports_dir=reports_dir,
            exclude=exclude,
            contexts=contexts,
        )
        return suite.model_copy(
            update={
                "validation": redact_validation(suite.validation),
                "load_errors": {k: redact(v) for k, v in suite.load_errors.items()},
                "broken": {k: redact(v) for k, v in suite.broken.items()},
            }
        )

    @abstractmethod
    def run_tests(
        self,
        repo: Path,
        specs: list[str],
        target: str | None,
        runner: CommandRunner,
        *,
        timeout_s: float | None,
        reports_dir: Path | None,
        exclude: list[str] | None = None,
        coverage: bool = True,
        contexts: bool = False,
    ) -> SuiteResult:
        """The one test run both entry points share: the result, the coverage per file and,
        with `contexts`, which test files ran which sources."""

    def prepare_worktree(
        self, repo: Path, runner: CommandRunner, env: Mapping[str, str]
    ) -> list[str]:
        """Run the project's declared ``prepare`` commands once in this worktree.

        A marker under the scratch directory (named after the commands) makes later runs in
        the same worktree skip them. Returns one note per command run.

        Raises:
            ToolchainError: a command failed (its real message, one line).
        """
        if not self.prepare:
            return []
        key = hashlib.sha256("\0".join(self.prepare).encode()).hexdigest()[:16]
        marker = scratch_base(repo) / f"prepared-{key}"
        if marker.exists():
            return []
        notes: list[str] = []
        for command in self.prepare:
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise ToolchainError(f"prepare command {command!r}: {exc}") from None
            if not argv:
                continue
            cmd = runner.run(argv, cwd=repo, env=env)
            if cmd.reason or cmd.exit_code != 0:
                why = cmd.reason or f"exit {cmd.exit_code}"
                output = shorten_middle((cmd.stderr or cmd.stdout).strip(), 600)
                raise ToolchainError(f"prepare command {command!r} failed ({why}): {output}")
            notes.append(f"prepare: {command} (exit 0)")
        marker.write_text("\n".join(self.prepare) + "\n", encoding="utf-8")
        return notes

    @abstractmethod
    def lint(
        self, repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
    ) -> list[LintOffense]:
        """Lint `files` (repository-relative), fixing what can be fixed when `autocorrect`.

        Returns the offences that remain. Raises ToolchainError when the linter itself fails.
        """


def not_run(
    toolchain: ToolchainName, specs: list[str], target: str | None, tool: str, message: str
) -> SuiteResult:
    """A run that never started because of the environment (e.g. a prepare command failed)."""
    problem = SuiteProblem(tool=tool, cause="environment", message=message)
    result = ValidationResult(
        toolchain=toolchain,
        loaded=False,
        load_error=message,
        specs=list(specs),
        target=target,
        problem=problem,
    )
    return SuiteResult(validation=result)


def scratch_dir(repo: Path) -> Path:
    """A fresh directory for one run's reports, inside the repository but ignored by git.

    The directory holds a ``.gitignore`` of ``*`` so the reports never show in ``git status``
    nor get committed with accepted tests.
    """
    run_dir = scratch_base(repo) / uuid.uuid4().hex[:12]
    run_dir.mkdir()
    return run_dir


def scratch_base(repo: Path) -> Path:
    """``<repo>/.autopilot-tmp``, created with a ``.gitignore`` of ``*`` when missing."""
    base = repo / SCRATCH_DIR
    base.mkdir(exist_ok=True)
    ignore = base / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    return base


def copy_resource(name: str, run_dir: Path) -> Path:
    """Copy ``resources/<name>`` into `run_dir`, the one directory every sandbox sees."""
    dest = run_dir / name
    shutil.copyfile(resource_path(f"tasks/toolchains/resources/{name}"), dest)
    return dest


def keep_reports(run_dir: Path, reports_dir: Path) -> None:
    """Copy one run's reports (not the helper scripts) to `reports_dir`, keeping their names."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    for item in run_dir.iterdir():
        if item.name == ".pytest_cache":
            continue
        if item.is_dir():
            shutil.copytree(item, reports_dir / item.name, dirs_exist_ok=True)
        elif item.suffix not in (".rb", ".py"):
            shutil.copy2(item, reports_dir / item.name)


def remove_scratch(run_dir: Path) -> None:
    """Delete one run's scratch directory (best effort: a leftover is harmless)."""
    shutil.rmtree(run_dir, ignore_errors=True)


def join_messages(messages: list[str], each: int = 1500, limit: int = 2 * MAX_ERROR_CHARS) -> str:
    """Error messages joined, each cut to `each` characters, so every file named survives.

    A long message loses its middle, not an end: RSpec states the error at the start of a load
    failure, pytest at the end of a collection traceback, and the model needs both.
    """
    parts = [shorten_middle(m.strip(), each) for m in messages if m.strip()]
    return "\n".join(parts)[:limit]


def shorten_middle(text: str, limit: int) -> str:
    """`text` within `limit` characters: its first third and last two thirds around a marker."""
    if len(text) <= limit:
        return text
    marker = "\n...\n"
    keep = max(0, limit - len(marker))
    head = keep // 3
    return text[:head] + marker + text[len(text) - (keep - head) :]


def tail(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """The last `limit` characters of `text`, stripped: errors are at the end of tool output."""
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def relative_path(path: str, repo: Path) -> str:
    """`path` relative to `repo` when it lies inside it, else unchanged (POSIX form)."""
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(repo.resolve()).as_posix()
        except ValueError:
            return path
    return p.as_posix()
