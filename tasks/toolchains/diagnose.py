"""Why a test suite did not run, in one line a person can act on.

A run that never got to its tests (pytest's usage, internal or collection errors, a conftest
that does not import, RSpec's errors outside examples, Bundler refusing the Gemfile, a process
that died before the framework's summary) becomes a :class:`SuiteProblem`: the tool, the real
message (taken from where each tool prints it, never a cut-off tail), a hint, the output's
head and tail (secrets redacted), and whether the cause lies in the project's code (a syntax or
import error a merge can introduce: the repair flow may patch it) or in the environment (a
missing plugin, gem or interpreter module, a bad option: a person must fix it, never a patch).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from tasks.core.secrets import redact
from tasks.core.types import SuiteProblem
from tasks.facts.stacktrace import locations_from_trace
from tasks.toolchains.base import shorten_middle

Cause = Literal["project", "environment"]
#: How much of the tool's output a problem keeps (its head and its tail).
DETAIL_CHARS = 3000

_RUBY_PROJECT_ERRORS = ("SyntaxError", "NameError", "NoMethodError", "ArgumentError", "TypeError")
_E_LINE = re.compile(
    r"^E\s+(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit)\b):?\s*(?P<msg>.*)$"
)
_MISSING_MODULE = re.compile(r"No module named '(?P<name>[\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(?P<what>[\w.]+)' from '(?P<mod>[\w.]+)'")
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


def _lines(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines()]


def _innermost_repo_frame(text: str, repo: Path) -> tuple[str | None, int | None]:
    """The innermost stack frame inside the repository (file, line), else (None, None)."""
    locations = [loc for loc in locations_from_trace(text, repo) if not loc.path.startswith("/")]
    for loc in reversed(locations):
        if not loc.path.startswith((".autopilot-tmp/", ".venv/")):
            return loc.path, loc.line
    return None, None


def _detail(text: str, repo: Path | None = None) -> str:
    text = relative_to_repo(text, repo) if repo is not None else text
    return shorten_middle(redact(text.strip()), DETAIL_CHARS)


def _first(patterns: Iterable[re.Pattern[str]], lines: list[str]) -> re.Match[str] | None:
    for line in lines:
        for pattern in patterns:
            m = pattern.search(line)
            if m:
                return m
    return None


def diagnose_pytest(
    output: str, exit_code: int, repo: Path, packages: Iterable[str] = (), python: str = "python"
) -> SuiteProblem:
    """The problem behind a pytest run that did not get to its tests.

    Args:
        output: the run's stdout and stderr.
        exit_code: pytest's exit status (2 interrupted, 3 internal error, 4 usage error...).
        repo: the project directory (frames inside it are the project's).
        packages: the project's top-level packages (a missing one is the project's problem).
        python: the interpreter that ran the tests, for hints.
    """
    lines = _lines(output)
    detail = _detail(output, repo)
    file, line = _innermost_repo_frame(output, repo)
    text = redact(output)
    usage = re.search(r"error: (unrecognized arguments: .*|argument .*|.*option.*)", text)
    if exit_code == 4 and usage and "conftest" not in text.split(usage.group(0))[0][-300:]:
        return SuiteProblem(
            tool="pytest",
            cause="environment",
            message=usage.group(1).strip(),
            hint=f"a plugin the project's pytest configuration needs is missing from {python}: "
            "set `python` in autopilot.toml to the project's interpreter, or install the "
            "plugin there",
            detail=detail,
        )
    missing_tool = re.search(r"No module named (?:'?)(pytest|coverage)\b", text)
    if missing_tool and "E   " not in text:
        return SuiteProblem(
            tool="python",
            cause="environment",
            message=f"{python}: No module named {missing_tool.group(1)}",
            hint=f"install {missing_tool.group(1)} in that environment",
            detail=detail,
        )
    header = next(
        (
            ln.strip()
            for ln in lines
            if ln.startswith(("ImportError while loading conftest", "ERROR collecting"))
            or ln.startswith(("INTERNALERROR>", "ImportError while importing test module"))
        ),
        None,
    )
    error = None
    for ln in lines:
        m = _E_LINE.match(ln)
        if m:
            error = m
    error_type = error.group("type").rsplit(".", 1)[-1] if error else None
    message = f"{error.group('type')}: {error.group('msg')}".strip() if error else None
    if error is None and header and header.startswith("INTERNALERROR>"):
        internal = [ln for ln in lines if ln.startswith("INTERNALERROR>")]
        message = internal[-1].removeprefix("INTERNALERROR>").strip() if internal else header
        error_type = (message.split(":", 1)[0] or None) if message else None
    cause: Cause = "project" if error_type and file is not None else "environment"
    hint: str | None = None
    if error_type in ("ModuleNotFoundError", "ImportError") and message:
        missing = _MISSING_MODULE.search(message)
        cannot = _CANNOT_IMPORT.search(message)
        named = missing.group("name") if missing else cannot.group("mod") if cannot else ""
        top = named.split(".", 1)[0]
        cause = "project" if top and top in set(packages) else "environment"
        if cause == "environment" and top:
            hint = (
                f"{top} is not importable by {python}: set `python` in autopilot.toml to the "
                "project's interpreter, or install it there"
            )
    if message is None:
        errors = [ln.removeprefix("ERROR: ").strip() for ln in lines if ln.startswith("ERROR: ")]
        message = header or (errors[0] if errors else None)
        message = message or f"pytest exited {exit_code} before running the tests"
    elif header and not header.startswith("INTERNALERROR>"):
        message = f"{header.rstrip('.')}: {message}"
    return SuiteProblem(
        tool="pytest",
        cause=cause,
        message=_squash(relative_to_repo(message, repo)),
        hint=hint,
        error_type=error_type,
        file=file,
        line=line,
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
    lines = _lines(redact(text))
    detail = _detail(text, repo)
    bundler = _first(_BUNDLER, lines)
    if bundler is not None:
        message = bundler.group("msg").strip() or bundler.group(0)
        versions = re.search(r"Your Ruby version is (\S+), but your Gemfile specified (\S+)", text)
        where = re.search(r"#\s+from (?P<file>\S+?):(?P<line>\d+)", text)
        if where:
            message += f" ({relative_to_repo(where.group('file'), repo)}:{where.group('line')})"
        return SuiteProblem(
            tool="bundler",
            cause="environment",
            message=_squash(relative_to_repo(message, repo)),
            hint=(
                f"the tests run with Ruby {versions.group(1)}: run them with Ruby "
                f"{versions.group(2)}, or relax the Gemfile's `ruby` line"
            )
            if versions
            else "Bundler cannot set up the project's gems: fix the Gemfile or install the "
            "bundle (`bundle install`) for the Ruby that runs the tests",
            detail=detail,
        )
    file, line = _innermost_repo_frame(text, repo)
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
        message=_squash(relative_to_repo(message, repo)),
        hint=hint,
        error_type=error_type,
        file=file,
        line=line,
        detail=detail,
    )


def relative_to_repo(text: str, repo: Path) -> str:
    """`text` with the worktree's absolute path prefix removed (messages name repo files)."""
    for root in {str(repo), str(repo.resolve())}:
        text = text.replace(root.rstrip("/") + "/", "")
    return text


_INSPECT = re.compile(r"#<(?P<cls>[A-Z][\w:]*)(?::0x[0-9a-f]+)?[ ,@][^\n]{40,}")


def _squash(text: str, limit: int = 400) -> str:
    """One line: whitespace runs folded, Ruby's long object inspections cut to their class,
    at most `limit` characters (head kept)."""
    text = _INSPECT.sub(lambda m: f"#<{m.group('cls')} ...>", text)
    one = re.sub(r"\s+", " ", text).strip()
    return one if len(one) <= limit else one[: limit - 3] + "..."
