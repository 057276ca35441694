"""Which Ruby linter a project uses, and what its failures mean, in one line.

The project's configuration decides: a ``.rubocop.yml`` (found from the file's directory up)
means RuboCop; Standard's ``.standard.yml`` alone means ``standardrb`` (Standard reads it; RuboCop
would ignore it and report thousands of offences against its own defaults); neither means
RuboCop with Autopilot's spec-friendly defaults. A linter that fails is never silently replaced
by another: :func:`lint_error` names the tool, the real cause (read where RuboCop prints it, at
the start of its output) and how to fix it.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from tasks.core.types import CommandResult, LintOffense
from tasks.toolchains.base import LINT_TIMEOUT_S, CommandRunner, ToolchainError
from tasks.toolchains.ruby.run import uses_bundler
from tasks.toolchains.runs import copy_resource, relative_path, remove_scratch, scratch_dir, tail

_UNKNOWN_RUBY = re.compile(
    r"unknown Ruby version:? (?P<version>\d[\w.]*)"
    r"(?:(?: found)? in `?(?P<file>[^`\s]+?)`?\.?(?:\s|$))?"
)
_SUPPORTED = re.compile(r"Supported versions:\s*(?P<versions>[\d., ]+)")
_RUNNING_RUBY = re.compile(r'"ruby_version":"(?P<version>\d+\.\d+)')
#: Where RuboCop reads the project's Ruby version from, in its order.
_VERSION_FILES = (".ruby-version", ".tool-versions", "Gemfile.lock", "Gemfile", "*.gemspec")
_LOAD = re.compile(r"cannot load such file -- (?P<name>\S+)")
_COMMAND_NOT_FOUND = re.compile(r"bundler: command not found: (?P<name>\S+)")
_GEM_MISSING = re.compile(r"Could not find (?:gem )?'?(?P<name>[\w.-]+)")


def has_rubocop_config(repo: Path, files: list[str]) -> bool:
    """Whether RuboCop finds a configuration for any of `files`.

    RuboCop uses the nearest ``.rubocop.yml`` from a file's directory up, past the project (a
    monorepo's root configuration counts); the sandbox's HOME is private, so no user
    configuration applies there.
    """
    root = repo.resolve()
    for rel in files:
        start = (root / rel).parent
        if any((d / ".rubocop.yml").is_file() for d in (start, *start.parents)):
            return True
    return False


def lint(
    repo: Path,
    files: list[str],
    autocorrect: bool,
    runner: CommandRunner,
    default_config: Path,
) -> list[LintOffense]:
    """RuboCop (or Standard) the given files; returns the remaining offences.

    The project's own configuration decides what counts: its ``.rubocop.yml``, or Standard's
    ``.standard.yml`` run through ``standardrb``. A project with neither is linted with
    `default_config` (``resources/autopilot_rubocop.yml``): RuboCop's defaults, less the cops
    that do not fit specs (an example group is one long block). `autocorrect` applies every
    correction the linter has, unsafe ones included: it is only asked for files the model
    wrote, and those are run again after the lint, so a correction that changed behaviour
    fails the run.

    Raises:
        ToolchainError: the linter failed (bad or unknown configuration, a gem it needs is
            missing, a Ruby version it does not know): one line with the real cause and a hint.
    """
    if not files:
        return []
    repo = repo.resolve()
    run_dir = None if has_rubocop_config(repo, files) else scratch_dir(repo)
    try:
        default = None if run_dir is None else copy_resource(default_config, run_dir)
        tool, argv = lint_command(repo, files, autocorrect, default, uses_bundler)
        cmd = runner.run([*argv, "--", *files], cwd=repo, timeout_s=LINT_TIMEOUT_S)
    finally:
        if run_dir is not None:
            remove_scratch(run_dir)
    if cmd.reason or cmd.exit_code not in (0, 1):
        raise ToolchainError(lint_error(tool, cmd, repo))
    try:
        return parse_rubocop_json(cmd.stdout, repo)
    except ToolchainError:
        if cmd.exit_code == 0:
            raise
        raise ToolchainError(lint_error(tool, cmd, repo)) from None


def parse_rubocop_json(text: str, repo: Path) -> list[LintOffense]:
    """Offences from ``rubocop --format json`` output; corrected ones are left out."""
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise ToolchainError(f"rubocop printed no JSON report: {tail(text, 300)!r}")
    offenses: list[LintOffense] = []
    for entry in data["files"]:
        path = relative_path(str(entry.get("path", "")), repo)
        for off in entry.get("offenses") or []:
            if off.get("corrected"):
                continue
            loc = off.get("location") or {}
            offenses.append(
                LintOffense(
                    path=path,
                    line=int(loc.get("start_line") or loc.get("line") or 0),
                    column=int(loc.get("start_column") or loc.get("column") or 0),
                    rule=str(off.get("cop_name", "")),
                    message=str(off.get("message", "")),
                    correctable=bool(off.get("correctable")),
                )
            )
    return offenses


def uses_standard(repo: Path) -> bool:
    """True when the project configures Standard (``.standard.yml``) and not RuboCop."""
    return (repo / ".standard.yml").is_file() and not (repo / ".rubocop.yml").is_file()


def lint_command(
    repo: Path,
    files: list[str],
    autocorrect: bool,
    default_config: Path | None,
    uses_bundler: Callable[[Path, str], bool],
) -> tuple[str, list[str]]:
    """(tool name, argv without the files) for linting `files` the way the project does.

    Raises:
        ToolchainError: the project lints with Standard and ``standardrb`` is not installed.
    """
    if uses_standard(repo):
        if uses_bundler(repo, "standard"):
            base = ["bundle", "exec", "standardrb"]
        elif shutil.which("standardrb"):
            base = ["standardrb"]
        else:
            raise ToolchainError(
                "standardrb: the project lints with Standard (.standard.yml) but the standard "
                'gem is not installed: add `gem "standard"` to the Gemfile and run `bundle '
                "install`, or `gem install standard`"
            )
        argv = [*base, "--format", "json", "--no-color", "--force-exclusion"]
        return "standardrb", [*argv, "--fix"] if autocorrect else argv
    base = ["bundle", "exec", "rubocop"] if uses_bundler(repo, "rubocop") else ["rubocop"]
    argv = [*base, "--format", "json", "--no-color", "--force-exclusion"]
    if autocorrect:
        argv.append("--autocorrect-all")
    if default_config is not None:
        argv += ["--config", str(default_config)]
    return "rubocop", argv


def lint_error(tool: str, cmd: CommandResult, repo: Path) -> str:
    """One line naming `tool`, the real cause of its failure, and a hint."""
    if cmd.reason:
        return f"{tool}: stopped: {cmd.reason}"
    text = f"{cmd.stderr}\n{cmd.stdout}"
    unknown = _UNKNOWN_RUBY.search(text)
    if unknown:
        version = unknown.group("version")
        supported = _SUPPORTED.search(text)
        known = supported.group("versions").replace(" ", "").split(",") if supported else []
        running = _RUNNING_RUBY.search(text)
        target = known[-1] if known and known[-1] else running.group("version") if running else None
        where = unknown.group("file") or _version_source(repo, version)
        return (
            f"{tool}: RuboCop does not know Ruby {version}"
            + (f" (named in {where})" if where else "")
            + f" (set `AllCops: TargetRubyVersion: {target or '<a version it knows>'}` in "
            ".rubocop.yml, or use a RuboCop release that supports that Ruby)"
        )
    missing = _LOAD.search(text)
    if missing:
        name = missing.group("name")
        return (
            f"{tool}: cannot load such file -- {name} (the lint configuration needs {name}, "
            "which is not installed for this Ruby: add its gem to the Gemfile and run `bundle "
            "install`, or install the gem)"
        )
    absent = _COMMAND_NOT_FOUND.search(text)
    if absent:
        name = absent.group("name")
        return f"{tool}: bundler: command not found: {name} (add its gem to the Gemfile)"
    gem = _GEM_MISSING.search(text)
    if gem:
        return f"{tool}: {gem.group(0).strip()} (run `bundle install` for the Ruby that lints)"
    return f"{tool}: {_first_cause(text) or f'exit {cmd.exit_code}'}"


def _version_source(repo: Path, version: str) -> str | None:
    """The file of the project that names Ruby `version` (what RuboCop read it from)."""
    for pattern in _VERSION_FILES:
        for path in sorted(repo.glob(pattern)):
            try:
                if version in path.read_text(encoding="utf-8", errors="replace"):
                    return path.name
            except OSError:
                continue
    return None


def _first_cause(text: str) -> str:
    """RuboCop states the error first ("Error: ..."), then a backtrace: the first such line,
    else the first non-empty line (never a tail)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if line.startswith(("Error:", "error:")) or "Error" in line.split(":", 1)[0]:
            return line[:400]
    return lines[0][:400] if lines else ""
