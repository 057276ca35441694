"""Why an install failed, in one line: the cause a person acts on, not the tool's screenful.

Bundler, uv and pip each say what went wrong somewhere in their output; these rules find the
telling line and name the cause (:data:`tasks.envs.types.Cause`) with a hint. A failure no rule
knows is ``build_failed`` with the tool's last meaningful line.
"""

from __future__ import annotations

import re

from tasks.envs.install import StepResult
from tasks.envs.types import Cause

#: Debian packages that bring the headers of well-known native gems and Python packages.
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

#: What a native gem lacks on a machine without Ruby's own development headers.
RUBY_HEADERS = "ruby.h (Ruby's development headers)"
_NETWORK = re.compile(
    r"Could not reach host|Could not fetch specs from|Network error|getaddrinfo|"
    r"Failed to open TCP connection|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|"
    r"Failed to fetch|error sending request|dns error|failed to lookup address|"
    r"Max retries exceeded|NewConnectionError|Could not find a version that satisfies the "
    r"requirement .*\(from versions: none\)",
    re.IGNORECASE,
)
_GEM_UNKNOWN = re.compile(
    r"Could not find gem '(?P<gem>[^' ]+)[^']*'|Could not find (?P<list>[\w.-]+-\d[\w.]*"
    r"(?:, [\w.-]+)*) in (?:any of the sources|locally installed gems)"
)
_GEM_NATIVE = re.compile(r"An error occurred while installing (?P<gem>[\w.-]+) \((?P<v>[^)]+)\)")
_HEADER = re.compile(
    r"(?P<rubyh>can't find header files for ruby)|"
    r"(?:checking for (?P<check>[\w./+-]+\.h)\.*\s*no)|"
    r"(?:fatal error: (?P<fatal>[\w./+-]+\.h): No such file)|"
    r"(?:Can't find the '(?P<cant>[\w./+-]+\.h)')|(?P<pgconfig>pg_config executable not found)"
)
_LOCK = re.compile(
    r"You are trying to install in deployment mode after changing|"
    r"Your bundle only supports platforms|The gemspecs for path gems changed|"
    r"Your lockfile is unreadable|lockfile .* (?:is|needs to be) updated|"
    r"Unable to find lockfile|Failed to parse `uv.lock`|The lockfile at `uv.lock` needs",
    re.IGNORECASE,
)
_GEMFILE_ERROR = re.compile(
    r"There was an error parsing `(?P<file>[^`]+)`: (?P<why>.+?)(?: Bundler cannot continue|$)",
    re.MULTILINE,
)
_BUNDLER_LOCKED = re.compile(
    r"Bundler (?P<have>\S+) is running, but your lockfile was generated with "
    r"(?P<want>\d+(?:\.\d+)*)"
)
_RUBY_VERSION = re.compile(r"Your Ruby version is (?P<have>\S+), but your Gemfile specified (\S+)")
_PY_VERSION = re.compile(
    r"(?:requires-python|Python requirement|incompatible with the project's Python).*", re.I
)
_PY_UNKNOWN = re.compile(
    r"Because (?P<pkg>[\w.-]+) was not found in the (?:package registry|cache|provided package "
    r"locations)|No matching distribution found for (?P<pip>[\w.-]+)|"
    r"(?P<ver>[\w.-]+)==[\w.]+ .*(?:no version|not found)",
    re.IGNORECASE,
)
_PY_BUILD = re.compile(r"Failed to build `?(?P<pkg>[\w.-]+)|Failed building wheel for (?P<w>\S+)")


def classify(step: StepResult, stack: str, *, network: bool) -> tuple[Cause, str]:
    """The cause of a failed install step and a one-line message with what to do."""
    text = step.output
    if step.timed_out:
        return "timeout", f"{_cmd(step)} did not finish within its timeout"
    if step.exit_code == 127 and "could not start" not in text and len(text) < 300:
        return "tool_missing", f"{text.strip() or step.argv[0]}: not installed"
    found = _ruby(text, network=network) if stack == "ruby" else _python(text, network=network)
    if found is not None:
        return found
    return "build_failed", f"{_cmd(step)} exited {step.exit_code}: {last_line(text)}"


def _ruby(text: str, *, network: bool) -> tuple[Cause, str] | None:
    if m := _RUBY_VERSION.search(text):
        return "toolchain_mismatch", one(m.group(0))
    if m := _GEMFILE_ERROR.search(text):
        locked = _BUNDLER_LOCKED.search(text)
        why = one(m.group("why"), 180)
        if locked or "upgrading Bundler" in m.group("why"):
            made = f" (the lock was made with {locked['want']})" if locked else ""
            have = locked["have"] if locked else "this one"
            return (
                "toolchain_mismatch",
                f"{m['file']} needs a newer Bundler than {have}{made}: {why}",
            )
        return "build_failed", f"{m['file']}: {why}"
    if _LOCK.search(text):
        return "lock_unresolvable", (
            f"{one(_LOCK.search(text).group(0))}: run `bundle lock` and commit Gemfile.lock"  # type: ignore[union-attr]
        )
    if m := _GEM_NATIVE.search(text):
        gem = m.group("gem")
        header = _header(text)
        hint = "ruby-dev" if header == RUBY_HEADERS else NATIVE_HINTS.get(gem)
        need = f"header {header}" if header else "a native library"
        fix = f" (install {hint})" if hint else " (install its -dev package)"
        return "missing_native_library", f"gem {gem} {m.group('v')} needs {need}{fix}"
    if _NETWORK.search(text):
        return "no_registry_access", f"no registry access: {one(_network_line(text))}"
    if m := _GEM_UNKNOWN.search(text):
        gem = m.group("gem") or m.group("list")
        where = "in any source" if network else "locally (the network was not allowed)"
        return "unknown_package", f"gem {gem} not found {where}"
    return None


def _python(text: str, *, network: bool) -> tuple[Cause, str] | None:
    if _LOCK.search(text):
        return "lock_unresolvable", f"{one(_LOCK.search(text).group(0))}: run `uv lock`"  # type: ignore[union-attr]
    if m := _PY_VERSION.search(text):
        return "toolchain_mismatch", one(m.group(0))
    header = _header(text)
    build = _PY_BUILD.search(text)
    if header or (build and "error: command" in text):
        pkg = (build.group("pkg") or build.group("w")) if build else None
        hint = NATIVE_HINTS.get((pkg or "").lower())
        need = f"header {header}" if header else "a compiler or native library"
        fix = f" (install {hint})" if hint else " (install its -dev package)"
        return "missing_native_library", f"package {pkg or '?'} needs {need}{fix}"
    if m := _PY_UNKNOWN.search(text):
        pkg = m.group("pkg") or m.group("pip") or m.group("ver")
        if m.group("pip") and _NETWORK.search(text):
            return "no_registry_access", f"no registry access: {one(_network_line(text))}"
        where = "in the package index" if network else "offline (the network was not allowed)"
        return "unknown_package", f"package {pkg} not found {where}"
    if _NETWORK.search(text):
        return "no_registry_access", f"no registry access: {one(_network_line(text))}"
    return None


def _header(text: str) -> str | None:
    m = _HEADER.search(text)
    if m is None:
        return None
    if m.group("rubyh"):
        return RUBY_HEADERS
    if m.group("pgconfig"):
        return "libpq-fe.h (pg_config)"
    return m.group("check") or m.group("fatal") or m.group("cant")


def _network_line(text: str) -> str:
    for line in text.splitlines():
        if _NETWORK.search(line):
            return line
    return last_line(text)


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
