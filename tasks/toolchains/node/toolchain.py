"""The node-jest toolchain: Jest (ts-jest, jest-junit, istanbul JSON coverage) and ESLint, with
the project's own ``node_modules`` (the setting, the tree's, the prepared environment's or the
checkout's: ``modules``) or Autopilot's tools.

The class answers the interface; the work is in the folder's modules: ``tools`` (node, the
tools ``make setup`` installs, the project's node_modules, what the sandbox shows), ``layout``
and ``files`` (sources, kinds, tests, support, where a test goes), ``jest`` and ``run`` (the
Jest command and its run), ``results`` and ``coverage`` (what it wrote), ``diagnose`` (why a
test file did not load), ``lint`` (ESLint), ``rubric`` (the static rubric on tree-sitter),
``context`` (imports, set-up files, versions), ``syntax`` (checks, function bodies, mutations),
``patches`` (the repair's syntax check of changed files), ``prepared`` (the environment
``npm ci`` builds from the project's lock).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.core.types import Finding, LintOffense, SuiteProblem
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain, ToolchainError
from tasks.toolchains.files import FileRules
from tasks.toolchains.mutants import Mutation
from tasks.toolchains.node import context, diagnose, rubric, rubric_hooks, syntax
from tasks.toolchains.node.files import NodeFileRules
from tasks.toolchains.node.jest import BABEL_CONFIGS, CONFIG_FILES
from tasks.toolchains.node.layout import NodeKind, is_code, is_test_file
from tasks.toolchains.node.lint import FLAT_CONFIGS, LEGACY_CONFIGS
from tasks.toolchains.node.lint import lint as eslint
from tasks.toolchains.node.patches import MANIFESTS, TEST_CONFIG_GLOBS, TSCHECK
from tasks.toolchains.node.prepared import NodeEnvBuilder
from tasks.toolchains.node.run import CONTEXTS, not_started, run_jest
from tasks.toolchains.node.tools import NodeTools, default_tools_dir, find_node, resolve_tools

if TYPE_CHECKING:
    from tasks.core.config import Settings
    from tasks.core.run_context import PreparedLike


class NodeJestToolchain(Toolchain):
    """node-jest: Jest (ts-jest, jest-junit, istanbul JSON coverage) and ESLint."""

    name = "node-jest"
    language = "typescript"
    test_tool = "jest"
    kinds = tuple(str(k) for k in NodeKind)
    detection = "package.json (or tsconfig.json) + a Jest test file or a jest configuration"
    config_files = (
        "package.json",
        "package-lock.json",
        "tsconfig.json",
        *CONFIG_FILES,
        *BABEL_CONFIGS,
        *FLAT_CONFIGS,
        *LEGACY_CONFIGS,
    )
    resource_dir = "tasks/toolchains/node/resources"
    resources = (TSCHECK, CONTEXTS)
    cache_dirs = (".eslintcache", ".jest-cache", ".swc", ".parcel-cache", ".turbo", ".next")
    env_dirs = ("node_modules",)
    output_paths = ("coverage", "junit.xml")
    # Dependencies, and what decides how tests run and are checked (jest, tsconfig, babel,
    # eslint, jest setup files): a patch touching them needs a person.
    manifests = (*sorted(MANIFESTS), *TEST_CONFIG_GLOBS)
    migrations = ("migrations/*", "prisma/migrations/*", "prisma/schema.prisma")
    assertion_words = r"\b(expect|assert\w*)\b"
    skip_words = r"(\b(?:it|test|describe)\.(?:skip|todo)\b|\bx(?:it|test|describe)\b)"
    mock_words = r"\b(jest\.(?:mock|fn|spyOn|doMock)|mockImplementation|mockReturnValue)"

    def __init__(
        self,
        node_modules: str | None = None,
        prepare: tuple[str, ...] | list[str] = (),
        home: Path | None = None,
        tools_home: Path | None = None,
        checkout: Path | None = None,
        environment: Path | None = None,
    ) -> None:
        """`node_modules`: the setting (relative to the repository, or absolute as the
        settings resolve it); `tools_home`: Autopilot's tool install (None: the default, see
        :mod:`.tools`); `checkout`: the directory the settings were loaded for (its
        node_modules serves a project with nothing to prepare); `environment`: the prepared
        environment's node_modules. Which one a run uses: :mod:`.modules`."""
        super().__init__(prepare=prepare, home=home)
        self.node_modules = node_modules
        self.tools_home = tools_home
        self.checkout = checkout
        self.environment = environment

    @classmethod
    def from_settings(cls, settings: Settings) -> Toolchain:
        return cls(
            node_modules=settings.node_modules,
            prepare=settings.prepare,
            home=settings.home,
            checkout=settings.loaded_from,
        )

    def env_builder(self) -> NodeEnvBuilder | None:
        """``npm ci`` of the project's lock into a prepared environment; none when the
        ``node_modules`` setting names the user's own install."""
        return NodeEnvBuilder() if self.node_modules is None else None

    def using_env(self, env: PreparedLike) -> Toolchain:
        if self.node_modules is not None:
            return self
        return type(self)(
            prepare=self.prepare,
            home=self.home,
            tools_home=self.tools_home,
            checkout=self.checkout,
            environment=Path(env.path) / "node_modules",
        )

    @classmethod
    def detect(cls, repo: Path) -> bool:
        if not ((repo / "package.json").is_file() or (repo / "tsconfig.json").is_file()):
            return False
        if any((repo / name).is_file() for name in CONFIG_FILES):
            return True
        from tasks.toolchains.mapping import list_files

        return any(NodeFileRules(repo).is_test_file(f) for f in list_files(repo))

    def file_rules(self, repo: Path) -> FileRules:
        return NodeFileRules(repo)

    def tools_dir(self) -> Path:
        """Autopilot's tool install: the given one, else the checkout's or the home's."""
        return self.tools_home or default_tools_dir(self.home)

    def tools(self, repo: Path) -> NodeTools:
        """The tools of a run in `repo`, the project's node_modules linked into it when the
        tree does not hold it (raises ToolchainError when they are missing)."""
        return resolve_tools(
            repo,
            declared=self.node_modules,
            home=self.tools_dir(),
            environment=self.environment,
            checkout=self.checkout,
        )

    def sandbox_dirs(self, repo: Path) -> list[str]:
        """Autopilot's tools, the project's node_modules when it lies outside the tree (and
        where it really is), and the stack's resources ([] of the tools when they are
        missing: the run then reports why)."""
        dirs = [str(self.resource(TSCHECK).parent)]
        try:
            tools = self.tools(repo)
        except ToolchainError:
            return dirs
        outside = tools.outside(repo)
        shown = [str(outside), os.path.realpath(outside)] if outside else []
        return [*tools.sandbox_dirs(), *dict.fromkeys(shown), *dirs]

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
        commands; `contexts` records which test file ran which source lines (the reporter
        reads each test file's own coverage, which Jest keeps before merging them)."""
        try:
            tools = self.tools(repo)
            prepared = self.prepare_worktree(
                repo.resolve(), runner, {"NODE_PATH": tools.node_path()}
            )
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
            contexts=contexts,
        )
        modules = _modules_note(tools)
        suite.prepared = [*prepared, *modules, *suite.prepared]
        return suite

    def load_error_files(self, text: str) -> list[str]:
        return diagnose.load_error_files(text)

    def load_problem(self, text: str, project: Path) -> SuiteProblem:
        return diagnose.load_problem(text, project)

    def lint(
        self, repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
    ) -> list[LintOffense]:
        """ESLint (see :mod:`tasks.toolchains.node.lint`)."""
        return eslint(repo, files, autocorrect, runner, self.tools(repo))

    def rubric_findings(self, path: str, text: str) -> tuple[list[Finding], int]:
        return rubric.analyse(path, text)

    def support_findings(self, path: str, text: str) -> list[Finding]:
        return rubric_hooks.support_findings(path, text)

    def canary_test(self, repo: Path, path: str, text: str, token: str) -> str | None:
        return rubric_hooks.canary_test(text, token) if is_test_file(path) else None

    def context_paths(self, project: Path, source: str, kind: str, source_text: str) -> list[str]:
        return context.context_paths(project, source, source_text)

    def versions(self, project: Path) -> dict[str, str]:
        return context.node_versions(project, self.tools_dir())

    def syntax_check(self, path: str) -> list[str] | None:
        if not is_code(path):
            return None
        try:
            node = find_node()
        except ToolchainError:
            node = "node"  # the run then says what is missing
        home = self.tools_dir()
        return syntax.syntax_check(path, node, home / "node_modules" / "typescript")

    def body_lines(self, path: str, text: str) -> set[int] | None:
        return syntax.body_lines(path, text) if is_code(path) else None

    def mutations(self, path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
        return syntax.mutations(path, text, lines) if is_code(path) else iter(())

    def mutant_ok(self, text: str) -> bool:
        return syntax.syntax_ok(text)

    def config_digest(self, repo: Path) -> str:
        """The base digest plus the tools' lock and the declared node_modules: other tool
        versions or other dependencies are another validation."""
        lock = (self.tools_dir()) / "package-lock.json"
        data = lock.read_bytes() if lock.is_file() else b"(no tools installed)"
        digest = hashlib.sha256(super().config_digest(repo).encode())
        digest.update(b"\0lock\0" + data)
        digest.update(f"\0node_modules\0{self.node_modules or '(default)'}".encode())
        # Another prepared environment is another lock; the checkout's is named by its place.
        digest.update(f"\0env\0{self.environment}\0checkout\0{self.checkout}".encode())
        return digest.hexdigest()


def _modules_note(tools: NodeTools) -> list[str]:
    """The run's note on the project's node_modules when it is not the tree's own."""
    chosen = tools.chosen
    return [chosen.describe()] if chosen is not None and chosen.source != "tree" else []
