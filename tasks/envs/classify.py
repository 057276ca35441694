"""Why an install failed, in one line: the cause a person acts on, not the tool's screenful.

Each package tool says what went wrong somewhere in its output. The stack's rules (its
builder passes them: ``tasks/toolchains/<stack>/``) find the telling line of its tool; the
rules here are the ones every tool shares (a timeout, a missing tool, no registry access, a
missing header). A failure no rule knows is ``build_failed`` with the tool's last meaningful
line.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tasks.envs.install import StepResult
from tasks.envs.types import Cause

#: A stack's rules: the failed step's output and whether the network was allowed -> the
#: cause and its one-line message, or None when no rule of the stack knows it.
StackRules = Callable[[str, bool], "tuple[Cause, str] | None"]

#: Debian packages that bring the headers of well-known native packages of any stack.
NATIVE_HINTS = {
    "pg": "libpq-dev",
    "psycopg2": "libpq-dev",
    "mysql2": "default-libmysqlclient-dev",
    "mysqlclient": "default-libmysqlclient-dev",
    "nokogiri": "libxml2-dev libxslt1-dev",
    "lxml": "libxml2-dev libxslt1-dev",
    "sqlite3": "libsqlite3-dev",
    "ffi": "libffi-dev",
    "psych": "libyaml-dev",
    "rmagick": "libmagickwand-dev",
}

NETWORK = re.compile(
    r"Could not reach host|Could not fetch specs from|Network error|getaddrinfo|"
    r"Failed to open TCP connection|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|"
    r"Failed to fetch|error sending request|dns error|failed to lookup address|"
    r"Max retries exceeded|NewConnectionError|Could not find a version that satisfies the "
    r"requirement .*\(from versions: none\)",
    re.IGNORECASE,
)
_HEADER = re.compile(
    r"(?:checking for (?P<check>[\w./+-]+\.h)\.*\s*no)|"
    r"(?:fatal error: (?P<fatal>[\w./+-]+\.h): No such file)|"
    r"(?:Can't find the '(?P<cant>[\w./+-]+\.h)')|(?P<pgconfig>pg_config executable not found)"
)


def classify(step: StepResult, rules: StackRules, *, network: bool) -> tuple[Cause, str]:
    """The cause of a failed install step and a one-line message with what to do."""
    text = step.output
    if step.timed_out:
        return "timeout", f"{_cmd(step)} did not finish within its timeout"
    if step.exit_code == 127 and "could not start" not in text and len(text) < 300:
        return "tool_missing", f"{text.strip() or step.argv[0]}: not installed"
    found = rules(text, network)
    if found is not None:
        return _with_egress(found, text)
    return "build_failed", f"{_cmd(step)} exited {step.exit_code}: {last_line(text)}"


#: What the install sandbox writes before a step's output when its egress proxy refused one.
_EGRESS_REFUSED = re.compile(r"^egress (?P<dest>\S+) refused \((?P<why>.*)\)$", re.MULTILINE)


def _with_egress(found: tuple[Cause, str], text: str) -> tuple[Cause, str]:
    """A registry failure that the egress rule caused says so: the operator widens it."""
    cause, _message = found
    refused = _EGRESS_REFUSED.search(text)
    if cause != "no_registry_access" or refused is None:
        return found
    return cause, one(
        f"no registry access: {refused['dest']} refused by the install step's egress rule "
        f"({refused['why']}); the operator's [envs] allow_hosts lists what it may reach"
    )


def header(text: str) -> str | None:
    """The C header a native build lacked, when the output names one."""
    m = _HEADER.search(text)
    if m is None:
        return None
    if m.group("pgconfig"):
        return "libpq-fe.h (pg_config)"
    return m.group("check") or m.group("fatal") or m.group("cant")


def no_registry(text: str) -> tuple[Cause, str] | None:
    """``no_registry_access`` with the telling line, when the output shows one."""
    if not NETWORK.search(text):
        return None
    line = next((ln for ln in text.splitlines() if NETWORK.search(ln)), last_line(text))
    return "no_registry_access", f"no registry access: {one(line)}"


def native_hint(package: str | None) -> str:
    """`` (install <package>)``: the Debian package that brings what `package` builds against."""
    hint = NATIVE_HINTS.get((package or "").lower())
    return f" (install {hint})" if hint else " (install its -dev package)"


def _cmd(step: StepResult) -> str:
    return " ".join(step.argv[:3])


def one(text: str, limit: int = 240) -> str:
    """`text` on one line, at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def last_line(text: str) -> str:
    """The last line that says something (not a blank, a comment of ours or a bare prompt)."""
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.lstrip().startswith(("#", "$ "))
    ]
    return one(lines[-1]) if lines else "no output"
