"""The python-pytest toolchain: pytest (JUnit XML), coverage.py (JSON report) and ruff, with the
project's own interpreter (the ``python`` setting) or an isolated one.

The class answers the interface; the work is in the folder's modules: ``files`` and
``pytest_config`` (sources, tests, conftest support, where a test goes), ``run`` (pytest under
coverage.py, faithful to the project), ``results`` (the JUnit XML and the plugin's status),
``diagnose`` (why a run did not start), ``env`` (the isolated interpreter), ``project`` (package
roots, generated version files), ``lint`` (ruff), ``rubric`` (the static rubric's parser on
``ast``), ``context`` (conftest files, imported modules, versions), ``syntax`` (function bodies,
the parser check, mutations).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.core.types import Finding, LintOffense, SuiteProblem, ValidationResult
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain
from tasks.toolchains.files import FileRules
from tasks.toolchains.mutants import Mutation
from tasks.toolchains.python import context, files, lint, repeat, rubric, rubric_hooks, run, syntax
from tasks.toolchains.python.diagnose import diagnose_pytest
from tasks.toolchains.python.prepared import PythonEnvBuilder
from tasks.toolchains.python.pytest_config import python_test_roots

if TYPE_CHECKING:
    from tasks.core.config import Settings
    from tasks.core.run_context import PreparedLike

_NAME = re.compile(r"[A-Za-z_][\w-]*")
_COLLECTING = re.compile(
    r"(?:ERROR collecting|ImportError while importing test module)\s+'?(?:\./)?"
    r"(?P<path>[\w./-]*test_[\w]+\.py|[\w./-]+_test\.py)",
    re.IGNORECASE,
)


class PythonPytestToolchain(Toolchain):
    """python-pytest: pytest + coverage.py + ruff."""

    name = "python-pytest"
    language = "python"
    test_tool = "pytest"
    kinds = files.KINDS
    detection = "pyproject.toml/setup.cfg/setup.py + tests/, or pytest's testpaths"
    config_files = (
        "pyproject.toml",
        "setup.cfg",
        "pytest.ini",
        "tox.ini",
        "ruff.toml",
        ".ruff.toml",
        ".coveragerc",
    )
    resource_dir = "tasks/toolchains/python/resources"
    resources = (run.PLUGIN, repeat.REPEAT_NAME)
    repeats_in_one_process = True
    cache_dirs = ("__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache")
    env_dirs = (".venv", "venv", ".tox")
    output_paths = (".coverage", "coverage.json")
    manifests = (
        "pyproject.toml",
        "poetry.lock",
        "uv.lock",
        "Pipfile",
        "Pipfile.lock",
        "setup.py",
        "setup.cfg",
        "requirements*.txt",
        "constraints*.txt",
    )
    migrations = ("alembic/*", "migrations/*", "*/migrations/*")
    assertion_words = r"\b(assert\w*|assert_that|pytest\.raises|self\.assert\w*)\b"
    skip_words = r"(\bskip\b|pytest\.mark\.(skip|xfail)|unittest\.skip|pytest\.skip)"
    mock_words = r"\b(MagicMock|unittest\.mock|monkeypatch)"

    def __init__(
        self,
        python: str | None = None,
        prepare: tuple[str, ...] | list[str] = (),
        home: Path | None = None,
    ) -> None:
        super().__init__(prepare=prepare, home=home)
        #: The interpreter the tests run with (the ``python`` setting); None: the isolated one.
        self.python = python

    @classmethod
    def from_settings(cls, settings: Settings) -> Toolchain:
        return cls(python=settings.python, prepare=settings.prepare, home=settings.home)

    @classmethod
    def detect(cls, repo: Path) -> bool:
        config = any((repo / n).is_file() for n in ("pyproject.toml", "setup.cfg", "setup.py"))
        return config and (repo / python_test_roots(repo)[0]).is_dir()

    def file_rules(self, repo: Path) -> FileRules:
        return files.PythonFileRules(repo)

    def run_tests(self, *args: Any, **kwargs: Any) -> SuiteResult:
        """:func:`tasks.toolchains.python.run.run_tests` with this toolchain's interpreter."""
        return run.run_tests(self, *args, python=self.python, home=self.home, **kwargs)

    def env_builder(self) -> PythonEnvBuilder | None:
        """A virtualenv from the project's lock or requirements; none when the ``python``
        setting names the user's own interpreter."""
        return PythonEnvBuilder() if self.python is None else None

    def using_env(self, env: PreparedLike) -> Toolchain:
        if env.interpreter is None or self.python is not None:
            return self
        return type(self)(python=env.interpreter, prepare=self.prepare, home=self.home)

    def run_repeats(self, *args: Any, **kwargs: Any) -> list[ValidationResult]:
        """:func:`tasks.toolchains.python.repeat.run_repeats` (one interpreter) with this
        toolchain's interpreter."""
        return repeat.run_repeats(self, *args, python=self.python, home=self.home, **kwargs)

    def config_digest(self, repo: Path) -> str:
        # Another interpreter is another set of installed packages: another validation. The
        # default is named as such, not by its path, so the key holds wherever Autopilot lives.
        python = self.python or "(autopilot's own, isolated)"
        return hashlib.sha256(f"{super().config_digest(repo)}\0{python}".encode()).hexdigest()

    def load_error_files(self, text: str) -> list[str]:
        return [m.group("path") for m in _COLLECTING.finditer(text)]

    def load_problem(self, text: str, project: Path) -> SuiteProblem:
        return diagnose_pytest(text, 2, project)

    def lint(
        self, repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
    ) -> list[LintOffense]:
        return lint.lint(repo, files, autocorrect, runner)

    def rubric_findings(self, path: str, text: str) -> tuple[list[Finding], int]:
        return rubric.analyse(path, text)

    def support_findings(self, path: str, text: str) -> list[Finding]:
        return rubric_hooks.support_findings(path, text)

    def canary_test(self, repo: Path, path: str, text: str, token: str) -> str | None:
        return rubric_hooks.canary_test(repo, text, token) if path.endswith(".py") else None

    def context_paths(self, project: Path, source: str, kind: str, source_text: str) -> list[str]:
        return context.context_paths(project, source, source_text)

    def versions(self, project: Path) -> dict[str, str]:
        return context.python_versions(project)

    def syntax_check(self, path: str) -> list[str] | None:
        return syntax.syntax_check(path)

    def body_lines(self, path: str, text: str) -> set[int] | None:
        return syntax.body_lines(text) if path.endswith(".py") else None

    def mutations(self, path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
        return syntax.mutations(path, text, lines) if path.endswith(".py") else iter(())

    def no_cover_lines(self, text: str) -> set[int]:
        return syntax.no_cover_lines(text)

    def file_of_case(self, classname: str, project: Path) -> str | None:
        """`tests.test_mod.TestCls` -> `tests/test_mod.py` when that file exists (pytest's
        default JUnit XML names no file)."""
        parts = [p for p in classname.split(".") if p]
        if not all(_NAME.fullmatch(p) for p in parts):
            return None  # not a dotted module path: never a file name to try
        while parts:
            candidate = "/".join(parts) + ".py"
            if (project / candidate).is_file():
                return candidate
            parts.pop()
        return None
