"""The one interface a stack implements (:class:`Toolchain`), its per-repository file rules
(:class:`FileRules`), and the command runner it runs its tools through.

A toolchain never starts a process itself: it builds argv lists and hands them to a
:class:`CommandRunner` (the sandbox from ``tasks.sandbox.make.make_runner`` in production), so
the same code runs inside bwrap, Docker or a plain subprocess. Everything a part needs to know
about a stack is asked here: which files are sources (and of which kind), tests and shared
support; where a new test goes; how to run tests with coverage, lint with autocorrect, read a
failed run's cause; the static rubric's parser; the prompt context; the syntax of a patched
file; the mutations of a covered line. Adding a stack: see ``tasks/toolchains/registry.py``.
"""

# size: the interface is one class on purpose: every method a stack implements (or inherits),
# documented in one place a newcomer reads to add a stack.
from __future__ import annotations

import hashlib
import shlex
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.errors import AutopilotError
from tasks.core.resources import resource_path
from tasks.core.secrets import redact, redact_validation
from tasks.core.types import (
    CommandResult,
    FileCoverage,
    Finding,
    LintOffense,
    SuiteProblem,
    ValidationResult,
)
from tasks.facts.evidence import tested_by
from tasks.toolchains.files import FileRules

if TYPE_CHECKING:
    from tasks.core.config import Settings
    from tasks.core.run_context import PreparedLike
    from tasks.envs.builder import EnvBuilder
    from tasks.toolchains.mutants import Mutation

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
    body_lines_run: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="source -> test file -> lines of its function bodies that file ran "
        "(suite runs with contexts only)",
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
    errors: list[str] = Field(
        default_factory=list,
        description="Tools of the run that failed (the coverage report), one line each",
    )

    @property
    def ran(self) -> bool:
        """The suite got to its tests (a failing test still counts as a run)."""
        return self.validation.loaded and self.validation.reason is None

    def set_evidence(self, runs: dict[str, dict[str, int]]) -> None:
        """Record which test file ran how many function-body lines of which source
        (:func:`tasks.facts.evidence.body_lines_run`), and ``tested_by`` from it."""
        self.body_lines_run = runs
        self.tested_by = tested_by(runs)


class Toolchain(ABC):
    """One stack: its files, its test runs with coverage, its linter, its static rubric, the
    prompt context it gathers, the syntax of its files.

    Subclasses set the class attributes and implement the abstract methods; the registry
    (``tasks/toolchains/registry.py``) names them.
    """

    #: The registry name (``ruby-rspec``): configuration, reports, cache keys.
    name: ClassVar[str]
    #: The language its tests are written in (prompts, code fences, calibration cases).
    language: ClassVar[str]
    #: The test runner, as a problem names it (``rspec``, ``pytest``).
    test_tool: ClassVar[str]
    #: The kinds of source files it maps; each has exactly one skill (skills/).
    kinds: ClassVar[tuple[str, ...]]
    #: What detection looks for, in words (for the error when nothing matches).
    detection: ClassVar[str]
    #: Project files that change how tests run, are measured or linted (repository-relative).
    config_files: ClassVar[tuple[str, ...]] = ()
    #: The package directory of its resources (``tasks/toolchains/ruby/resources``).
    resource_dir: ClassVar[str] = ""
    #: Files of `resource_dir` it brings into every run.
    resources: ClassVar[tuple[str, ...]] = ()
    #: Directories its tools leave anywhere in a tree (caches: never sources, never copied).
    cache_dirs: ClassVar[tuple[str, ...]] = ()
    #: Directories of installed environments anywhere in a tree (never sources).
    env_dirs: ClassVar[tuple[str, ...]] = ()
    #: What its runs write at the project's top level (logs, coverage output): never sources,
    #: never copied into a target's private copy.
    output_paths: ClassVar[tuple[str, ...]] = ()
    #: Globs of its dependency manifests and lock files (a patch to them needs a person).
    manifests: ClassVar[tuple[str, ...]] = ()
    #: Globs of its database migrations and schema (a patch to them needs a person).
    migrations: ClassVar[tuple[str, ...]] = ()
    #: Regular expressions, on a test file's changed lines: an assertion, a disabled test, and
    #: (on a diagnosis and failure) a mock of its test framework; a repair patch that removes
    #: assertions, skips a test, or edits production code where a mock is involved needs a
    #: person.
    assertion_words: ClassVar[str] = r"\bassert\w*\b"
    skip_words: ClassVar[str] = r"\bskip\b"
    mock_words: ClassVar[str] = r"\bmock"
    #: Whether :meth:`run_repeats` runs every repeat in one process (the framework starts
    #: once): the nightly then takes the flakiness re-runs with each round's run.
    repeats_in_one_process: ClassVar[bool] = False

    def __init__(self, prepare: tuple[str, ...] | list[str] = (), home: Path | None = None):
        #: Commands (``autopilot.toml``'s ``prepare``) run once in a worktree before its tests.
        self.prepare = tuple(prepare)
        #: ``AUTOPILOT_HOME``: where prepared environments live (None: the settings').
        self.home = home

    @classmethod
    def from_settings(cls, settings: Settings) -> Toolchain:
        """The toolchain as the settings configure it (prepare commands, home, and whatever
        the stack reads: an interpreter, an environment)."""
        return cls(prepare=settings.prepare, home=settings.home)

    def sandbox_dirs(self, repo: Path) -> list[str]:
        """Host directories its runs in `repo` need, shown read-only by the sandbox besides the
        worktree (tools installed outside it); every ``make_runner`` of a run passes them as
        ``toolchain_dirs``. An interpreter given as an absolute ``argv[0]`` needs none: the
        runner shows its installation on its own."""
        del repo
        return []

    # --- the repository -------------------------------------------------------------------

    @classmethod
    @abstractmethod
    def detect(cls, repo: Path) -> bool:
        """Whether `repo` uses this stack (the registry asks the stacks in its order)."""

    @abstractmethod
    def file_rules(self, repo: Path) -> FileRules:
        """The stack's file rules in `repo`."""

    # --- running tests --------------------------------------------------------------------

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
            data = self.resource(name).read_bytes()
            digest.update(f"\0resource:{name}\0{len(data)}\0".encode() + data)
        return digest.hexdigest()

    def resource(self, name: str) -> Path:
        """The stack's resource file `name` (from the checkout or the installed wheel)."""
        return resource_path(f"{self.resource_dir}/{name}")

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

    def run_repeats(
        self,
        repo: Path,
        specs: list[str],
        target: str | None,
        runner: CommandRunner,
        *,
        runs: int,
        coverage: bool = False,
        timeout_s: float | None = None,
        reverse_alternate: bool = False,
    ) -> list[ValidationResult]:
        """`runs` runs of the same test files, one result each (as :meth:`run_specs` gives):
        the first measures `target`'s coverage when `coverage`; the runs end after the first
        that does not pass; with `reverse_alternate` every second run goes in the reverse
        order. This default starts one process per run (the files listed reversed); a stack
        whose framework can repeat in one process overrides it (and sets
        `repeats_in_one_process`)."""
        results: list[ValidationResult] = []
        for i in range(runs):
            listed = list(reversed(specs)) if reverse_alternate and i % 2 else specs
            result = self.run_specs(
                repo, listed, target, runner, timeout_s=timeout_s, coverage=coverage and i == 0
            )
            results.append(result)
            if not result.passed:
                break
        return results

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
        from tasks.toolchains.runs import scratch_base, shorten_middle

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

    def env_builder(self) -> EnvBuilder | None:
        """How this stack's prepared environment is built (cache level 2), or None."""
        return None

    def using_env(self, env: PreparedLike) -> Toolchain:
        """This toolchain running its tests with the prepared `env` (its interpreter)."""
        return self

    def schema_command(self, project: Path) -> tuple[list[str], dict[str, str]] | None:
        """The project's conventional database schema command and its variables, or None."""
        return None

    @abstractmethod
    def load_error_files(self, text: str) -> list[str]:
        """The test files a failed run's output names as not loading (in order)."""

    @abstractmethod
    def load_problem(self, text: str, project: Path) -> SuiteProblem:
        """The problem in one test file's load error, as the test runner printed it."""

    # --- lint -----------------------------------------------------------------------------

    @abstractmethod
    def lint(
        self, repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
    ) -> list[LintOffense]:
        """Lint `files` (repository-relative), fixing what can be fixed when `autocorrect`.

        Returns the offences that remain. Raises ToolchainError when the linter itself fails.
        """

    def lint_blocked_by(self, problem: SuiteProblem) -> bool:
        """Whether a suite that did not run for `problem` keeps the linter from running too
        (it runs through the same environment); lint is then skipped, not failed again."""
        del problem
        return False

    # --- the static rubric ------------------------------------------------------------------

    @abstractmethod
    def rubric_findings(self, path: str, text: str) -> tuple[list[Finding], int]:
        """The static rubric's findings in one test file and its number of examples (the rule
        ids and weights are judge/static.py's; the parser is the stack's)."""

    def support_findings(self, path: str, text: str) -> list[Finding]:
        """The static rubric's findings in a support file a reply writes beside its tests (a
        factory, a conftest, a setup file, the framework's configuration): the rules about how
        results are reported and which tests run (``result-hook``, ``hidden-tests``); [] for a
        file the stack does not read."""
        del path, text
        return []

    def canary_test(self, repo: Path, path: str, text: str, token: str) -> str | None:
        """The test file `text` (at `path`) with one more test that must fail, whose name holds
        `token`: run beside a new support file, it proves that a failure is still reported as
        one. None when the stack has no canary (the check is then skipped)."""
        del repo, path, text, token
        return None

    # --- the prompt context -----------------------------------------------------------------

    def context_paths(self, project: Path, source: str, kind: str, source_text: str) -> list[str]:
        """Repository files a model needs to test `source`, most useful first (the generic
        context, bounded and secret-filtered, reads them)."""
        del project, source, kind, source_text
        return []

    def versions(self, project: Path) -> dict[str, str]:
        """The versions that decide which APIs a test may use (language, framework)."""
        del project
        return {}

    # --- any file of its language (whatever stack the project uses) -------------------------

    def syntax_check(self, path: str) -> list[str] | None:
        """The command that checks the syntax of the repository file `path` (run in its
        project directory, in the sandbox), or None when it is not a file of this language."""
        del path
        return None

    def speaks(self, path: str) -> bool:
        """Whether `path` is a file of its language (its parsers and checks read it)."""
        return self.syntax_check(path) is not None

    def body_lines(self, path: str, text: str) -> set[int] | None:
        """Lines inside function bodies of a source of this language (what counts as a test
        having exercised it), or None when `path` is not one."""
        del path, text
        return None

    def mutations(self, path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
        """Small mutations of the given lines of a source (``autopilot eval``'s regressions)."""
        del path, text, lines
        return iter(())

    def no_cover_lines(self, text: str) -> set[int]:
        """Lines the project marks as reachable by no test (``# pragma: no cover``,
        ``:nocov:``): the file's own coverage ceiling."""
        del text
        return set()

    def mutant_ok(self, text: str) -> bool:
        """Whether a mutated source still parses (checked when a mutation is chosen)."""
        del text
        return True

    def file_of_case(self, classname: str, project: Path) -> str | None:
        """The test file of a reported case that names only its class, or None."""
        del classname, project
        return None
