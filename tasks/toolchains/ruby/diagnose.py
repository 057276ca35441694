"""Why an RSpec run (or Bundler before it) did not get to its examples, in one line."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tasks.core.secrets import redact
from tasks.core.types import SuiteProblem
from tasks.toolchains.diagnose import (
    Cause,
    detail_of,
    first_match,
    innermost_repo_frame,
    output_lines,
    relative_to_repo,
    squash,
)

_RUBY_PROJECT_ERRORS = ("SyntaxError", "NameError", "NoMethodError", "ArgumentError", "TypeError")
_BUNDLER = (
    re.compile(r"There was an error parsing `Gemfile`:?\s*(?P<msg>.*)"),
    re.compile(r"(?P<msg>Your Ruby version is .*)"),
    re.compile(r"(?P<msg>Could not find (?:gem )?'?[\w.-]+.*)"),
    re.compile(r"(?P<msg>Bundler could not find compatible versions.*)"),
    re.compile(r"(?P<msg>bundler: command not found: .*)"),
    re.compile(r"(?P<msg>Bundler::\w+Error.*)"),
    re.compile(r"(?P<msg>The gemspecs? for .* (?:could not|was not) .*)"),
)
_LOADING_HEADER = re.compile(
    r"(?:An error occurred while loading|While loading) \S+?(?=\.?(?:\s|$))"
)
_RUBY_LOAD = re.compile(r"cannot load such file -- (?P<name>\S+)")
_RUBY_ERROR = re.compile(r"^\s*(?P<type>[A-Z][\w:]*(?:Error|Exception)):?\s*(?P<msg>.*)$")


def _bundler_problem(bundler: re.Match[str], text: str, repo: Path, detail: str) -> SuiteProblem:
    """Bundler refused to set up the gems: the environment's problem, with the fix."""
    message = bundler.group("msg").strip() or bundler.group(0)
    versions = re.search(r"Your Ruby version is (\S+), but your Gemfile specified (\S+)", text)
    where = re.search(r"#\s+from (?P<file>\S+?):(?P<line>\d+)", text)
    if where:
        message += f" ({relative_to_repo(where.group('file'), repo)}:{where.group('line')})"
    return SuiteProblem(
        tool="bundler",
        cause="environment",
        message=squash(relative_to_repo(message, repo)),
        hint=(
            f"the tests run with Ruby {versions.group(1)}: run them with Ruby "
            f"{versions.group(2)}, or relax the Gemfile's `ruby` line"
        )
        if versions
        else "Bundler cannot set up the project's gems: fix the Gemfile or install the bundle "
        "(`bundle install`) for the Ruby that runs the tests",
        detail=detail,
    )


def diagnose_rspec(
    output: str, exit_code: int, repo: Path, messages: Iterable[str] = ()
) -> SuiteProblem:
    """The problem behind an RSpec (or ``bundle exec``) run that did not get to its examples.

    Args:
        output: the run's stdout and stderr.
        exit_code: the process status.
        repo: the project directory.
        messages: RSpec's own messages from its JSON report (errors outside of examples).
    """
    text = "\n".join([*messages, output])
    lines = output_lines(redact(text))
    detail = detail_of(text, repo)
    bundler = first_match(_BUNDLER, lines)
    if bundler is not None:
        return _bundler_problem(bundler, text, repo, detail)
    file, line = innermost_repo_frame(text, repo)
    headers = (_LOADING_HEADER.match(ln.strip()) for ln in lines)
    loading = next((m.group(0) for m in headers if m is not None), None)
    error = None
    error_message = ""
    for index, ln in enumerate(lines):
        m = _RUBY_ERROR.match(ln)
        if m and not ln.strip().startswith(("Failure/Error", "#")):
            error = m
            # RSpec prints the class alone ("LoadError:") and its message indented below.
            following = [x.strip() for x in lines[index + 1 : index + 4] if x.strip()]
            error_message = m.group("msg").strip() or (following[0] if following else "")
            break
    load = _RUBY_LOAD.search(text)
    error_type = (
        error.group("type").rsplit("::", 1)[-1] if error else ("LoadError" if load else None)
    )
    message = f"{error.group('type')}: {error_message}".strip() if error else None
    cause: Cause = "project" if error_type in _RUBY_PROJECT_ERRORS else "environment"
    hint = None
    if load is not None:
        name = load.group("name")
        inside = name.startswith(".") or (repo / name).exists() or (repo / f"{name}.rb").exists()
        cause = "project" if inside else "environment"
        message = message or f"LoadError: cannot load such file -- {name}"
        if not inside:
            gem = name.split("/", 1)[0]
            hint = f"{name} is not installed for this Ruby: add the {gem} gem to the bundle"
    if message is None:
        message = loading or f"rspec exited {exit_code} before running any example"
    elif loading:
        message = f"{loading.rstrip('.')}: {message}"
    return SuiteProblem(
        tool="rspec",
        cause=cause,
        message=squash(relative_to_repo(message, repo)),
        hint=hint,
        error_type=error_type,
        file=file,
        line=line,
        detail=detail,
    )
