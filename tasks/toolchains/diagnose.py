"""Why a test suite did not run, in one line a person can act on: what the stacks' diagnoses
share.

A run that never got to its tests (a usage, internal or collection error, a helper or conftest
that does not load, Bundler refusing the Gemfile, a process that died before the framework's
summary) becomes a :class:`SuiteProblem`: the tool, the real message (taken from where each tool
prints it, never a cut-off tail), a hint, the output's head and tail (secrets redacted), and
whether the cause lies in the project's code (a syntax or import error a merge can introduce:
the repair flow may patch it) or in the environment (a missing plugin, gem or interpreter module,
a bad option: a person must fix it, never a patch). Each stack reads its own tool's output
(``ruby/diagnose.py``, ``python/diagnose.py``) with these helpers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from tasks.core.secrets import redact
from tasks.facts.stacktrace import locations_from_trace
from tasks.toolchains.runs import shorten_middle

Cause = Literal["project", "environment"]
#: How much of the tool's output a problem keeps (its head and its tail).
DETAIL_CHARS = 3000


#: Terminal colour and cursor sequences a tool may print even into a pipe (pytest's ``[0m``).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def output_lines(text: str) -> list[str]:
    """The lines of a tool's output, without terminal escape sequences and trailing blanks."""
    return [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]


def innermost_repo_frame(text: str, repo: Path) -> tuple[str | None, int | None]:
    """The innermost stack frame inside the repository (file, line), else (None, None)."""
    locations = [loc for loc in locations_from_trace(text, repo) if not loc.path.startswith("/")]
    for loc in reversed(locations):
        if not loc.path.startswith((".autopilot-tmp/", ".venv/")):
            return loc.path, loc.line
    return None, None


def detail_of(text: str, repo: Path | None = None) -> str:
    """The output's head and tail, redacted, repository paths made relative."""
    text = relative_to_repo(text, repo) if repo is not None else text
    return shorten_middle(redact(text.strip()), DETAIL_CHARS)


def first_match(patterns: Iterable[re.Pattern[str]], lines: list[str]) -> re.Match[str] | None:
    """The first match of any pattern, line by line."""
    for line in lines:
        for pattern in patterns:
            m = pattern.search(line)
            if m:
                return m
    return None


def relative_to_repo(text: str, repo: Path) -> str:
    """`text` with the worktree's absolute path prefix removed (messages name repo files)."""
    for root in {str(repo), str(repo.resolve())}:
        text = text.replace(root.rstrip("/") + "/", "")
    return text


_INSPECT = re.compile(r"#<(?P<cls>[A-Z][\w:]*)(?::0x[0-9a-f]+)?[ ,@][^\n]{40,}")


def squash(text: str, limit: int = 400) -> str:
    """One line: whitespace runs folded, Ruby's long object inspections cut to their class,
    at most `limit` characters (head kept)."""
    text = _INSPECT.sub(lambda m: f"#<{m.group('cls')} ...>", text)
    one = re.sub(r"\s+", " ", text).strip()
    return one if len(one) <= limit else one[: limit - 3] + "..."
