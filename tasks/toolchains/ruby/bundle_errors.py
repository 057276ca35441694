"""Why ``bundle install`` failed, in one line (the Ruby rules of :mod:`tasks.envs.classify`)."""

from __future__ import annotations

import re

from tasks.envs.classify import header, native_hint, no_registry, one
from tasks.envs.types import Cause

#: What a native gem lacks on a machine without Ruby's own development headers.
RUBY_HEADERS = "ruby.h (Ruby's development headers)"
_RUBY_H = re.compile(r"can't find header files for ruby")
_GEM_UNKNOWN = re.compile(
    r"Could not find gem '(?P<gem>[^' ]+)[^']*'|Could not find (?P<list>[\w.-]+-\d[\w.]*"
    r"(?:, [\w.-]+)*) in (?:any of the sources|locally installed gems)"
)
_GEM_NATIVE = re.compile(r"An error occurred while installing (?P<gem>[\w.-]+) \((?P<v>[^)]+)\)")
_LOCK = re.compile(
    r"You are trying to install in deployment mode after changing|"
    r"Your bundle only supports platforms|The gemspecs for path gems changed|"
    r"Your lockfile is unreadable|lockfile .* (?:is|needs to be) updated|"
    r"Unable to find lockfile",
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


def bundler_rules(text: str, network: bool) -> tuple[Cause, str] | None:
    """The cause of a failed ``bundle install`` and what to do, or None."""
    if m := _RUBY_VERSION.search(text):
        return "toolchain_mismatch", one(m.group(0))
    if m := _GEMFILE_ERROR.search(text):
        return _gemfile_error(text, m)
    if lock := _LOCK.search(text):
        return (
            "lock_unresolvable",
            f"{one(lock.group(0))}: run `bundle lock` and commit Gemfile.lock",
        )
    if m := _GEM_NATIVE.search(text):
        gem = m.group("gem")
        lacks = RUBY_HEADERS if _RUBY_H.search(text) else header(text)
        fix = " (install ruby-dev)" if lacks == RUBY_HEADERS else native_hint(gem)
        need = f"header {lacks}" if lacks else "a native library"
        return "missing_native_library", f"gem {gem} {m.group('v')} needs {need}{fix}"
    if found := no_registry(text):
        return found
    if m := _GEM_UNKNOWN.search(text):
        gem = m.group("gem") or m.group("list")
        where = "in any source" if network else "locally (the network was not allowed)"
        return "unknown_package", f"gem {gem} not found {where}"
    return None


def _gemfile_error(text: str, m: re.Match[str]) -> tuple[Cause, str]:
    locked = _BUNDLER_LOCKED.search(text)
    why = one(m.group("why"), 180)
    if locked or "upgrading Bundler" in m.group("why"):
        made = f" (the lock was made with {locked['want']})" if locked else ""
        have = locked["have"] if locked else "this one"
        return "toolchain_mismatch", f"{m['file']} needs a newer Bundler than {have}{made}: {why}"
    return "build_failed", f"{m['file']}: {why}"
