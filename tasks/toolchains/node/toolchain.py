"""node-jest as a :class:`~tasks.toolchains.base.Toolchain` of today's base class: the adapter
the toolchain interface registers (``get_toolchain("node-jest")`` once ``ToolchainName`` lists
it). Runs and lint go through the plain functions of this package; results are redacted by the
base class like every other stack's.

The caller's runner must show :meth:`NodeJestToolchain.sandbox_dirs` read-only (today's base
class has no such hook: the Python toolchain's interpreter is added by the runner from
``argv[0]``, which does not cover Node's tools, so the interface needs one).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tasks.core.types import Finding, LintOffense, SuiteProblem
from tasks.toolchains.base import (
    CommandRunner,
    SuiteResult,
    Toolchain,
    ToolchainError,
)
from tasks.toolchains.files import FileRules
from tasks.toolchains.node.jest import BABEL_CONFIGS, CONFIG_FILES
from tasks.toolchains.node.lint import FLAT_CONFIGS, LEGACY_CONFIGS
from tasks.toolchains.node.lint import lint as eslint
from tasks.toolchains.node.run import not_started, run_jest
from tasks.toolchains.node.tools import NodeTools, default_tools_dir, resolve_tools


class NodeJestToolchain(Toolchain):
    """node-jest: Jest (ts-jest, jest-junit, istanbul JSON coverage) and ESLint."""

    name = "node-jest"
    config_files = (
        "package.json",
        "package-lock.json",
        "tsconfig.json",
        *CONFIG_FILES,
        *BABEL_CONFIGS,
        *FLAT_CONFIGS,
        *LEGACY_CONFIGS,
    )

    def __init__(
        self,
        node_modules: str | None = None,
        prepare: tuple[str, ...] = (),
        tools_home: Path | None = None,
    ) -> None:
        """`node_modules`: the project's, relative to the repository (None: ``node_modules``
        when it exists); `tools_home`: Autopilot's tool install (None: the default)."""
        self.node_modules = node_modules
        self.prepare = tuple(prepare)
        self.tools_home = tools_home

    # Not yet behind the interface (issue 18's integration wires these; the registry does not
    # list node-jest until then): each says so rather than pretending.
    @classmethod
    def detect(cls, repo: Path) -> bool:
        """Not wired yet."""
        raise NotImplementedError("node-jest: detection is not wired into the interface yet")

    def file_rules(self, repo: Path) -> FileRules:
        """Not wired yet."""
        raise NotImplementedError("node-jest: file rules are not wired into the interface yet")

    def load_error_files(self, text: str) -> list[str]:
        """Not wired yet."""
        raise NotImplementedError("node-jest: load errors are not wired into the interface yet")

    def load_problem(self, text: str, project: Path) -> SuiteProblem:
        """Not wired yet."""
        raise NotImplementedError("node-jest: load problems are not wired into the interface yet")

    def rubric_findings(self, path: str, text: str) -> tuple[list[Finding], int]:
        """Not wired yet."""
        raise NotImplementedError("node-jest: the rubric is not wired into the interface yet")

    def tools(self, repo: Path) -> NodeTools:
        """The tools of a run in `repo` (raises ToolchainError when they are missing)."""
        return resolve_tools(repo, declared=self.node_modules, home=self.tools_home)

    def sandbox_dirs(self, repo: Path) -> list[str]:
        """What a runner over `repo` must show read-only for this toolchain ([] when the
        tools are missing: the run then reports why)."""
        try:
            return self.tools(repo).sandbox_dirs()
        except ToolchainError:
            return []

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
        """:func:`~tasks.toolchains.node.run.run_jest`, after the project's ``prepare``
        commands; `contexts` is not supported by Jest (no per-test coverage) and ignored."""
        try:
            tools = self.tools(repo)
            env = {"NODE_PATH": tools.node_path()}
            prepared = self.prepare_worktree(repo.resolve(), runner, env)
        except ToolchainError as exc:
            return not_started(specs, target, exc)
        suite = run_jest(
            repo,
            specs,
            target,
            runner,
            tools,
            timeout_s=timeout_s,
            reports_dir=reports_dir,
            exclude=exclude,
            coverage=coverage,
        )
        suite.prepared = [*prepared, *suite.prepared]
        return suite

    def lint(
        self, repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
    ) -> list[LintOffense]:
        """ESLint (see :mod:`tasks.toolchains.node.lint`)."""
        return eslint(repo, files, autocorrect, runner, self.tools(repo))

    def config_digest(self, repo: Path) -> str:
        """The base digest plus the tools' lock and the declared node_modules: other tool
        versions or other dependencies are another validation."""
        lock = (self.tools_home or default_tools_dir()) / "package-lock.json"
        data = lock.read_bytes() if lock.is_file() else b"(no tools installed)"
        digest = hashlib.sha256(super().config_digest(repo).encode())
        digest.update(b"\0lock\0" + data)
        digest.update(f"\0node_modules\0{self.node_modules or '(default)'}".encode())
        return digest.hexdigest()
