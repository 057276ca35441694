"""The ruby-rspec toolchain: RSpec (JSON report), SimpleCov coverage, RuboCop or Standard, Rails
file kinds and FactoryBot factories.

The class answers the interface; the work is in the folder's modules: ``files`` (sources,
kinds, specs, support, where a spec goes), ``run`` (RSpec with our SimpleCov helper),
``diagnose`` (why a run did not start), ``lint``, ``rubric`` (the static rubric's parser on the
tree-sitter syntax tree), ``context`` (helpers, factories, the code a source names, versions),
``syntax`` (method bodies, ``ruby -c``, mutations).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasks.core.types import Finding, LintOffense, SuiteProblem, ValidationResult
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain
from tasks.toolchains.files import FileRules
from tasks.toolchains.mutants import Mutation
from tasks.toolchains.ruby import context, files, lint, repeat, rubric, rubric_hooks, run, syntax
from tasks.toolchains.ruby.bundle import BundleBuilder
from tasks.toolchains.ruby.diagnose import diagnose_rspec

#: RuboCop settings for a project without its own (named so that RuboCop resolves the paths in
#: it against the working directory, the project).
DEFAULT_RUBOCOP_CONFIG = "autopilot_rubocop.yml"
_LOADING = re.compile(r"(?:while loading)\s+'?(?:\./)?(?P<path>[\w./-]+?_spec\.rb)", re.IGNORECASE)


class RubyRspecToolchain(Toolchain):
    """ruby-rspec: RSpec + SimpleCov + RuboCop."""

    name = "ruby-rspec"
    language = "ruby"
    test_tool = "rspec"
    kinds = files.KINDS
    detection = "Gemfile + spec/"
    config_files = (
        ".rubocop.yml",
        "spec/.rubocop.yml",
        ".standard.yml",
        ".rubocop_todo.yml",
        ".rspec",
        ".simplecov",
        "Gemfile",
        "Gemfile.lock",
        ".ruby-version",
    )
    resource_dir = "tasks/toolchains/ruby/resources"
    resources = (run.HELPER_NAME, DEFAULT_RUBOCOP_CONFIG, run.CONTEXTS_NAME, repeat.REPEAT_NAME)
    env_dirs = (".bundle",)
    output_paths = ("tmp", "log", "coverage")
    manifests = ("Gemfile", "Gemfile.lock", "gems.rb", "gems.locked", "*.gemspec")
    migrations = ("db/migrate/*", "db/schema.rb", "db/structure.sql")
    assertion_words = r"\b(expect|is_expected|should|assert\w*)\b"
    skip_words = r"(\bxit\b|\bxdescribe\b|\bxcontext\b|\bskip\b|\bpending\b)"
    mock_words = r"\b(instance_double|receive\(|RSpec::Mocks)"
    repeats_in_one_process = True

    @classmethod
    def detect(cls, repo: Path) -> bool:
        return (repo / "Gemfile").is_file() and (repo / "spec").is_dir()

    def file_rules(self, repo: Path) -> FileRules:
        return files.RubyFileRules(repo)

    def run_tests(self, *args: Any, **kwargs: Any) -> SuiteResult:
        """:func:`tasks.toolchains.ruby.run.run_tests` with this toolchain."""
        return run.run_tests(self, *args, **kwargs)

    def env_builder(self) -> BundleBuilder:
        return BundleBuilder()

    def schema_command(self, project: Path) -> tuple[list[str], dict[str, str]] | None:
        """Rails' convention: ``db:schema:load`` when a schema file exists, else
        ``db:prepare``; None for a project that is no Rails app with a database."""
        if not (project / "bin" / "rails").is_file():
            return None
        if not (project / "config" / "database.yml").is_file():
            return None
        db = project / "db"
        has_schema = (db / "schema.rb").is_file() or (db / "structure.sql").is_file()
        task = "db:schema:load" if has_schema else "db:prepare"
        return ["bin/rails", task], {"RAILS_ENV": "test", "DISABLE_DATABASE_ENVIRONMENT_CHECK": "1"}

    def run_repeats(self, *args: Any, **kwargs: Any) -> list[ValidationResult]:
        """:func:`tasks.toolchains.ruby.repeat.run_repeats` (one Ruby process) with this
        toolchain; runs in alternating order are separate processes (the files listed
        reversed), as the default gives."""
        if kwargs.get("reverse_alternate"):
            return super().run_repeats(*args, **kwargs)
        return repeat.run_repeats(self, *args, **kwargs)

    def load_error_files(self, text: str) -> list[str]:
        return [m.group("path") for m in _LOADING.finditer(text)]

    def load_problem(self, text: str, project: Path) -> SuiteProblem:
        return diagnose_rspec(text, 1, project)

    def lint(
        self, repo: Path, files: list[str], autocorrect: bool, runner: CommandRunner
    ) -> list[LintOffense]:
        return lint.lint(repo, files, autocorrect, runner, self.resource(DEFAULT_RUBOCOP_CONFIG))

    def lint_blocked_by(self, problem: SuiteProblem) -> bool:
        # RuboCop runs through the same bundle: it would only fail again for that reason.
        return problem.tool == "bundler"

    def rubric_findings(self, path: str, text: str) -> tuple[list[Finding], int]:
        return rubric.analyse(path, text)

    def support_findings(self, path: str, text: str) -> list[Finding]:
        return rubric_hooks.support_findings(path, text)

    def canary_test(self, repo: Path, path: str, text: str, token: str) -> str | None:
        return rubric_hooks.canary_test(text, token) if path.endswith(".rb") else None

    def context_paths(self, project: Path, source: str, kind: str, source_text: str) -> list[str]:
        return context.context_paths(project, source, kind, source_text)

    def versions(self, project: Path) -> dict[str, str]:
        return context.gem_versions(project)

    def syntax_check(self, path: str) -> list[str] | None:
        return syntax.syntax_check(path)

    def body_lines(self, path: str, text: str) -> set[int] | None:
        return syntax.body_lines(text) if path.endswith(".rb") else None

    def mutations(self, path: str, text: str, lines: set[int]) -> Iterator[Mutation]:
        return syntax.mutations(path, text, lines) if path.endswith(".rb") else iter(())

    def no_cover_lines(self, text: str) -> set[int]:
        return syntax.no_cover_lines(text)

    def mutant_ok(self, text: str) -> bool:
        return syntax.syntax_ok(text)
